"""SQLite bank store: one file per memory bank.

WAL journal, a busy timeout so concurrent writers wait instead of failing,
``BEGIN IMMEDIATE`` transactions (the write lock is taken up front, so two
learners never interleave a write decision) and ``synchronous=FULL`` so a
committed ``learn()`` survives a crash. Embeddings are float32 blobs.
Migrations are named and applied inside a transaction. The statements themselves are
:mod:`deltamem.store.sql`'s, shared with PostgreSQL; this module is the connection:
opening a file, locking, mapping SQLite's errors, and the dialect's hooks.

Durability (``synchronous``). With the default ``"full"`` every commit waits
for an fsync of the WAL file: a committed ``learn()`` survives a process
crash *and* a power loss or OS crash. ``"normal"`` (WAL mode only) skips that
per-commit fsync — the WAL is synced at checkpoints — so a commit is in the OS
page cache when it returns: it survives the process being killed (SIGKILL,
OOM, segfault), but a power loss or OS crash may roll back the most recent
commits. The bank never corrupts either way and each learn stays all or
nothing. Choose ``"normal"`` only where losing the last few learns to a power
cut is acceptable; see :meth:`SQLiteBackend.set_synchronous`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from deltamem.errors import (
    BankDamagedError,
    BankReadOnlyError,
    ConfigError,
    NotABankError,
    StorageFullError,
    StoreError,
)
from deltamem.store.base import ConfigCheck
from deltamem.store.sql import SQLLedger, SQLTreeStore

_MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE nodes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            tree TEXT NOT NULL CHECK (tree IN ('task', 'env')),
            kind TEXT NOT NULL CHECK (kind IN ('ROOT', 'RESIDUAL')),
            label TEXT NOT NULL CHECK (label IN ('SUCCESS', 'FAILURE')),
            parent_id TEXT REFERENCES nodes(id),
            depth INTEGER NOT NULL CHECK (depth >= 1),
            success_hits INTEGER NOT NULL DEFAULT 0 CHECK (success_hits >= 0),
            consolidated INTEGER NOT NULL DEFAULT 0 CHECK (consolidated IN (0, 1)),
            origin TEXT NOT NULL DEFAULT 'extracted',
            source_id TEXT,
            trigger TEXT NOT NULL,
            activation TEXT NOT NULL,
            procedure TEXT NOT NULL,
            termination TEXT NOT NULL,
            embedding BLOB NOT NULL,
            episode_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            CHECK ((kind = 'ROOT') = (parent_id IS NULL))
        );
        CREATE INDEX nodes_tree ON nodes(tree, seq);
        CREATE TABLE rejections (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            episode_id TEXT NOT NULL,
            tree TEXT NOT NULL,
            role TEXT NOT NULL,
            reason TEXT NOT NULL,
            raw TEXT NOT NULL
        );
        CREATE TABLE learned (episode_id TEXT PRIMARY KEY, learned_at REAL NOT NULL);
        """,
    ),
    # schema version 2 (issue 31): failure hits and last use per node, the audit trail;
    # nodes already stored count as used at the upgrade
    (
        "0002_forgetting",
        """
        ALTER TABLE nodes ADD COLUMN failure_hits INTEGER NOT NULL DEFAULT 0
            CHECK (failure_hits >= 0);
        ALTER TABLE nodes ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0;
        UPDATE nodes SET last_used = (SELECT COUNT(*) FROM learned);
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            episode_id TEXT NOT NULL,
            node_id TEXT NOT NULL,
            tree TEXT NOT NULL,
            action TEXT NOT NULL,
            policy TEXT NOT NULL,
            reason TEXT NOT NULL,
            record TEXT NOT NULL
        );
        """,
    ),
    # schema version 3 (issue 52): the ledger's count in one row, kept by every learn
    # (a learn's episode number was COUNT(*) over the ledger: linear in the bank)
    (
        "0003_learned_count",
        """
        CREATE TABLE learned_count (n INTEGER NOT NULL);
        INSERT INTO learned_count SELECT COUNT(*) FROM learned;
        CREATE TRIGGER learned_count_add AFTER INSERT ON learned
            BEGIN UPDATE learned_count SET n = n + 1; END;
        CREATE TRIGGER learned_count_remove AFTER DELETE ON learned
            BEGIN UPDATE learned_count SET n = n - 1; END;
        """,
    ),
]

