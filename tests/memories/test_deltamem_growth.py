"""A bank that stays fast as it grows: learn reuses the recall it is given, an open bank
keeps its text in the store, statistics come from the trees' columns."""

from __future__ import annotations

import pytest

from deltamem import DeltaMem
from deltamem.core.tree import ResidualTree
from deltamem.embed import HashingEmbedder
from deltamem.store.sql import SQLTreeStore
from deltamem.testing import make_episode

H = HashingEmbedder(dim=64)
GOALS = ["put a clean apple in fridge", "put a hot egg in garbagecan", "examine the book",
         "put a clean apple in fridge", "put two cellphone in sofa", "put a hot egg in sofa"]


def filled(path, n: int = 6) -> DeltaMem:
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", tau_task=0.6, tau_env=0.6)
    for i in range(n):
        ep = make_episode(GOALS[i % len(GOALS)], success=i % 3 != 2, episode_id=f"e{i}")
        mem.learn(ep, mem.recall(ep.task))
    return mem


@pytest.fixture
def counted(monkeypatch):
    """Counts of Eq. 6 scans (in-process) and of full hit/flag refreshes from the store."""
    calls = {"match": 0, "node_states": 0}
    real_match, real_states = ResidualTree.match, SQLTreeStore.node_states

    def match(self, *a, **k):
        calls["match"] += 1
        return real_match(self, *a, **k)

    def node_states(self):
        calls["node_states"] += 1
        return real_states(self)

    monkeypatch.setattr(ResidualTree, "match", match)
    monkeypatch.setattr(SQLTreeStore, "node_states", node_states)
    return calls


def test_learn_given_its_recall_scans_nothing_again(tmp_path, counted):
    mem = filled(tmp_path / "b.db")
    for i, goal in enumerate(GOALS):
        ep = make_episode(goal, episode_id=f"again-{i}")
        recall = mem.recall(ep.task)
        before = dict(counted)
        changes = mem.learn(ep, recall)
        assert counted == before, changes  # no Eq. 6 scan, no refresh of every node
        assert changes.written or [c for c in changes if c.kind in ("hit", "skipped")]


def test_learn_without_a_recall_scans_each_tree_once(tmp_path, counted):
    mem = filled(tmp_path / "b.db")
    before = counted["match"]
    mem.learn(make_episode("put a hot egg in fridge", episode_id="alone"))
    assert counted["match"] - before == 2  # its own recall: Task-Tree and Env-Tree


def test_an_open_bank_reads_recalled_text_from_the_store(tmp_path):
    mem = filled(tmp_path / "b.db")
    task = make_episode(GOALS[0]).task
    want = mem.recall(task)
    payloads = [n.payload for n in mem.nodes("task")]
    mem.close()
    again = DeltaMem.open(tmp_path / "b.db", embedder=H)
    try:
        assert all(t._held is None for t in again.trees.values())  # no text in memory
        got = again.recall(task)
        assert got.text == want.text and got.text
        assert got.details == want.details
        assert [n.payload for n in again.nodes("task")] == payloads
    finally:
        again.close()


def test_stats_agree_with_the_nodes(tmp_path):
    mem = filled(tmp_path / "b.db", n=12)
    s = mem.stats()
    for t in ("task", "env"):
        nodes = mem.nodes(t)
        kinds: dict[str, int] = {}
        labels: dict[str, int] = {}
        for n in nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
            labels[n.label] = labels.get(n.label, 0) + 1
        assert s["kind"][t] == kinds and s["label"][t] == labels
        assert s["consolidated"][t] == sum(n.consolidated for n in nodes)
        assert s["failure_hits"][t] == sum(n.failure_hits for n in nodes)
    every = mem.nodes("task") + mem.nodes("env")
    for kind in ("ROOT", "RESIDUAL"):
        sizes = [len(n.payload.text.split()) for n in every if n.kind == kind]
        assert s["avg_tokens"][kind] == (round(sum(sizes) / len(sizes), 1) if sizes else 0.0)


def test_the_first_learn_after_an_open_copies_no_matrix(tmp_path):
    """An open bank makes room up front (``OPEN_HEADROOM``): the learns after an open append
    rows in place instead of copying the whole matrix to a larger one (issue 26), and what
    they recall and write is what a bank without the headroom gives."""
    from deltamem.memories.deltamem import bank as dm

    filled(tmp_path / "b.db").close()
    mem = DeltaMem.open(tmp_path / "b.db", embedder=H)
    arrays = {t: tree._emb for t, tree in mem.trees.items()}
    assert all(tree._emb.shape[0] >= 2 * len(tree) for tree in mem.trees.values())
    for i, goal in enumerate(GOALS):
        ep = make_episode(goal, success=i % 2 == 0, episode_id=f"after-{i}")
        mem.learn(ep, mem.recall(ep.task))
    assert all(mem.trees[t]._emb is arrays[t] for t in arrays)  # appended in place
    got = [(n.id, n.parent, n.depth, n.success_hits) for t in ("task", "env")
           for n in mem.nodes(t)]
    mem.close()
    (tmp_path / "c").mkdir()
    filled(tmp_path / "c" / "b.db").close()
    old = dm.OPEN_HEADROOM
    dm.OPEN_HEADROOM = 1  # the room of an open before issue 26
    try:
        again = DeltaMem.open(tmp_path / "c" / "b.db", embedder=H)
        for i, goal in enumerate(GOALS):
            ep = make_episode(goal, success=i % 2 == 0, episode_id=f"after-{i}")
            again.learn(ep, again.recall(ep.task))
        want = [(n.parent is None, n.depth, n.success_hits) for t in ("task", "env")
                for n in again.nodes(t)]
        again.close()
    finally:
        dm.OPEN_HEADROOM = old
    assert [(p is None, d, h) for _, p, d, h in got] == want
