"""Schema versions 2 and 3 on every backend: failure hits, last use, node removal, the audit
trail; the ledger's kept count, and a version-2 bank migrated to it when opened."""

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
from deltamem.store.sqlite import SQLiteStore


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
    assert store.meta()["schema_version"] == SCHEMA_VERSION == 3
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
    assert (n.failure_hits, n.last_used) == (0, 0)
    assert other.meta()["schema_version"] == SCHEMA_VERSION
    store.close()
    other.close()


def _count(store) -> int:
    row = store._fetch_one("SELECT COUNT(*) FROM learned")
    return int(row[0])


def test_the_ledger_count_is_kept_by_every_learn_and_import(new_bank) -> None:
    store = _store(new_bank())
    assert store.learned_count() == 0
    assert store.mark_learned("e1") and store.mark_learned("e2")
    assert not store.mark_learned("e1")  # already learned: not counted again
    with pytest.raises(RuntimeError), store.transaction():  # rolled back with its transaction
        store.mark_learned("e3")
        raise RuntimeError
    assert store.learned_count() == _count(store) == 2
    other = open_store(new_bank())
    other.config_check = check_bank_config
    other.import_records(store.iter_export())  # counted once at its end on PostgreSQL
    assert other.learned_count() == 2
    assert other.mark_learned("e9") and other.learned_count() == _count(other) == 3
    store.close()
    other.close()


def _as_version_2(location: str) -> None:
    """Turn a new bank into a schema-version-2 one: what ``0003_learned_count`` adds is gone."""
    store = _store(location)
    for e in ("e1", "e2", "e3"):
        store.mark_learned(e)
    with store.transaction():
        if isinstance(store, SQLiteStore):
            store._run("DROP TRIGGER learned_count_add")
            store._run("DROP TRIGGER learned_count_remove")
        else:
            store._run("DROP TRIGGER learned_count_keep ON learned")
            store._run("DROP FUNCTION learned_count_keep()")
        store._run("DROP TABLE learned_count")
        store._run("DELETE FROM migrations WHERE name = '0003_learned_count'")
        store._run("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        store._run("INSERT INTO learned (episode_id, learned_at) VALUES ('e4', 4.0)")
    store.close()


def test_a_version_2_bank_is_counted_read_only_and_migrated_when_opened(new_bank) -> None:
    loc = new_bank()
    _as_version_2(loc)
    old = open_store(loc, readonly=True)
    assert old.meta()["schema_version"] == 2 and old.learned_count() == 4
    old.close()
    store = open_store(loc)  # opened for writing: migrated
    assert store.meta()["schema_version"] == SCHEMA_VERSION == 3
    assert store.learned_count() == 4
    assert store.mark_learned("e5") and store.learned_count() == _count(store) == 5
    with store.transaction():  # a row removed by hand is uncounted too
        store._run("DELETE FROM learned WHERE episode_id = 'e2'")
    assert store.learned_count() == _count(store) == 4
    store.close()
    again = open_store(loc)  # the migration runs once
    assert again.learned_count() == 4
    again.close()
