"""Commit durability option (``synchronous``): default FULL, explicit NORMAL, refusals."""

from __future__ import annotations

import pytest

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, StoreError
from deltamem.store import SQLiteStore
from deltamem.testing import make_episode

H = HashingEmbedder(dim=32)


def test_file_bank_defaults_to_full_and_wal(tmp_path):
    s = SQLiteStore(tmp_path / "b.db")
    try:
        assert s.synchronous() == "full"
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        s.close()


def test_store_option_and_setter(tmp_path):
    s = SQLiteStore(tmp_path / "b.db", synchronous="normal")
    try:
        assert s.synchronous() == "normal"
        s.set_synchronous("full")
        assert s.synchronous() == "full"
    finally:
        s.close()


@pytest.mark.parametrize("bad", ["off", "FULL", "extra", ""])
def test_unknown_modes_are_config_errors(tmp_path, bad):
    with pytest.raises(ConfigError, match="synchronous"):
        SQLiteStore(tmp_path / "b.db", synchronous=bad)  # type: ignore[arg-type]
    s = SQLiteStore(tmp_path / "c.db")
    try:
        with pytest.raises(ConfigError, match="synchronous"):
            s.set_synchronous(bad)  # type: ignore[arg-type]
        assert s.synchronous() == "full"
    finally:
        s.close()


def test_no_change_inside_a_transaction(tmp_path):
    s = SQLiteStore(tmp_path / "b.db")
    try:
        with s.transaction(), pytest.raises(StoreError, match="inside a transaction"):
            s.set_synchronous("normal")
        assert s.synchronous() == "full"
    finally:
        s.close()


def test_normal_is_refused_outside_wal_mode(tmp_path):
    s = SQLiteStore(tmp_path / "b.db")
    try:
        s._conn.execute("PRAGMA journal_mode = DELETE")
        with pytest.raises(StoreError, match="needs WAL"):
            s.set_synchronous("normal")
        assert s.synchronous() == "full"
    finally:
        s.close()


def test_deltamem_option_is_applied_and_not_stored_with_the_bank(tmp_path):
    path = tmp_path / "b.db"
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", synchronous="normal")
    try:
        assert mem.store.synchronous() == "normal"
        assert mem.config.synchronous == "normal"
        ep = make_episode("put a clean apple in fridge", episode_id="e1")
        assert [c.kind for c in mem.learn(ep)] == ["written", "written"]
        assert "synchronous" not in mem.store.meta()["config"]
    finally:
        mem.close()
    again = DeltaMem.open(path, embedder=H)  # stored config, durability back to the default
    try:
        assert again.config.domain == "alfworld"
        assert again.config.synchronous == "full"
        assert again.store.synchronous() == "full"
        assert again.stats()["episodes_learned"] == 1
    finally:
        again.close()


def test_deltamem_default_sets_full_even_on_a_normal_store(tmp_path):
    store = SQLiteStore(tmp_path / "b.db", synchronous="normal")
    mem = DeltaMem(store, H)
    try:
        assert store.synchronous() == "full"
    finally:
        mem.close()


class _NoDurabilitySetting(SQLiteStore):
    """A store without ``set_synchronous`` (as PostgreSQL's)."""

    set_synchronous = None  # type: ignore[assignment]


def test_normal_on_a_store_without_the_setting_is_a_config_error(tmp_path):
    store = _NoDurabilitySetting(tmp_path / "b.db")
    try:
        with pytest.raises(ConfigError, match="SQLite bank option"):
            DeltaMem(store, H, synchronous="normal")
        DeltaMem(store, H)  # the default needs nothing from the store
    finally:
        store.close()
