"""SQLite bank store: one file per memory bank.

WAL journal, a busy timeout so concurrent writers wait instead of failing,
``BEGIN IMMEDIATE`` transactions (the write lock is taken up front, so two
learners never interleave a write decision) and ``synchronous=FULL`` so a
committed ``learn()`` survives a crash. Embeddings are float32 blobs.
Migrations are named and applied inside a transaction.

Durability (``synchronous``). With the default ``"full"`` every commit waits
for an fsync of the WAL file: a committed ``learn()`` survives a process
crash *and* a power loss or OS crash. ``"normal"`` (WAL mode only) skips that
per-commit fsync — the WAL is synced at checkpoints — so a commit is in the OS
page cache when it returns: it survives the process being killed (SIGKILL,
OOM, segfault), but a power loss or OS crash may roll back the most recent
commits. The bank never corrupts either way and each learn stays all or
nothing. Choose ``"normal"`` only where losing the last few learns to a power
cut is acceptable; see :meth:`SQLiteLedger.set_synchronous`.
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np

from deltamem.core.tree import Node
from deltamem.errors import (
    BankDamagedError,
    BankReadOnlyError,
    ConfigError,
    NotABankError,
    StorageFullError,
    StoreError,
)
from deltamem.store.base import SCHEMA_VERSION
from deltamem.store.records import import_tree_records, meta_rows, node_from_columns

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
]

_NODE_COLS = (
    "seq, id, tree, kind, label, parent_id, depth, success_hits, consolidated, origin, "
    "source_id, trigger, activation, procedure, termination, embedding, episode_id, created_at"
)

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


class SQLiteLedger:
    """What every SQLite bank file shares: the learned-episode ledger, change detection,
    integrity check, the re-entrant write transaction and closing. Subclasses set ``_conn``,
    ``_lock`` (an RLock), ``_in_tx = False`` and ``path``."""

    _conn: sqlite3.Connection
    _lock: threading.RLock
    _in_tx: bool
    path: str

    # -- transactions ----------------------------------------------------------
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

    @guarded
    def version(self) -> int:
        """Changes when another connection commits (``PRAGMA data_version``)."""
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    @guarded
    def mark_learned(self, episode_id: str, learned_at: float | None = None) -> bool:
        """Record ``episode_id`` as learned; False if it was already."""
        with self.transaction():
            cur = self._conn.execute(
                "INSERT OR IGNORE INTO learned VALUES (?, ?)",
                (episode_id, learned_at or time.time()),
            )
        return cur.rowcount == 1

    @guarded
    def is_learned(self, episode_id: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM learned WHERE episode_id = ?", (episode_id,)
        ).fetchone()
        return row is not None

    @guarded
    def last_learned(self) -> str | None:
        """Id of the episode whose learn committed last (``None`` for a new bank)."""
        row = self._conn.execute(
            "SELECT episode_id FROM learned ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    @guarded
    def learned_count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM learned").fetchone()[0])

    @guarded
    def integrity_ok(self) -> bool:
        return self._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        self._conn.close()


class SQLiteStore(SQLiteLedger):
    """A bank in one SQLite file (``":memory:"`` for a throwaway bank).

    Args:
        path: the bank file; created with its folder when missing.
        timeout: seconds a writer waits for another writer's lock.
        readonly: open without creating or migrating (for inspection).
        synchronous: commit durability, ``"full"`` (default: an fsync per commit) or
            ``"normal"`` (WAL only; survives process crashes, not power loss); module doc.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 60.0,
        readonly: bool = False,
        synchronous: Synchronous = "full",
    ):
        if synchronous not in SYNCHRONOUS_MODES:
            raise ConfigError(
                f"unknown synchronous mode {synchronous!r}; use one of {SYNCHRONOUS_MODES}"
            )
        self.path = str(path)
        self._local = threading.local()
        if self.path != ":memory:":
            p = Path(self.path)
            if readonly and not p.exists():
                raise StoreError(f"no memory bank at {p}")
            if not readonly:
                p.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._in_tx = False
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

    def _has_table(self, name: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)
        ).fetchone()
        return row is not None

    def _migrate(self) -> None:
        with self.transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL)"
            )
            done = {r[0] for r in self._conn.execute("SELECT name FROM migrations")}
            foreign = done - {name for name, _ in _MIGRATIONS}
            if foreign or (not done and (self._has_table("nodes") or self._has_table("meta"))):
                system = self._peek_system()
                self._not_a_bank(f"it belongs to the {system!r} memory system" if system else "")
            for name, sql in _MIGRATIONS:
                if name in done:
                    continue
                for stmt in sql.split(";"):
                    if stmt.strip():
                        self._conn.execute(stmt)
                self._conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
            if not done:
                self._conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )

    def _peek_system(self) -> str | None:
        if not self._has_table("meta"):
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'system'").fetchone()
        return None if row is None else str(row[0])

    def _check_schema(self) -> None:
        v = self.meta().get("schema_version")
        if v is not None and v > SCHEMA_VERSION:
            raise StoreError(
                f"bank {self.path} has schema version {v}; this deltamem reads up to "
                f"{SCHEMA_VERSION}: upgrade deltamem"
            )

    # -- meta ----------------------------------------------------------------
    @guarded
    def meta(self) -> dict[str, Any]:
        rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
        out: dict[str, Any] = {}
        for r in rows:
            k, v = r["key"], r["value"]
            try:
                if not isinstance(k, str):
                    raise TypeError(f"a setting's name reads as {type(k).__name__}")
                if k in ("schema_version", "embedder_dim"):
                    out[k] = int(v)
                elif k == "created_at":
                    out[k] = float(v)
                elif k == "config":
                    out[k] = json.loads(v)
                else:
                    out[k] = v
            except (TypeError, ValueError) as e:
                raise BankDamagedError(
                    f"bank {self.path} is damaged: its settings do not decode ({e}); restore it "
                    "from an export or a backup"
                ) from e
        return out

    @guarded
    def init_meta(self, embedder_name: str, embedder_dim: int, config: dict[str, Any]) -> None:
        with self.transaction():
            cur = self.meta()
            if "embedder_name" in cur:
                return
            rows = [
                ("embedder_name", embedder_name),
                ("embedder_dim", str(int(embedder_dim))),
                ("config", json.dumps(config, sort_keys=True)),
                ("created_at", repr(time.time())),
            ]
            self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows)

    # -- nodes ---------------------------------------------------------------
    def _row_to_node(self, r: sqlite3.Row) -> Node:
        try:
            emb = np.frombuffer(r["embedding"], dtype="<f4").astype(np.float32)
            return node_from_columns(r, emb)
        except (TypeError, ValueError, KeyError, IndexError) as e:  # what SQLite did not catch
            raise BankDamagedError(
                f"bank {self.path} is damaged: a node row does not decode ({e}); restore it "
                "from an export or a backup"
            ) from e

    @guarded
    def load_nodes(self, after_seq: int = 0) -> list[Node]:
        """Nodes with ``seq > after_seq``, in ``seq`` order (append-only: parents first)."""
        rows = self._conn.execute(
            f"SELECT {_NODE_COLS} FROM nodes WHERE seq > ? ORDER BY seq", (after_seq,)
        ).fetchall()
        return [self._row_to_node(r) for r in rows]

    @guarded
    def node_states(self) -> list[tuple[str, str, int, bool]]:
        """``(id, tree, success_hits, consolidated)`` of every node (the mutable fields)."""
        rows = self._conn.execute(
            "SELECT id, tree, success_hits, consolidated FROM nodes ORDER BY seq"
        ).fetchall()
        return [(r[0], r[1], int(r[2]), bool(r[3])) for r in rows]

    @guarded
    def insert_node(self, node: Node, *, keep_seq: bool = False) -> Node:
        emb = np.asarray(node.embedding, dtype="<f4").reshape(-1).tobytes()
        p = node.payload
        values = (
            node.id,
            node.tree,
            node.kind,
            node.label,
            node.parent,
            node.depth,
            node.success_hits,
            int(node.consolidated),
            node.origin,
            node.source,
            node.trigger,
            p.activation,
            p.procedure,
            p.termination,
            emb,
            node.episode_id,
            node.created_at,
        )
        cols = _NODE_COLS.replace("seq, ", "", 1)
        with self.transaction():
            try:
                if keep_seq:
                    self._conn.execute(
                        f"INSERT INTO nodes ({_NODE_COLS}) VALUES ({', '.join('?' * 18)})",
                        (node.seq, *values),
                    )
                    seq = node.seq
                else:
                    cur = self._conn.execute(
                        f"INSERT INTO nodes ({cols}) VALUES ({', '.join('?' * 17)})", values
                    )
                    seq = int(cur.lastrowid or 0)
            except sqlite3.IntegrityError as e:
                raise StoreError(f"cannot store node {node.id}: {e}") from e
        return replace(node, seq=seq)

    @guarded
    def increment_hits(self, node_id: str) -> int:
        with self.transaction():
            row = self._conn.execute(
                "UPDATE nodes SET success_hits = success_hits + 1 WHERE id = ? "
                "RETURNING success_hits",
                (node_id,),
            ).fetchone()
        if row is None:
            raise StoreError(f"no node {node_id!r} in bank {self.path}")
        return int(row[0])

    @guarded
    def mark_consolidated(self, node_id: str) -> bool:
        with self.transaction():
            cur = self._conn.execute(
                "UPDATE nodes SET consolidated = 1 WHERE id = ? AND consolidated = 0", (node_id,)
            )
        return cur.rowcount == 1

    @guarded
    def node_state(self, node_id: str) -> tuple[int, bool]:
        row = self._conn.execute(
            "SELECT success_hits, consolidated FROM nodes WHERE id = ?", (node_id,)
        ).fetchone()
        if row is None:
            raise StoreError(f"no node {node_id!r} in bank {self.path}")
        return int(row[0]), bool(row[1])

    # -- logs -----------------------------------------------------------------
    @guarded
    def add_rejection(
        self,
        *,
        tree: str,
        role: str,
        reason: str,
        raw: str,
        episode_id: str,
        created_at: float | None = None,
    ) -> None:
        with self.transaction():
            self._conn.execute(
                "INSERT INTO rejections (created_at, episode_id, tree, role, reason, raw) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (created_at or time.time(), episode_id, tree, role, reason, raw[:20000]),
            )

    @guarded
    def rejections(self) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT created_at, episode_id, tree, role, reason, raw FROM rejections ORDER BY id"
        ).fetchall()
        return [dict(r) for r in rows]

    # -- export / import --------------------------------------------------------
    @guarded
    def iter_export(self) -> Iterator[dict[str, Any]]:
        """Every record of the bank as JSON-ready dicts: meta first, then nodes, logs."""
        meta = self.meta()
        yield {"type": "meta", **{k: meta[k] for k in sorted(meta)}}
        for r in self._conn.execute(f"SELECT {_NODE_COLS} FROM nodes ORDER BY seq"):
            d = {k: r[k] for k in r.keys()}  # noqa: SIM118 - sqlite3.Row
            d["consolidated"] = bool(d["consolidated"])
            d["embedding"] = base64.b64encode(d["embedding"]).decode("ascii")
            yield {"type": "node", **d}
        for r in self._conn.execute(
            "SELECT created_at, episode_id, tree, role, reason, raw FROM rejections ORDER BY id"
        ):
            yield {"type": "rejection", **dict(r)}
        for r in self._conn.execute("SELECT episode_id, learned_at FROM learned ORDER BY rowid"):
            yield {"type": "learned", **dict(r)}

    @guarded
    def import_records(self, records: Iterable[dict[str, Any]]) -> int:
        """Load exported records into this (empty) bank in one transaction; returns node count."""
        with self.transaction():
            if self._conn.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]:
                raise StoreError(f"import needs an empty bank; {self.path} already has nodes")
            return import_tree_records(self, records)

    def _import_meta(self, rec: dict[str, Any]) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", meta_rows(rec))


