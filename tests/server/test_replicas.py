"""Two ``deltamem serve`` replicas on the test PostgreSQL: clients spread over both, one replica
SIGKILLed mid-load, and the bank audited against a one-process replay in commit order.

The replica test needs ``DELTAMEM_TEST_PG_URL`` (``scripts/postgres-test-server.sh``), psycopg
and the server extra; it skips without them. The audit's own checks run on SQLite too: each
must be able to fail.
"""

from __future__ import annotations

import os
import random
import uuid

import pytest

from deltamem import DeltaMem
from deltamem.embed.factory import make_embedder
from deltamem.server.replicas import (
    audit,
    episode_body,
    run_load,
    start_replicas,
    stop_replicas,
    write_key_file,
)
from deltamem.service.models import EpisodeIn

PG_URL = os.environ.get("DELTAMEM_TEST_PG_URL", "")
EMB = "hashing:256"


def _bodies(n: int) -> dict[str, dict]:
    rng = random.Random(3)
    return {b["id"]: b for b in (episode_body(0, i, rng) for i in range(n))}


def test_two_replicas_with_one_killed_mid_load_decide_as_one_process(tmp_path):
    if not PG_URL:
        pytest.skip("DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
    pytest.importorskip("psycopg")
    pytest.importorskip("uvicorn")
    from deltamem.service.banks import BankSpace
    from deltamem.store.postgres import drop_bank

    tenant = "rep" + uuid.uuid4().hex[:8]
    key = write_key_file(tmp_path / "keys.json", tenant)
    replicas = start_replicas(PG_URL, 2, keys=tmp_path / "keys.json", embedder=EMB,
                              log_dir=tmp_path)
    try:
        load = run_load(replicas, key=key, bank="shared", clients=4, learns=12, seed=1, kill=0,
                        deadline_s=240)
    finally:
        stop_replicas(replicas)
    loc = BankSpace(PG_URL).location(tenant, "shared")
    try:
        found = audit(loc, load.episodes, embedder=EMB)
    finally:
        drop_bank(loc)
    assert load.killed == 0 and not replicas[0].alive()
    assert load.server_errors == 0 and load.unfinished == 0
    assert set(load.statuses) == {200} and load.requests == 4 * 12 * 2
    assert found.learned == found.sent == 48 and found.lost == 0
    assert found.duplicate_roots == {"task": 0, "env": 0}
    assert found.duplicate_consolidations == 0
    assert found.replay_equal, found.differences
    assert found.ok


def test_the_audit_finds_a_root_written_twice_and_a_replay_that_differs(tmp_path):
    """Two learns given the same stale (empty) recall write two ROOTs of one goal: the audit
    counts the second, and a one-process replay (which decides on the first ROOT) differs."""
    bodies = _bodies(2)
    first, second = bodies.values()
    second["task"] = dict(first["task"])  # the same goal and scene
    loc = str(tmp_path / "bank.db")
    mem = DeltaMem.open(loc, embedder=make_embedder(EMB), domain="alfworld")
    stale = mem.recall(EpisodeIn.model_validate(first).to_episode().task)
    for b in (first, second):
        mem.learn(EpisodeIn.model_validate(b).to_episode(), stale)
    mem.close()
    found = audit(loc, bodies, embedder=EMB)
    assert found.duplicate_roots["task"] == 1 and found.duplicate_roots["env"] == 1
    assert not found.replay_equal and found.differences
    assert not found.ok


def test_the_audit_finds_an_episode_that_was_not_learned(tmp_path):
    bodies = _bodies(3)
    loc = str(tmp_path / "bank.db")
    mem = DeltaMem.open(loc, embedder=make_embedder(EMB), domain="alfworld")
    for b in list(bodies.values())[:2]:
        mem.learn(EpisodeIn.model_validate(b).to_episode())
    mem.close()
    found = audit(loc, bodies, embedder=EMB)
    assert (found.lost, found.learned, found.sent) == (1, 2, 3)
    assert found.replay_equal  # what was learned is what one process makes of it
    assert not found.ok
