"""Schema version 2 on every backend: failure hits, last use, node removal, the audit trail."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.errors import StoreError
from deltamem.memories.deltamem import check_bank_config
from deltamem.store import SCHEMA_VERSION
from deltamem.store.factory import open_store


def _node(node_id: str, parent: str | None = None, depth: int = 1) -> Node:
    vec = np.zeros(4, dtype=np.float32)
    vec[depth % 4] = 1.0
    return Node(id=node_id, tree="task", kind="ROOT" if parent is None else "RESIDUAL",
                label="SUCCESS", parent=parent, depth=depth, trigger=node_id, embedding=vec,
                payload=Payload(f"when {node_id}", f"do {node_id}"), episode_id="e",
                created_at=1.0)


def _store(location: str):
    store = open_store(location)
    store.config_check = check_bank_config
    store.init_meta("toy", 4, {"domain": "alfworld"})
    return store


def test_failures_last_use_and_audit_round_trip(new_bank) -> None:
    store = _store(new_bank())
    assert store.meta()["schema_version"] == SCHEMA_VERSION == 2
    store.insert_node(_node("r"))
    store.insert_node(_node("c", "r", 2))
    assert store.increment_failures("c") == 1 and store.increment_failures("c") == 2
    assert store.node_failures("c") == 2 and store.node_state("c") == (0, False)
    assert [s[4] for s in store.node_states()] == [0, 2]
    store.touch(["r", "c", "r"], 5)
    store.touch(["r"], 3)  # an older use never lowers it
    assert {n.id: n.last_used for n in store.load_nodes()} == {"r": 5, "c": 5}
    store.add_audit(episode_id="e9", node_id="c", tree="task", action="penalised",
                    policy="standing", reason="why", record={"f": 2})
    (entry,) = store.audit()
    assert entry["record"] == {"f": 2} and entry["action"] == "penalised"
    with pytest.raises(StoreError):
        store.increment_failures("nobody")
    text = [json.dumps(r, sort_keys=True) for r in store.iter_export()]
    assert any('"type": "audit"' in t for t in text)
    other = open_store(new_bank())
    other.config_check = check_bank_config
    other.import_records(json.loads(t) for t in text)
    assert [json.dumps(r, sort_keys=True) for r in other.iter_export()] == text
    store.close()
    other.close()


def test_removing_a_node_takes_its_subtree_or_nothing(new_bank) -> None:
    store = _store(new_bank())
    store.insert_node(_node("r"))
    store.insert_node(_node("c", "r", 2))
    store.insert_node(_node("g", "c", 3))
    with pytest.raises(StoreError, match="child"):
        store.delete_nodes(["r", "c"])
    assert len(store.load_nodes()) == 3
    assert store.delete_nodes(["g", "c", "r", "missing"]) == 3
    assert store.load_nodes() == [] and store.delete_nodes([]) == 0
    store.close()


def test_a_version_1_export_imports_with_zero_counts(new_bank) -> None:
    store = _store(new_bank())
    store.insert_node(_node("r"))
    store.increment_failures("r")
    records = []
    for rec in store.iter_export():
        if rec["type"] == "audit":
            continue
        rec = dict(rec)
        if rec["type"] == "meta":
            rec["schema_version"] = 1
        rec.pop("failure_hits", None)
        rec.pop("last_used", None)
        records.append(rec)
    other = open_store(new_bank())
    other.config_check = check_bank_config
    assert other.import_records(records) == 1
    (n,) = other.load_nodes()
    assert (n.failure_hits, n.last_used) == (0, 0) and other.meta()["schema_version"] == 2
    store.close()
    other.close()
