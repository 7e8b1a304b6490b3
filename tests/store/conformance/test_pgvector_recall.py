"""DeltaMem on PostgreSQL searching with pgvector (``search="store"``; ``auto`` behind HNSW)
gets the in-process result.

Random learn sequences over a small vocabulary, so triggers repeat exactly (identical
embeddings: ties between a node, its residuals and the root consolidated from it), with
failures (the ε penalty) and K_cons = 2 (consolidated nodes). For every query the
store's search and the in-process exact search return the same node, the same exact
score and the same acceptance; and the same learn sequence gives the same recalls,
changes and trees on SQLite (in-process search) and PostgreSQL (search in the database).
"""

from __future__ import annotations

import math
import random
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from deltamem import DeltaMem
from deltamem.core.payload import ChainEntry, Payload
from deltamem.core.tree import BestNode, exact_cosine
from deltamem.errors import ConfigError
from deltamem.extract.base import SKIPPABLE
from deltamem.testing import make_episode
from deltamem.types import Episode, Task

from .store_cases import AlwaysWrites, H, pg_url_or_skip

GOALS = [
    "put a clean apple in fridge",
    "put a hot apple in fridge",
    "put a clean apple in the fridge",
    "examine the book with the desklamp",
    "heat some egg and put it in garbagecan",
]
SCENES = ["kitchen with a fridge 1", "bedroom with a desk 1", "kitchen with a fridge 1 and a sink"]
UNSEEN = ["put a cold apple in fridge", "examine the pen with the desklamp", "open the drawer"]
ACTIONS = [("go to countertop 1", "You see an apple 1."), ("take apple 1", "You pick it up.")]
HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")


class SometimesSkips(AlwaysWrites):
    """Skips the warm writes of episodes e…0/3/6/9, so matched nodes collect hits (K_cons)."""

    name = "sometimes-skips"

    def extract(
        self, role: str, episode: Episode, chain: list[ChainEntry], domain: str
    ) -> Payload | None:
        if role in SKIPPABLE and re.fullmatch(r"e\d*[0369]", episode.id):
            return None
        return super().extract(role, episode, chain, domain)


@pytest.fixture
def pg_bank() -> Iterator[Callable[..., str]]:
    """Factory of fresh PostgreSQL bank URLs (dropped afterwards)."""
    from deltamem.store.postgres import drop_bank

    url = pg_url_or_skip()
    made: list[str] = []

    def make(index: str = "exact") -> str:
        sep = "&" if "?" in url else "?"
        loc = f"{url}{sep}bank=recall-{uuid.uuid4().hex[:10]}"
        if index != "exact":
            loc += f"&index={index}"
        made.append(loc)
        return loc

    yield make
    for loc in made:
        drop_bank(loc)


def config(rng: random.Random) -> dict[str, Any]:
    return {
        "domain": "alfworld",
        "tie_rule": "deepest",  # the store's own search implements deepest
        "tau_task": rng.choice([0.3, 0.6, 0.9]),
        "tau_env": rng.choice([0.3, 0.6, 0.9]),
        "epsilon": rng.choice([0.0, 0.05, 0.3]),
        "k_cons": 2,
        "d_max": rng.choice([2, 3]),
    }


def episodes(rng: random.Random, n: int) -> list[Episode]:
    return [
        make_episode(rng.choice(GOALS), scene=rng.choice(SCENES), actions=ACTIONS,
                     success=rng.random() < 0.6, episode_id=f"e{i}")
        for i in range(n)
    ]  # fmt: skip


def tasks() -> list[Task]:
    return [
        Task(id=f"q{i}", goal=g, scene=s, domain="alfworld")
        for i, (g, s) in enumerate((g, s) for g in GOALS + UNSEEN for s in SCENES[:2])
    ]


def open_mem(loc: str, cfg: dict[str, Any], **kw: Any) -> DeltaMem:
    # raw texts in both trees, so the tests' query vectors are the embedded goal and scene
    raw = {"task_trigger": "goal", "env_trigger": "scene"}
    return DeltaMem.open(loc, embedder=H, extractor=SometimesSkips(), **{**raw, **cfg, **kw})


def exact_score(mem: DeltaMem, tree: str, node_id: str, q: np.ndarray) -> float:
    """s(v) by the definition (Eq. 6): the exact cosine, minus ε for FAILURE."""
    node = next(n for n in mem.nodes(tree) if n.id == node_id)  # type: ignore[arg-type]
    q64 = np.asarray(q, dtype=np.float32).astype(np.float64)
    s = exact_cosine(np.asarray(node.embedding, dtype=np.float32), q64)
    return s - mem.config.epsilon if node.label == "FAILURE" else s


