"""The inspector's store calls on every backend: a node's text, label and embedding replaced
in place, a node re-inserted with its old ``seq``, the bank's own meta key; and the whole
inspector (edit, hide, delete a subtree, undo) on a DeltaMem bank of each backend."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem import DeltaMem, Task
from deltamem.core.payload import Payload
from deltamem.embed import HashingEmbedder
from deltamem.errors import StoreError
from deltamem.memories.deltamem.edit_log import EDITS_KEY
from deltamem.testing import make_episode

from .test_forgetting_store import _node, _store

EMB = HashingEmbedder(dim=64)


def test_update_node_and_set_meta(new_bank) -> None:
    store = _store(new_bank())
    store.insert_node(_node("r"))
    store.insert_node(_node("c", "r", 2))
    vec = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32)
    store.update_node("c", label="FAILURE", trigger="new", payload=Payload("a", "p", "t"),
                      embedding=vec)
    (c,) = store.nodes_by_id(["c"])
    assert (c.label, c.trigger, c.payload, c.parent, c.depth, c.seq) == (
        "FAILURE", "new", Payload("a", "p", "t"), "r", 2, 2)
    assert np.array_equal(c.embedding, vec)
    with pytest.raises(StoreError):
        store.update_node("nosuch", label="SUCCESS", trigger="x", payload=Payload("a", "p"),
                          embedding=vec)
    store.set_meta(EDITS_KEY, "3")
    assert store.meta()[EDITS_KEY] == "3"
    with pytest.raises(StoreError):
        store.set_meta("embedder_name", "other")
    store.delete_nodes(["c"])
    store.insert_node(c, keep_seq=True)  # an undone deletion keeps its place
    assert [n.seq for n in store.load_nodes()] == [1, 2]
    store.close()


def test_inspector_round_trip_on_every_backend(new_bank) -> None:
    loc = new_bank()
    mem = DeltaMem.open(loc, embedder=EMB, domain="alfworld", tau_task=0.5)
    for i, n in enumerate((1, 2, 3)):
        mem.learn(make_episode("put a clean apple in fridge", success=True, episode_id=f"e{i}",
                               actions=[("go to sinkbasin 1", "ok"), ("clean apple 1", "ok"),
                                        ("go to fridge 1", "ok")][:n]))
    original = {n.id: (n, n.embedding.tobytes()) for n in mem.store.load_nodes()}
    task = Task(id="q", goal="put a clean apple in fridge", domain="alfworld")
    chain = mem.recall(task).matches["task"].chain
    root = chain[0]
    e = mem.edit_node(chain[-1], who="ana", trigger="heat an egg", procedure="1. heat")
    h = mem.hide_node(root, who="ana")
    assert not mem.recall(task).matches["task"].accepted
    d = mem.delete_node(root, who="ana", subtree=True)
    for x in (d, h, e):
        mem.undo_edit(x.id, who="ana")
    now = {n.id: (n, n.embedding.tobytes()) for n in mem.store.load_nodes()}
    assert now == original
    assert mem.recall(task).matches["task"].chain == chain
    mem.close()


def test_another_open_bank_sees_the_edits(new_bank) -> None:
    """A second connection's bank view reloads when the edit counter moves (edits change
    nodes in place, which the append-only reload alone would miss)."""
    loc = new_bank()
    a = DeltaMem.open(loc, embedder=EMB, domain="alfworld", tau_task=0.5)
    a.learn(make_episode("put a clean apple in fridge", episode_id="e0"))
    b = DeltaMem.open(loc, embedder=EMB)
    node = a.nodes("task")[0]
    assert b.recall(Task(id="q", goal="put a clean apple in fridge",
                         domain="alfworld")).matches["task"].accepted
    wash = Task(id="w", goal="wash a plate in the sinkbasin", domain="alfworld")
    a.edit_node(node.id, who="ana", trigger=a.queries(wash)["task"])
    assert b.recall(wash).matches["task"].node_id == node.id
    h = a.hide_node(node.id, who="ana")
    assert node.id not in {n.id for n in b.nodes("task")}
    a.undo_edit(h.id, who="ana")
    assert node.id in {n.id for n in b.nodes("task")}
    a.close()
    b.close()
