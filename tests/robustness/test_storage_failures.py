"""Damaged, foreign, read-only and full storage (issue 17, item 2).

No ``sqlite3`` exception escapes a store: each failure is a :class:`StoreError` subclass
that says what is wrong (damaged, not a bank, read-only, full) and keeps the cause; a
bank that cannot be written is refused when it is opened (before any LLM cost); a failed
transaction reports its own error, not the ROLLBACK's; an export leaves no ``.tmp``.
Full disks and read-only files are simulated without root: SQLite's ``max_page_count``
and a read-only URI; a real read-only folder (a tmpfs) only where mounting is allowed.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import (
    BankDamagedError,
    BankReadOnlyError,
    NotABankError,
    StorageFullError,
    StoreError,
)
from deltamem.memories.deltamem import DeltaMem
from deltamem.store.jsonl import export_jsonl
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import make_episode

EMB = HashingEmbedder(dim=32)


def bank(path: Path, episodes: int = 20) -> Path:
    mem = DeltaMem.open(path, embedder=EMB, domain="alfworld")
    for i in range(episodes):
        mem.learn(make_episode(f"goal number {i} " + "x" * 40, episode_id=f"e{i}"))
    mem.close()
    return path


def damage(path: Path) -> Path:
    """Keep page 1 (header and schema) intact, overwrite the inside of every other page."""
    data = bytearray(path.read_bytes())
    for off in range(4096, len(data), 4096):
        data[off + 8: off + 400] = bytes(range(256)) + bytes(136)
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def readonly_files(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Paths added to the returned set open as SQLite opens a file it may not write."""
    paths: set[str] = set()
    real = sqlite3.connect

    def connect(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if str(target) in paths:
            return real(f"file:{target}?mode=ro", *args, **{**kwargs, "uri": True})
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield paths


@pytest.fixture
def capped(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Paths added to the returned set open with no room to grow (a full disk)."""
    paths: set[str] = set()
    real = sqlite3.connect

    def connect(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real(target, *args, **kwargs)
        if str(target) in paths:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield paths


# -- damaged and foreign files -------------------------------------------------------------------

@pytest.mark.parametrize("readonly", [False, True])
def test_a_damaged_bank_is_called_damaged(tmp_path: Path, readonly: bool) -> None:
    path = damage(bank(tmp_path / "b.db"))
    with pytest.raises(BankDamagedError, match="is damaged") as info:
        mem = DeltaMem.open(path, embedder=None if readonly else EMB, readonly=readonly)
        mem.stats()  # a damage the open did not read shows here
        mem.store.iter_export().__next__()
        list(mem.store.iter_export())
    assert "not a deltamem bank" not in str(info.value).lower()


def test_damage_found_while_reading_is_a_store_error(tmp_path: Path) -> None:
    path = bank(tmp_path / "b.db", episodes=60)
    store = SQLiteStore(path, readonly=True)  # opened intact; the damage comes later
    damage(path)
    try:
        with pytest.raises(BankDamagedError):
            store.load_nodes()
            list(store.iter_export())
            store.node_states()
    finally:
        store.close()


def test_a_file_that_is_not_a_database_is_not_a_bank(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    path.write_bytes(os.urandom(8192))
    for readonly in (False, True):
        with pytest.raises(NotABankError, match="not a deltamem bank"):
            SQLiteStore(path, readonly=readonly)


def test_a_foreign_database_is_not_a_bank(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE nodes (x)")
    conn.commit()
    conn.close()
    with pytest.raises(NotABankError, match="is not a DeltaMem bank"):
        SQLiteStore(path)


# -- read-only storage -----------------------------------------------------------------------

def test_a_read_only_bank_is_refused_at_open_for_writing(tmp_path: Path,
                                                         readonly_files: set[str]) -> None:
    path = bank(tmp_path / "b.db", episodes=2)
    readonly_files.add(str(path))
    with pytest.raises(BankReadOnlyError, match="cannot be written"):
        DeltaMem.open(path, embedder=EMB)
    mem = DeltaMem.open(path, embedder=None, readonly=True)  # reading still works
    assert mem.stats()["episodes_learned"] == 2
    mem.close()


def test_a_run_on_a_read_only_bank_fails_before_any_llm_call(tmp_path: Path) -> None:
    from deltamem.bench import RunConfig
    from deltamem.bench import run as run_bench
    from deltamem.llm.scripted import ScriptedLLM

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    init = bank(tmp_path / "init.db", episodes=1)
    cfg = RunConfig(run_dir=run_dir, env="corridor", split="test", episodes=2,
                    memory="deltamem", embedder="hashing:32", llm="scripted",
                    init_bank=init)
    from tests.bench.bench_toys import CorridorEnv

    llm = ScriptedLLM()
    env = CorridorEnv()
    original = SQLiteStore.check_writable

    def any_run_bank_is_read_only(self: SQLiteStore) -> None:
        if Path(self.path).is_relative_to(run_dir):
            raise BankReadOnlyError(f"bank {self.path} cannot be written (simulated)")
        original(self)

    SQLiteStore.check_writable = any_run_bank_is_read_only  # type: ignore[method-assign]
    try:
        with pytest.raises(BankReadOnlyError):
            run_bench(cfg, env=env, llm=llm, progress=False)
    finally:
        SQLiteStore.check_writable = original  # type: ignore[method-assign]
    assert llm.usage.calls == 0


def _mount_tmpfs(path: Path) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_an_intact_bank_in_a_read_only_folder_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    if not _mount_tmpfs(folder):
        pytest.skip("needs root to mount a read-only tmpfs")
    try:
        bank(folder / "b.db", episodes=2)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        with pytest.raises(BankReadOnlyError, match="read-only folder"):
            DeltaMem.open(folder / "b.db", embedder=EMB)
        mem = DeltaMem.open(folder / "b.db", embedder=None, readonly=True)
        assert mem.stats()["episodes_learned"] == 2  # inspection works on read-only media
        mem.close()
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# -- full storage -----------------------------------------------------------------------------

def test_a_full_disk_is_storage_full_and_the_learn_is_all_or_nothing(
    tmp_path: Path, capped: set[str]
) -> None:
    path = bank(tmp_path / "b.db", episodes=1)
    capped.add(str(path))
    mem = DeltaMem.open(path, embedder=EMB, domain="alfworld")
    before = mem.store.load_nodes()
    with pytest.raises(StorageFullError, match="disk is full") as info:
        for i in range(50):
            # many one-letter words: an abstracted (household) trigger keeps them all
            mem.learn(make_episode(f"another goal {i} " + "z " * 1500, episode_id=f"n{i}"))
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert not mem.store._conn.in_transaction
    nodes = mem.store.load_nodes()
    assert len(nodes) >= len(before)
    # each learn is whole or absent: no node of an episode that is not recorded as learned
    assert all(mem.store.is_learned(n.episode_id) for n in nodes)
    assert mem.store.learned_count() == len({n.episode_id for n in nodes})
    assert mem.stats()["episodes_learned"] == mem.store.learned_count()  # still readable
    mem.close()


def test_the_ledger_reports_the_real_error_not_the_rollback(tmp_path: Path,
                                                            capped: set[str]) -> None:
    path = tmp_path / "b.db"
    SQLiteStore(path).close()
    capped.add(str(path))
    store = SQLiteStore(path)
    with pytest.raises(StorageFullError) as info, store.transaction():
        for i in range(200):
            store.add_rejection(tree="task", role="r", reason="x" * 4000, raw="y" * 4000,
                                episode_id=f"e{i}")
    assert "rollback" not in str(info.value).lower()
    assert store.rejections() == []  # the whole transaction is gone
    store.close()


# -- export files -------------------------------------------------------------------------------

class _FailingStore:
    """An export source whose disk fills after two records."""

    def iter_export(self) -> Iterator[dict[str, Any]]:
        yield {"type": "meta"}
        yield {"type": "node", "id": "x" * 1000}
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_export_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(StoreError, match="No space left"):
        export_jsonl(_FailingStore(), out)
    assert sorted(os.listdir(tmp_path)) == []
    out.write_text("old\n")
    with pytest.raises(StoreError):
        export_jsonl(_FailingStore(), out)
    assert out.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["out.jsonl"]


def test_export_to_a_folder_or_a_missing_folder_says_so(tmp_path: Path) -> None:
    store = SQLiteStore(bank(tmp_path / "b.db", episodes=1), readonly=True)
    (tmp_path / "dir").mkdir()
    with pytest.raises(StoreError, match="is a folder"):
        export_jsonl(store, tmp_path / "dir")
    with pytest.raises(StoreError, match="does not exist"):
        export_jsonl(store, tmp_path / "nope" / "x.jsonl")
    store.close()
    assert not (tmp_path / "dir.tmp").exists()


def test_item_banks_translate_storage_failures_too(tmp_path: Path) -> None:
    from deltamem.store.items import ItemStore

    path = tmp_path / "items.db"
    path.write_bytes(os.urandom(8192))
    for readonly in (False, True):
        with pytest.raises(NotABankError):
            ItemStore(path, readonly=readonly)


def test_postgres_server_errors_map_to_the_store_error_kinds() -> None:
    pe = pytest.importorskip("psycopg.errors")
    from deltamem.errors import BankDamagedError, BankReadOnlyError, StorageFullError, StoreError
    from deltamem.store.postgres import store_error

    cases = [
        (pe.DiskFull("could not extend file"), StorageFullError),
        (pe.OutOfMemory("out of memory"), StorageFullError),
        (pe.TooManyConnections("too many clients"), StorageFullError),
        (pe.ReadOnlySqlTransaction("read-only transaction"), BankReadOnlyError),
        (pe.InsufficientPrivilege("permission denied"), BankReadOnlyError),
        (pe.DataCorrupted("invalid page"), BankDamagedError),
        (pe.IndexCorrupted("index is corrupted"), BankDamagedError),
        (pe.UniqueViolation("duplicate key"), StoreError),
    ]
    for err, kind in cases:
        got = store_error(err, "bank b")
        assert type(got) is kind, (err, got)
        assert str(err) in str(got) and "bank b" in str(got)