@pytest.mark.parametrize("seed", range(10))
def test_store_search_equals_in_process_search(pg_bank, seed):
    rng = random.Random(seed)
    cfg = config(rng)
    loc = pg_bank()
    in_db = open_mem(loc, cfg, search="store")
    assert in_db.store_search is in_db.store
    for ep in episodes(rng, 24):
        in_db.learn(ep)
    local = open_mem(loc, cfg, search="exact")
    assert local.store_search is None
    stats = local.stats()
    assert sum(stats["consolidated"].values()) > 0  # R* ties with the node it was made from
    assert stats["label"]["task"].get("FAILURE", 0) > 0
    for task in tasks():
        got, want = in_db.match(task), local.match(task)
        assert got == want  # same node id, exact score, τ and acceptance
        q = in_db.queries(task)
        for tree, m in got.items():
            assert m.node_id is not None and m.score is not None
            vec = H.embed_queries([q[tree]])[0]
            assert m.score == exact_score(local, tree, m.node_id, vec)
            # acceptance exactly at τ = s(v*) and just above it
            at = in_db.store.match(tree, vec, m.score, cfg["epsilon"])
            above = in_db.store.match(tree, vec, math.nextafter(m.score, 2.0), cfg["epsilon"])
            assert at == local.trees[tree].match(vec, m.score, cfg["epsilon"]) and at.accepted
            assert not above.accepted and above.node_id == m.node_id
        assert in_db.recall(task) == local.recall(task)
    in_db.close()
    local.close()


def test_failure_nodes_are_matched_with_the_exact_penalty(pg_bank):
    loc = pg_bank()
    cfg = {"domain": "alfworld", "tau_task": 0.5, "tau_env": 0.5, "epsilon": 0.05,
           "tie_rule": "deepest"}
    mem = open_mem(loc, cfg, search="store")
    mem.learn(make_episode(GOALS[0], scene=SCENES[0], success=False, episode_id="f1"))
    task = Task(id="q", goal=GOALS[0], scene=SCENES[0], domain="alfworld")
    got = mem.match(task)
    vec = H.embed_queries([GOALS[0]])[0]
    assert got["task"].score == exact_score(mem, "task", got["task"].node_id, vec)
    assert got["task"].score < 1.0 - 0.04  # the penalty was applied
    local = open_mem(loc, cfg, search="exact")
    assert local.match(task) == got
    mem.close()
    local.close()


def _key_map(mem: DeltaMem) -> dict[str, str]:
    """Node id → a backend-independent name: tree, episode and origin."""
    return {n.id: f"{n.tree}:{n.episode_id}:{n.origin}" for t in ("task", "env")
            for n in mem.nodes(t)}  # type: ignore[arg-type]  # fmt: skip


