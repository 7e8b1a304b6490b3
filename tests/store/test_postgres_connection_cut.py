"""A cut PostgreSQL connection (issue 51): ``pg_terminate_backend`` of a bank's backend between
calls and in the middle of a learn's transaction. The store connects again; a read or a learn
whose transaction the server rolled back is tried once more; nothing is half-written."""

from __future__ import annotations

import os
import uuid

import pytest

URL = os.environ.get("DELTAMEM_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not URL, reason="DELTAMEM_TEST_PG_URL is not set (run "
                                "scripts/postgres-test-server.sh)")
psycopg = pytest.importorskip("psycopg")

from deltamem.embed import HashingEmbedder  # noqa: E402
from deltamem.memories.deltamem import DeltaMem  # noqa: E402
from deltamem.testing import make_episode  # noqa: E402

GOALS = ["put a clean apple in fridge", "heat some egg and put it in countertop"]


@pytest.fixture
def mem():
    from deltamem.store.postgres import drop_bank

    loc = f"{URL}{'&' if '?' in str(URL) else '?'}bank=cut-{uuid.uuid4().hex[:8]}"
    m = DeltaMem.open(loc, embedder=HashingEmbedder(dim=32))
    yield m
    m.close()
    drop_bank(loc)


def terminate(mem: DeltaMem) -> None:
    pid = mem.store._exec("SELECT pg_backend_pid()").fetchone()[0]
    with psycopg.connect(str(URL).split("?")[0], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_cut_between_calls_is_reconnected(mem):
    mem.learn(make_episode(GOALS[0], episode_id="e0"))
    terminate(mem)
    assert mem.recall(make_episode(GOALS[0]).task).items
    terminate(mem)
    mem.learn(make_episode(GOALS[1], episode_id="e1"))
    assert mem.store.learned_count() == 2


def test_a_cut_inside_a_learn_is_rolled_back_and_tried_once_more(mem, monkeypatch):
    """The backend is terminated after the learn's first write: the server rolls the
    transaction back; the learn runs again on a new connection and is written once."""
    store = mem.store
    real = store.mark_learned
    cut = []

    def mark_then_cut(*a, **kw):
        out = real(*a, **kw)
        if not cut:
            cut.append(1)
            pid = store._conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            with psycopg.connect(str(URL).split("?")[0], autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return out

    monkeypatch.setattr(store, "mark_learned", mark_then_cut)
    changes = mem.learn(make_episode(GOALS[0], episode_id="e0"))
    assert cut and [c.kind for c in changes] == ["written", "written"]
    assert store.learned_count() == 1 and len(store.load_nodes()) == 2
    assert store.integrity_ok()
