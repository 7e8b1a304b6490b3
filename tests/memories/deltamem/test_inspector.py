"""The inspector's edits as a library (no browser, no service): edit, hide, relabel, delete,
undo round trips, recall after each, the audit rows, another process seeing the edit."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem import DeltaMem, Task
from deltamem.embed import HashingEmbedder
from deltamem.errors import (
    BankReadOnlyError,
    EditConflictError,
    EmbedderError,
    InvalidInputError,
    NodeNotFound,
)
from deltamem.memories.deltamem.edit_log import EDITS_KEY, POLICY, RECORD_VERSION, hidden_ids
from deltamem.testing import make_episode

EMB = HashingEmbedder(dim=64)
GOAL = "put a hot apple in fridge"
ACTS = [("go to countertop 1", "On the countertop 1, you see a apple 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1."),
        ("go to fridge 1", "The fridge 1 is closed."),
        ("open fridge 1", "You open the fridge 1.")]  # fmt: skip


def _bank(path) -> DeltaMem:
    mem = DeltaMem.open(path, embedder=EMB, domain="alfworld", tau_task=0.5, tau_env=0.5)
    for i, (n, ok) in enumerate(((2, True), (3, True), (4, True), (1, False))):
        mem.learn(make_episode(GOAL, scene="kitchen with a fridge 1", actions=ACTS[:n],
                               success=ok, episode_id=f"e{i}"))
    mem.learn(make_episode("examine the book with the desklamp", scene="bedroom",
                           actions=ACTS[:1], episode_id="other"))
    return mem


def _task(goal: str = GOAL) -> Task:
    return Task(id="q", goal=goal, scene="kitchen with a fridge 1", domain="alfworld")


def _all(mem: DeltaMem) -> dict[str, tuple]:
    """Every stored node: its fields and embedding bytes (what 'restored exactly' means)."""
    return {n.id: (n, n.embedding.tobytes()) for n in mem.store.load_nodes()}


def _root(mem: DeltaMem):
    return next(n for n in mem.nodes("task") if n.kind == "ROOT" and GOAL.split()[1] in
                n.trigger and mem.bank.trees["task"].children(n.id))


@pytest.fixture
def mem(tmp_path):
    m = _bank(tmp_path / "bank.db")
    yield m
    m.close()


def test_edit_reembeds_and_undo_restores_exactly(mem):
    before = _all(mem)
    leaf = mem.nodes("task")[-1]
    new = mem.queries(_task("wash a plate in the sinkbasin"))["task"]  # as a learn writes it
    e = mem.edit_node(leaf.id, who="ana", trigger=new, procedure="1. go to sinkbasin 1",
                      reason="typo")
    n = mem.store.nodes_by_id([leaf.id])[0]
    assert n.trigger == new
    assert n.payload.procedure == "1. go to sinkbasin 1"
    assert n.payload.activation == leaf.payload.activation  # left alone
    assert np.array_equal(n.embedding, EMB.embed_passages([n.trigger])[0])  # re-embedded
    # the audit row: who, when, what, before and after, with its record version
    row = mem.store.audit()[-1]
    assert (row["policy"], row["action"], row["node_id"], row["reason"]) == (
        POLICY, "edited", leaf.id, "typo")
    rec = row["record"]
    assert rec["inspector"] == RECORD_VERSION and rec["who"] == "ana" and rec["op"] == "edit"
    assert rec["before"][leaf.id]["trigger"] == leaf.trigger
    assert rec["after"][leaf.id]["payload"]["execution_procedure"] == "1. go to sinkbasin 1"
    assert row["created_at"] == pytest.approx(e.at)
    # recall follows the edit: the new trigger matches, the old one no longer finds it
    r = mem.recall(_task("wash a plate in the sinkbasin"))
    assert r.matches["task"].node_id == leaf.id and "1. go to sinkbasin 1" in r.text
    u = mem.undo_edit(e.id, who="ben")
    assert u.undoes == e.id and u.op == "undo"
    assert _all(mem).keys() == before.keys()
    for i, (node, emb) in _all(mem).items():
        assert node == before[i][0] and emb == before[i][1], i  # fields and embedding bytes
    assert mem.recall(_task("wash a plate in the sinkbasin")).matches["task"].node_id != leaf.id
    assert [x.op for x in mem.edits()] == ["edit", "undo"]


def test_hide_keeps_the_subtree_out_of_recall_until_shown(mem):
    root = _root(mem)
    hit = mem.recall(_task())
    assert hit.matches["task"].accepted and hit.matches["task"].chain[0] == root.id
    h = mem.hide_node(root.id, who="ana")
    assert root.id in hidden_ids(mem.store)
    assert root.id not in mem.bank.trees["task"]
    assert all(c not in mem.bank.trees["task"] for c in hit.matches["task"].chain)
    assert root.id not in mem.recall(_task()).matches["task"].chain
    assert len(mem.store.load_nodes()) == len(_all(mem))  # kept in the store
    with pytest.raises(InvalidInputError, match="already hidden"):
        mem.hide_node(root.id, who="ana")
    mem.undo_edit(h.id, who="ana")
    assert mem.recall(_task()).matches["task"].chain == hit.matches["task"].chain


def test_relabel_penalises_and_undo_restores(mem):
    root = _root(mem)
    score = mem.match(_task())["task"].score
    chain_end = mem.recall(_task()).matches["task"].node_id
    e = mem.relabel_node(chain_end, "FAILURE", who="ana")
    assert mem.store.nodes_by_id([chain_end])[0].label == "FAILURE"
    after = mem.match(_task())["task"]
    assert after.node_id != chain_end or after.score < score  # ε now applies
    with pytest.raises(InvalidInputError):
        mem.relabel_node(root.id, "MAYBE", who="ana")
    mem.undo_edit(e.id, who="ana")
    assert mem.match(_task())["task"].score == score


def test_delete_refuses_children_unless_subtree_and_undo_brings_all_back(mem):
    before = _all(mem)
    root = _root(mem)
    with pytest.raises(EditConflictError, match="descendant"):
        mem.delete_node(root.id, who="ana")
    assert _all(mem).keys() == before.keys()  # nothing changed
    d = mem.delete_node(root.id, who="ana", subtree=True)
    gone = set(d.before)
    assert root.id in gone and len(gone) > 1 and all(v is None for v in d.after.values())
    assert gone.isdisjoint(_all(mem))
    assert not mem.recall(_task()).matches["task"].accepted or \
        mem.recall(_task()).matches["task"].node_id not in gone
    mem.undo_edit(d.id, who="ana")
    now = _all(mem)
    assert now.keys() == before.keys()
    for i, (node, emb) in now.items():  # ids, seq, counts, flags, text, embedding bytes
        assert node == before[i][0] and node.seq == before[i][0].seq and emb == before[i][1]
    leaf = next(n for n in mem.nodes("task") if not mem.bank.trees["task"].children(n.id))
    d2 = mem.delete_node(leaf.id, who="ana")  # a leaf needs no subtree
    assert list(d2.before) == [leaf.id]


def test_undo_refuses_when_a_later_edit_changed_the_node(mem):
    leaf = mem.nodes("task")[-1]
    first = mem.edit_node(leaf.id, who="ana", procedure="1. one")
    second = mem.edit_node(leaf.id, who="ana", procedure="1. two")
    with pytest.raises(EditConflictError, match="changed since"):
        mem.undo_edit(first.id, who="ana")
    mem.undo_edit(second.id, who="ana")
    mem.undo_edit(first.id, who="ana")
    assert mem.store.nodes_by_id([leaf.id])[0].payload == leaf.payload
    with pytest.raises(NodeNotFound):
        mem.undo_edit("ed-0000000000000000", who="ana")
    with pytest.raises(NodeNotFound):
        mem.edit_node("nosuch", who="ana", procedure="x")
    with pytest.raises(InvalidInputError, match="changes nothing"):
        mem.edit_node(leaf.id, who="ana", procedure=leaf.payload.procedure)
    with pytest.raises(InvalidInputError, match="who"):
        mem.edit_node(leaf.id, who=" ", procedure="1. three")


def test_undo_of_an_undo_redoes(mem):
    leaf = mem.nodes("task")[-1]
    e = mem.edit_node(leaf.id, who="ana", trigger="heat an egg")
    u = mem.undo_edit(e.id, who="ana")
    mem.undo_edit(u.id, who="ana")
    assert mem.store.nodes_by_id([leaf.id])[0].trigger == "heat an egg"


def test_another_process_sees_the_edit(tmp_path):
    a = _bank(tmp_path / "bank.db")
    b = DeltaMem.open(tmp_path / "bank.db", embedder=EMB)
    leaf = a.nodes("task")[-1]
    assert b.recall(_task()).matches["task"].accepted
    a.edit_node(leaf.id, who="ana",
                trigger=a.queries(_task("wash a plate in the sinkbasin"))["task"])
    assert a.store.meta()[EDITS_KEY] == "1"
    assert b.recall(_task("wash a plate in the sinkbasin")).matches["task"].node_id == leaf.id
    a.hide_node(leaf.id, who="ana")
    assert leaf.id not in {n.id for n in b.nodes("task")} and leaf.id in b.bank.hidden
    a.close()
    b.close()


def test_hidden_state_travels_with_an_export(tmp_path, mem):
    root = _root(mem)
    mem.hide_node(root.id, who="ana")
    mem.export(tmp_path / "x.jsonl")
    copy = DeltaMem.import_(tmp_path / "x.jsonl", tmp_path / "copy.db", embedder=EMB)
    assert root.id in copy.bank.hidden and root.id not in copy.bank.trees["task"]
    assert [e.op for e in copy.edits()] == ["hide"]
    copy.close()


def test_read_only_or_embedderless_banks_refuse(tmp_path, mem):
    leaf = mem.nodes("task")[-1]
    mem.close()
    ro = DeltaMem.open(tmp_path / "bank.db", embedder=EMB, readonly=True)
    with pytest.raises(BankReadOnlyError):
        ro.hide_node(leaf.id, who="ana")
    ro.close()
    bare = DeltaMem.open(tmp_path / "bank.db", embedder=None)
    with pytest.raises(EmbedderError, match="embedder"):  # never a stand-in vector
        bare.edit_node(leaf.id, who="ana", trigger="new text")
    bare.hide_node(leaf.id, who="ana")  # needs no embedding
    assert bare.store.audit()[-1]["record"]["after"][leaf.id]["hidden"] is True
    bare.close()