Synchronous = Literal["full", "normal"]
SYNCHRONOUS_MODES: tuple[str, ...] = ("full", "normal")

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def storage_error(e: sqlite3.Error, path: str) -> StoreError:
    """The :class:`StoreError` subclass that says what ``e`` means for the bank at ``path``."""
    code = getattr(e, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    msg = str(e)
    if primary == sqlite3.SQLITE_CORRUPT or "malformed" in msg:
        return BankDamagedError(
            f"bank {path} is damaged ({msg}); restore it from an export or a backup"
        )
    if primary == sqlite3.SQLITE_NOTADB or "not a database" in msg:
        return NotABankError(f"{path} is not a deltamem bank (not an SQLite database)")
    if "no such table" in msg:
        return NotABankError(f"{path} is not a deltamem bank ({msg})")
    if primary == sqlite3.SQLITE_FULL or "disk is full" in msg:
        return StorageFullError(f"cannot write bank {path}: the disk is full ({msg})")
    if primary == sqlite3.SQLITE_READONLY or "readonly" in msg:
        return BankReadOnlyError(
            f"bank {path} cannot be written ({msg}): check the permissions of the file and its "
            "folder, or open it read-only"
        )
    if primary == sqlite3.SQLITE_CANTOPEN or "unable to open" in msg:
        return StoreError(
            f"cannot open bank {path} ({msg}): the folder must exist and be writable "
            "(SQLite keeps -wal and -shm files next to the bank)"
        )
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in msg:
        return StoreError(f"bank {path} is locked by another writer ({msg})")
    if primary == sqlite3.SQLITE_IOERR or "disk I/O" in msg:
        return StoreError(f"I/O error on bank {path} ({msg})")
    return StoreError(f"storage error on bank {path}: {msg}")


def _cannot_open(e: StoreError) -> bool:
    cause = e.__cause__
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_CANTOPEN


def guarded(fn: F) -> F:
    """Method decorator: a ``sqlite3.Error`` raised inside becomes :func:`storage_error`
    (generator methods too: errors while iterating)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                yield from fn(self, *args, **kwargs)
            except sqlite3.Error as e:
                raise storage_error(e, self.path) from e

        return gen  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e

    return wrapper  # type: ignore[return-value]


class SQLiteBackend(SQLLedger):
    """What every SQLite bank file shares: opening the file, the re-entrant write
    transaction, SQLite's errors as :class:`StoreError` kinds, change detection, the
    integrity check, closing, and the hooks :mod:`deltamem.store.sql` runs its statements
    through. A subclass calls :meth:`_open_file` and implements ``_setup``."""

    _conn: sqlite3.Connection
    _lock: threading.RLock
    _in_tx: bool
    path: str
    LEARNED_ORDER = "rowid"

    # -- opening --------------------------------------------------------------------------
    def _open_file(
        self, path: str | Path, *, timeout: float, readonly: bool, synchronous: Synchronous
    ) -> None:
        """Connect to the bank file ``path`` (created with its folder unless ``readonly``)
        and run ``_setup``. A bank in a read-only folder opens for reading (SQLite cannot
        make its -wal and -shm files there) and is :class:`BankReadOnlyError` for writing."""
        if synchronous not in SYNCHRONOUS_MODES:
            raise ConfigError(
                f"unknown synchronous mode {synchronous!r}; use one of {SYNCHRONOUS_MODES}"
            )
        self.path = str(path)
        self._lock = threading.RLock()
        self._in_tx = False
        if self.path != ":memory:":
            p = Path(self.path)
            if readonly and not p.exists():
                raise StoreError(f"no memory bank at {p}")
            if not readonly:
                p.parent.mkdir(parents=True, exist_ok=True)
                if not p.exists():
                    self._create(p, timeout, synchronous)
        try:
            self._open(timeout, readonly, synchronous, immutable=False)
        except StoreError as e:
            p = Path(self.path)
            if not (_cannot_open(e) and p.is_file() and not os.access(p.parent, os.W_OK)):
                raise
            if not readonly:
                raise BankReadOnlyError(
                    f"bank {self.path} is in a read-only folder: SQLite must create its -wal "
                    "and -shm files next to it; copy the bank to a writable folder (reading "
                    "it, e.g. `deltamem stats`, works where it is)"
                ) from e
            # inspection of a bank on read-only media: nothing can change it meanwhile
            self._open(timeout, readonly, synchronous, immutable=True)

    def _create(self, p: Path, timeout: float, synchronous: Synchronous) -> None:
        """Make a new bank file whole before it appears at ``p``: its tables are created in a
        file of another name, which is then hard-linked to ``p`` (a process killed meanwhile
        leaves no file at ``p`` that is not a bank; a bank made there meanwhile is kept).
        Where that cannot be done (a read-only folder, a file system without hard links) the
        bank is created in place, as before, and any error is that open's."""
        tmp = p.with_name(f".{p.name}.creating-{os.getpid()}-{threading.get_ident()}")
        try:
            self.path = str(tmp)
            self._open(timeout, False, synchronous, immutable=False)
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()
            with suppress(FileExistsError):
                os.link(tmp, p)
        except (StoreError, OSError):
            pass
        finally:
            self.path = str(p)
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(tmp) + suffix).unlink(missing_ok=True)

    def _open(
        self, timeout: float, readonly: bool, synchronous: Synchronous, *, immutable: bool
    ) -> None:
        conn: sqlite3.Connection | None = None
        try:
            if readonly and self.path != ":memory:":
                flags = "mode=ro&immutable=1" if immutable else "mode=ro"
                uri = f"file:{Path(self.path).resolve()}?{flags}"
                conn = sqlite3.connect(
                    uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            else:
                conn = sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if not readonly:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as e:
            if conn is not None:
                conn.close()
            raise storage_error(e, self.path) from e
        self._conn = conn
        try:
            self._setup(readonly, synchronous)
        except BaseException:
            conn.close()
            raise

    def _setup(self, readonly: bool, synchronous: Synchronous) -> None:  # pragma: no cover
        raise NotImplementedError

    @guarded
    def _has_table(self, name: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
        ).fetchone()
        return row is not None

    def _migrations_done(self) -> set[str]:
        self._run("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        return {str(r[0]) for r in self._fetch_all("SELECT name FROM migrations")}

    # -- the hooks of deltamem.store.sql -----------------------------------------------------
    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Any] | None:
        try:
            rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e
        return rows[0] if rows else None

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e

    def _fetch_iter(self, sql: str, params: Sequence[Any] = ()) -> Iterator[Sequence[Any]]:
        """The rows of a query streamed from the cursor: a bank of any size is read without
        holding its rows (and their text) in memory at once."""
        try:
            yield from self._conn.execute(sql, params)
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        try:
            return self._conn.execute(sql, params).rowcount
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e

    def _violates_constraint(self, error: StoreError) -> bool:
        return isinstance(error.__cause__, sqlite3.IntegrityError)

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction (re-entrant: nested calls join the outer one)."""
        with self._lock:
            if self._in_tx:
                yield
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise storage_error(e, self.path) from e
            self._in_tx = True
            try:
                yield
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error as e:
                    self._rollback()
                    raise storage_error(e, self.path) from e
            finally:
                self._in_tx = False

    def _rollback(self) -> None:
        """Roll back unless SQLite already did (it does on SQLITE_FULL, I/O errors, ...):
        a failing ROLLBACK must never replace the error that caused it."""
        if not self._conn.in_transaction:
            return
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error as e:  # the original error is the one to report
            log.warning("bank %s: ROLLBACK failed after an error: %s", self.path, e)

    @guarded
    def check_writable(self) -> None:
        """Raise :class:`BankReadOnlyError` when the bank cannot be written (read-only file,
        folder or file system). Writes nothing: the probe statement inserts no row."""
        with self._lock:
            if self._in_tx:
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("INSERT INTO meta SELECT 'probe', 'probe' WHERE 0")
            finally:
                self._rollback()

    def set_synchronous(self, mode: Synchronous) -> None:
        """Set the commit durability (module doc, Durability): ``"full"`` or ``"normal"``.

        Raises :class:`ConfigError` for another value, :class:`StoreError`
        inside a transaction, or for ``"normal"`` on a file bank that is not in
        WAL mode (there ``NORMAL`` could corrupt the bank on a power loss).
        """
        if mode not in SYNCHRONOUS_MODES:
            raise ConfigError(f"unknown synchronous mode {mode!r}; use one of {SYNCHRONOUS_MODES}")
        with self._lock:
            if self._in_tx:
                raise StoreError("cannot change synchronous inside a transaction")
            if mode == "normal" and self.path != ":memory:":
                journal = str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])
                if journal.lower() != "wal":
                    raise StoreError(
                        f"synchronous='normal' needs WAL mode; bank {self.path} is in "
                        f"journal mode {journal!r}"
                    )
            self._conn.execute(f"PRAGMA synchronous = {mode.upper()}")

    @guarded
    def synchronous(self) -> str:
        """The connection's current ``PRAGMA synchronous`` as ``full``/``normal``/…."""
        value = int(self._conn.execute("PRAGMA synchronous").fetchone()[0])
        return {0: "off", 1: "normal", 2: "full", 3: "extra"}.get(value, str(value))

    def version(self) -> int:
        """Changes when another connection commits (``PRAGMA data_version``; asked by every
        recall, so without :func:`guarded`'s extra call)."""
        try:
            return self._conn.execute("PRAGMA data_version").fetchone()[0]  # type: ignore[no-any-return]
        except sqlite3.Error as e:
            raise storage_error(e, self.path) from e

    _learned_dense: bool = False

    def _statements(self, sql: str) -> list[str]:
        """A migration's statements, each complete as SQLite reads it (a trigger's body
        holds ``;``)."""
        out: list[str] = []
        cur = ""
        for line in sql.splitlines(keepends=True):
            cur += line
            if sqlite3.complete_statement(cur):
                out.append(cur)
                cur = ""
        if cur.strip():
            out.append(cur)
        return out

    def learned_count(self) -> int:
        """Episodes in the learned ledger.

        ``COUNT(*)`` reads the whole ledger (~1 ms at 100k episodes, and every learn asks
        for it: the episode number its ``touch`` records). Nothing deletes from the ledger
        and SQLite gives an appended row the largest rowid + 1 (a rolled-back append frees
        its rowid again), so once a connection has seen the count equal the largest rowid
        (rowids exactly 1..count) the largest rowid, one index lookup, is the count from
        then on. A ledger where the two differ (rows deleted by hand) is counted each time.
        """
        if self._learned_dense:
            row = self._fetch_one("SELECT COALESCE(MAX(rowid), 0) FROM learned")
            return int(row[0]) if row is not None else 0
        row = self._fetch_one("SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM learned")
        if row is None:
            return 0
        self._learned_dense = int(row[0]) == int(row[1])
        return int(row[0])

    @guarded
    def integrity_ok(self) -> bool:
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        self._conn.close()


class SQLiteStore(SQLiteBackend, SQLTreeStore):
    """A bank in one SQLite file (``":memory:"`` for a throwaway bank).

    Args:
        path: the bank file; created with its folder when missing.
        timeout: seconds a writer waits for another writer's lock.
        readonly: open without creating or migrating (for inspection).
        synchronous: commit durability, ``"full"`` (default: an fsync per commit) or
            ``"normal"`` (WAL only; survives process crashes, not power loss); module doc.
        config_check: what imports check a bank configuration with
            (:data:`~deltamem.store.base.ConfigCheck`; the memory owning the bank sets it).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 60.0,
        readonly: bool = False,
        synchronous: Synchronous = "full",
        config_check: ConfigCheck | None = None,
    ):
        self.config_check = config_check
        self._open_file(path, timeout=timeout, readonly=readonly, synchronous=synchronous)

    def learned_count(self) -> int:
        """:meth:`SQLTreeStore.learned_count` (the kept count), not the ledger's rowid, which
        an item bank (:class:`~deltamem.store.items.ItemStore`) still reads; a bank older
        than schema version 3, opened read-only, by the rowid."""
        if not self._ledger_counted():
            return SQLiteBackend.learned_count(self)
        return SQLTreeStore.learned_count(self)

    # -- setup -------------------------------------------------------------
    @guarded
    def _setup(self, readonly: bool, synchronous: Synchronous) -> None:
        if not readonly and synchronous != "full":
            self.set_synchronous(synchronous)
        if readonly:
            if not self._has_table("meta"):
                self._not_a_bank("no meta table")
            system = self._peek_system()
            if system is not None or not self._has_table("nodes"):
                self._not_a_bank(f"it belongs to the {system!r} memory system" if system else "")
        else:
            self._migrate()
            if self.path != ":memory:":
                self.check_writable()
        self._check_schema()

    def _not_a_bank(self, why: str) -> None:
        """Raise the right error for a file whose tables are not a DeltaMem bank's: a damaged
        bank reads as garbage, so run SQLite's quick check before calling it foreign."""
        try:
            ok = self._conn.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
        except sqlite3.DatabaseError:
            ok = False
        if not ok:
            raise BankDamagedError(
                f"bank {self.path} is damaged (SQLite's integrity check fails); restore it "
                "from an export or a backup"
            )
        raise NotABankError(f"{self.path} is not a DeltaMem bank" + (f" ({why})" if why else ""))

    def _migrate(self) -> None:
        with self.transaction():
            done = self._migrations_done()
            foreign = done - {name for name, _ in _MIGRATIONS}
            if foreign or (not done and (self._has_table("nodes") or self._has_table("meta"))):
                system = self._peek_system()
                self._not_a_bank(f"it belongs to the {system!r} memory system" if system else "")
            self._apply_migrations(_MIGRATIONS, done)

    def _peek_system(self) -> str | None:
        if not self._has_table("meta"):
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'system'").fetchone()
        return None if row is None else str(row[0])

    # -- the embedding column: float32 blobs ---------------------------------------------------
    def _embedding_param(self, vec: np.ndarray) -> bytes:
        return np.asarray(vec, dtype="<f4").reshape(-1).tobytes()

    def _embedding_array(self, value: Any) -> np.ndarray:
        return np.frombuffer(value, dtype="<f4").astype(np.float32)

    def _embedding_bytes(self, value: Any) -> bytes:
        return bytes(value)


def read_meta_value(path: str | Path, key: str) -> str | None:
    """The ``meta`` value ``key`` of the SQLite bank file ``path`` (``None`` when it has no
    such row), read without opening the bank as a store: no lock, no migration, and it works
    on a bank in a read-only folder.

    Raises :class:`StoreError` when there is no file at ``path``, and the
    :func:`storage_error` kind when it is not a bank (no ``meta`` table), not a database or
    damaged.
    """
    p = Path(path)
    if not p.exists():
        raise StoreError(f"no memory bank at {p}")
    row = None
    for flags in ("mode=ro", "mode=ro&immutable=1"):  # immutable: a read-only folder
        try:
            con = sqlite3.connect(f"file:{p.resolve()}?{flags}", uri=True)
            try:
                row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            finally:
                con.close()
            break
        except sqlite3.Error as e:
            code = getattr(e, "sqlite_errorcode", 0) or 0
            if flags == "mode=ro" and code & 0xFF == sqlite3.SQLITE_CANTOPEN:
                continue
            raise storage_error(e, str(p)) from e
    return None if row is None else str(row[0])


SQLITE_MAGIC = b"SQLite format 3\0"
"""The first bytes of every SQLite database file."""


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts like an SQLite database."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as fh:
        return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC


def content_digest(path: str | Path) -> str | None:
    """A SHA-256 digest of every table's schema and rows of the SQLite file ``path``, read
    through SQLite (so a WAL checkpoint or a rolled-back hot journal, which change the bytes
    but not the content, do not change it); ``None`` when ``path`` is not an SQLite file.

    Raises :class:`StoreError` when the file cannot be read.
    """
    if not is_sqlite_file(path):
        return None
    h = hashlib.sha256()
    try:
        con = sqlite3.connect(path, timeout=30)
        try:
            tables = con.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
            for name, sql in tables:
                h.update(f"{name}\0{sql}\0".encode())
                quoted = name.replace('"', '""')
                for row in con.execute(f'SELECT * FROM "{quoted}"'):
                    h.update(repr(row).encode())
        finally:
            con.close()
    except sqlite3.Error as e:
        raise StoreError(f"cannot read the bank {path} to fingerprint it: {e}") from e
    return h.hexdigest()
