"""The one applier of plans (memories/plan.py): each write record does what it says, on a
DeltaMem bank and on an item bank, in the order of the plan."""

from __future__ import annotations

import time

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.memories.plan import (
    AddAudit,
    DeleteNodes,
    IncrementFailures,
    IncrementHits,
    InsertItem,
    InsertNode,
    Plan,
    PutItem,
    TouchNodes,
    UpdateItem,
    apply,
)
from deltamem.store.items import Item, ItemStore
from deltamem.store.sqlite import SQLiteStore
from deltamem.types import Change


def node(node_id: str, parent: str | None = None, kind: str = "ROOT") -> Node:
    return Node(id=node_id, tree="task", kind=kind, label="SUCCESS", parent=parent,
                depth=1 if parent is None else 2, trigger=node_id,
                embedding=np.eye(4, dtype=np.float32)[0],
                payload=Payload(activation=node_id, procedure="1. act"),
                episode_id="e0", created_at=time.time())


def run(store, *writes) -> Plan:
    plan = Plan(writes=list(writes))
    with store.transaction():
        apply(store, plan)
    return plan


def test_node_records():
    store = SQLiteStore(":memory:")
    store.init_meta("test", 4, {})
    root = node("r")
    consolidated = node("r2")
    run(store, InsertNode(root), InsertNode(node("v", "r", "RESIDUAL")))
    run(store, IncrementHits("v", consolidate=consolidated, k=2))
    assert store.node_state("v") == (1, False) and store.node_counts()["task"] == 2
    run(store, IncrementHits("v", consolidate=consolidated, k=2))  # K_cons reached
    assert store.node_state("v") == (2, True) and store.node_counts()["task"] == 3
    run(store, IncrementHits("v", consolidate=node("r3"), k=2))  # marked: never again
    assert store.node_state("v") == (3, True) and store.node_counts()["task"] == 3
    run(store, IncrementFailures("r", "task", "e1"))  # λ = 0: counted, not audited
    run(store, IncrementFailures("r", "task", "e2", weight=1.0, success_hits=0))
    assert store.node_failures("r") == 2
    assert [(a["action"], a["episode_id"]) for a in store.audit()] == [("penalised", "e2")]
    assert "f(v) = 2, c(v) = 0" in store.audit()[0]["reason"]
    store.mark_learned("e1")
    store.mark_learned("e2")
    run(store, TouchNodes(("r", "v")))
    assert {n.id: n.last_used for n in store.load_nodes()}["v"] == 2
    run(store, AddAudit("", "r2", "task", "pruned", "unused:1", "why", {"k": 1}),
        DeleteNodes(("r2",)))
    assert "r2" not in {n.id for n in store.load_nodes()}
    assert store.audit()[-1]["record"] == {"k": 1}


def test_item_records_and_the_guarded_update(tmp_path):
    store = ItemStore(":memory:")
    a = Item(system="s", kind="doc", key="k", text="one")
    run(store, InsertItem(a))
    run(store, PutItem("s", "doc", "k", "two", {"n": 2}, "e1"))  # replaces the item of k
    run(store, PutItem("s", "doc", "other", "three", {}, "e2"))  # inserts one
    assert sorted((i.key, i.text) for i in store.items()) == [("k", "two"), ("other", "three")]
    read = store.get(a.id)
    change = Change("consolidated", "s", "merged", a.id)
    skipped = Change("skipped", "s", "changed elsewhere", a.id)
    run(store, UpdateItem(a.id, "elsewhere", {}, None, "e3"))  # another process's write
    plan = Plan(changes=[change], writes=[UpdateItem(a.id, "mine", {}, None, "e4",
                                                     unchanged_since=read.updated_at,
                                                     stale=(change, skipped))])
    with store.transaction():
        apply(store, plan)
    assert store.get(a.id).text == "elsewhere" and plan.changes == [skipped]
    fresh = store.get(a.id)
    plan = Plan(changes=[change], writes=[UpdateItem(a.id, "mine", {}, None, "e5",
                                                     unchanged_since=fresh.updated_at,
                                                     stale=(change, skipped))])
    with store.transaction():
        apply(store, plan)
    assert store.get(a.id).text == "mine" and plan.changes == [change]