def _neutral(value: Any, keys: dict[str, str]) -> Any:
    """``value`` (a recall/changes dict) with node ids replaced by their names."""
    if isinstance(value, str):
        return HEX_ID.sub(lambda m: keys.get(m.group(0), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _neutral(v, keys) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_neutral(v, keys) for v in value]
    return value


def _shape(mem: DeltaMem) -> list[tuple[Any, ...]]:
    keys = _key_map(mem)
    return sorted(
        (keys[n.id], keys.get(n.parent or "", None), n.depth, n.kind, n.label, n.success_hits,
         n.consolidated, n.payload)
        for t in ("task", "env") for n in mem.nodes(t)  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize(("seed", "search"), [(s, "store") for s in range(6)]
                         + [(s, "auto") for s in range(2)])
def test_same_learns_give_the_same_recalls_on_sqlite_and_postgres(pg_bank, tmp_path, seed,
                                                                  search):
    rng = random.Random(100 + seed)
    cfg = config(rng)
    lite = open_mem(str(tmp_path / "bank.db"), cfg)
    pg = open_mem(pg_bank(), cfg, search=search)
    assert lite.store_search is None and (pg.store_search is not None) == (search == "store")
    for ep in episodes(rng, 24):
        r_lite, r_pg = lite.recall(ep.task), pg.recall(ep.task)
        k_lite, k_pg = _key_map(lite), _key_map(pg)
        assert _neutral(r_pg.to_dict(), k_pg) == _neutral(r_lite.to_dict(), k_lite)
        c_lite, c_pg = lite.learn(ep, r_lite), pg.learn(ep, r_pg)
        k_lite, k_pg = _key_map(lite), _key_map(pg)
        assert _neutral(c_pg.to_list(), k_pg) == _neutral(c_lite.to_list(), k_lite)
    assert _shape(pg) == _shape(lite)
    for task in tasks():
        assert _neutral(pg.recall(task).to_dict(), _key_map(pg)) == _neutral(
            lite.recall(task).to_dict(), _key_map(lite)
        )
    lite.close()
    pg.close()


class _CommitFirst:
    """A store search that lets another writer commit just before it runs (once)."""

    def __init__(self, store: Any, commit: Callable[[], None]) -> None:
        self.store, self.commit = store, commit

    def match(self, tree: str, query: np.ndarray, tau: float, epsilon: float) -> BestNode:
        if self.commit is not None:
            commit, self.commit = self.commit, None
            commit()
        return self.store.match(tree, query, tau, epsilon)


def test_a_node_committed_elsewhere_is_recalled_and_learned_under(pg_bank):
    loc = pg_bank()
    cfg = {"domain": "alfworld", "tau_task": 0.6, "tau_env": 0.6, "search": "store",
           "tie_rule": "deepest"}
    a, b = open_mem(loc, cfg), open_mem(loc, cfg)
    a.stats()  # a's trees are loaded (empty) before b writes
    first = make_episode(GOALS[0], scene=SCENES[0], episode_id="by-b")
    a.store_search = _CommitFirst(a.store, lambda: b.learn(first))
    recall = a.recall(first.task)  # b commits between a's reload and a's search
    b_root = next(n for n in b.nodes("task") if n.episode_id == "by-b")
    assert recall.details["task"]["node_id"] == b_root.id and recall.details["task"]["accepted"]
    assert recall.details["task"]["chain"] == [b_root.id] and recall.text
    second = make_episode(GOALS[0], scene=SCENES[0], episode_id="by-a")
    changes = a.learn(second, recall)
    assert [c.kind for c in changes if c.source == "task"] == ["written", "hit"]
    child = next(n for n in b.nodes("task") if n.episode_id == "by-a")
    assert child.kind == "RESIDUAL" and child.parent == b_root.id
    a.close()
    b.close()


def test_learn_reloads_when_the_recalled_node_is_not_loaded_yet(pg_bank):
    loc = pg_bank()
    cfg = {"domain": "alfworld", "tau_task": 0.6, "tau_env": 0.6}
    a, b = open_mem(loc, cfg), open_mem(loc, cfg)
    b.learn(make_episode(GOALS[1], scene=SCENES[1], episode_id="b1"))
    recall = b.recall(make_episode(GOALS[1], scene=SCENES[1]).task)  # another process's recall
    a.bank._version = a.store.version()  # a believes it is up to date although it never loaded b1
    changes = a.learn(make_episode(GOALS[1], scene=SCENES[1], episode_id="a1"), recall)
    assert [c.kind for c in changes] == ["written", "hit", "written", "hit"]
    assert all(n.kind == "RESIDUAL" for n in a.nodes("task") if n.episode_id == "a1")
    a.close()
    b.close()


def test_search_modes_by_backend(pg_bank, tmp_path):
    lite = DeltaMem.open(tmp_path / "b.db", embedder=H)
    assert lite.config.search == "auto" and lite.store_search is None
    lite.close()
    with pytest.raises(ConfigError, match="search='store'"):
        DeltaMem.open(tmp_path / "c.db", embedder=H, search="store")
    loc = pg_bank()
    # auto: the database's search only behind an index (the exact scan runs in-process)
    for search, in_store in (("auto", False), ("store", True), ("exact", False)):
        mem = DeltaMem.open(loc, embedder=H, search=search)
        assert (mem.store_search is not None) == in_store
        mem.close()
    mem = DeltaMem.open(pg_bank("hnsw"), embedder=H)
    assert mem.store_search is mem.store
    mem.close()


@pytest.mark.parametrize(("search", "in_store"), [("store", True), ("auto", False)])
def test_a_postgres_recall_scans_in_one_place_only(pg_bank, monkeypatch, search, in_store):
    from deltamem.core.tree import ResidualTree
    from deltamem.store.postgres import PostgresStore

    mem = open_mem(pg_bank(), {"domain": "alfworld", "tie_rule": "deepest"}, search=search)
    mem.learn(make_episode(GOALS[0], episode_id="e0"))

    def refuse(*_: Any, **__: Any) -> BestNode:
        raise AssertionError("the other search was used")

    monkeypatch.setattr(ResidualTree if in_store else PostgresStore, "match", refuse)
    r = mem.recall(make_episode(GOALS[0]).task)
    assert r.details["task"]["accepted"] and r.text
    mem.close()


def test_a_learn_rereads_only_what_it_touched_unless_another_process_wrote(pg_bank):
    loc = pg_bank()
    cfg = {"domain": "alfworld"}
    a, b = open_mem(loc, cfg), open_mem(loc, cfg)
    a.learn(make_episode(GOALS[0], episode_id="a0"))
    full: list[int] = []
    states = a.store.node_states

    def counted() -> Any:
        full.append(1)
        return states()

    a.store.node_states = counted  # type: ignore[method-assign]
    ep = make_episode(GOALS[0], episode_id="a1")
    a.learn(ep, a.recall(ep.task))
    assert full == [] and a.store.own_commit is not None  # its own commit: no full re-read
    b.learn(make_episode(GOALS[1], episode_id="b0"))
    ep = make_episode(GOALS[0], episode_id="a2")
    a.learn(ep, a.recall(ep.task))
    assert full == [1]  # b committed since: every node's state read once
    assert _shape(a) == _shape(open_mem(loc, cfg))
    a.close()
    b.close()
