"""A schema-version-1 SQLite bank: read as it is when opened read-only, upgraded to version 3
(``0002_forgetting``, ``0003_learned_count``) when opened for writing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np

from deltamem.store.sqlite import _MIGRATIONS, SQLiteStore


def _version_1_bank(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript(_MIGRATIONS[0][1])
    con.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    con.execute("INSERT INTO migrations VALUES ('0001_initial', ?)", (time.time(),))
    con.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("schema_version", "1"), ("embedder_name", "toy"), ("embedder_dim", "4"),
        ("config", '{"domain": "alfworld"}'), ("created_at", "1.0")])
    vec = np.array([1, 0, 0, 0], dtype="<f4").tobytes()
    con.execute(
        "INSERT INTO nodes (id, tree, kind, label, parent_id, depth, success_hits, trigger, "
        "activation, procedure, termination, embedding, episode_id, created_at) "
        "VALUES ('r', 'task', 'ROOT', 'SUCCESS', NULL, 1, 2, 't', 'a', 'p', '', ?, 'e1', 1.0)",
        (vec,))
    con.executemany("INSERT INTO learned VALUES (?, ?)", [("e1", 1.0), ("e2", 2.0), ("e3", 3.0)])
    con.commit()
    con.close()


def test_read_only_reads_a_version_1_bank_without_changing_it(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _version_1_bank(path)
    store = SQLiteStore(path, readonly=True)
    (node,) = store.load_nodes()
    assert (node.success_hits, node.failure_hits, node.last_used) == (2, 0, 0)
    assert store.meta()["schema_version"] == 1 and store.audit() == []
    assert store.learned_count() == 3  # counted: no kept count before version 3
    assert [s[4] for s in store.node_states()] == [0]
    store.close()
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(nodes)")]
    con.close()
    assert "failure_hits" not in cols


def test_opening_for_writing_upgrades_to_version_3(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _version_1_bank(path)
    store = SQLiteStore(path)
    assert store.meta()["schema_version"] == 3 and store.learned_count() == 3
    (node,) = store.load_nodes()
    # a node stored before the upgrade counts as used at the upgrade (3 episodes learned)
    assert (node.success_hits, node.failure_hits, node.last_used) == (2, 0, 3)
    assert store.increment_failures("r") == 1 and store.audit() == []
    store.close()
    again = SQLiteStore(path)  # the upgrade runs once
    assert again.meta()["schema_version"] == 3 and again.load_nodes()[0].failure_hits == 1
    assert again.mark_learned("e4") and again.learned_count() == 4
    again.close()