def export_jsonl(store: Any, path: str | Path) -> int:
    """Write a bank (any store with ``iter_export()``) to a JSONL file atomically.

    Returns the number of records written. The records go to ``<path>.tmp``, which replaces
    ``path`` only when complete; on any failure it is removed and :class:`StoreError` says
    why (missing folder, a folder at ``path``, disk full, ...).
    """
    out = Path(path)
    if out.is_dir():
        raise StoreError(f"cannot export to {out}: it is a folder; give a file name")
    if not out.parent.is_dir():
        raise StoreError(f"cannot export to {out}: folder {out.parent} does not exist")
    n = 0
    tmp = Path(str(out) + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in store.iter_export():
                try:
                    line = json.dumps(rec, sort_keys=True, ensure_ascii=False)
                except (TypeError, ValueError) as e:  # only a damaged bank reads like this
                    raise BankDamagedError(
                        f"record {n + 1} of the bank cannot be written as JSON ({e}): the bank "
                        "is damaged"
                    ) from e
                f.write(line + "\n")
                n += 1
        tmp.replace(out)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise StoreError(f"cannot write {out}: {e.strerror or e}") from e
        raise
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of an export file; an unreadable file or a malformed line is a
    :class:`StoreError` (:class:`~deltamem.errors.InvalidImportError` for the content)
    naming it."""
    from deltamem.errors import InvalidImportError

    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a generator owns it
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
    with f:
        i = 0
        while True:
            try:
                raw = f.readline()
            except OSError as e:
                raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
            if not raw:
                return
            i += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidImportError(f"{path}:{i}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidImportError(f"{path}:{i}: not valid JSON ({e.msg})") from e
            except RecursionError:
                raise InvalidImportError(f"{path}:{i}: JSON nested too deeply") from None
