"""A small SQLite store of flat memory units, shared by the paper's baselines.

Synapse keeps whole trajectories, AWM one workflow document per task type and
ReasoningBank lesson items (paper §4.1, Table 5). They all fit one table of
*items*: a kind, a lookup key, the text shown to the agent, a JSON payload
with the structured fields and an optional float32 embedding.

Same conventions as :class:`~deltamem.store.sqlite.SQLiteStore`, whose SQLite
connection it shares (:class:`~deltamem.store.sqlite.SQLiteBackend`): one file per
bank, WAL journal, busy timeout, ``BEGIN IMMEDIATE`` transactions,
``synchronous=FULL``, named migrations applied inside a transaction, and a
``meta`` table recording the schema version, the memory system, the embedder
(name and dimension) and the build configuration. A ``learned`` table makes
``learn`` idempotent per episode id; rejected LLM outputs are logged in
``rejections`` (the ledger statements are :class:`~deltamem.store.sql.SQLLedger`'s).
JSONL export/import round-trips every field.
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.errors import EmbedderMismatchError, StoreError
from deltamem.store.jsonl import export_jsonl, read_export
from deltamem.store.records import META_KEYS, apply_records
from deltamem.store.sqlite import SQLiteBackend, Synchronous, guarded
from deltamem.types import new_id

__all__ = ["ITEMS_SCHEMA_VERSION", "Item", "ItemStore"]

ITEMS_SCHEMA_VERSION = 1
"""Schema version of item banks (independent of DeltaMem's node banks)."""

_MIGRATIONS: list[tuple[str, str]] = [
    (
        "items_0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE items (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            system TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}',
            embedding BLOB,
            episode_id TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX items_kind_key ON items(kind, key);
        CREATE TABLE rejections (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            episode_id TEXT NOT NULL,
            role TEXT NOT NULL,
            reason TEXT NOT NULL,
            raw TEXT NOT NULL
        );
        CREATE TABLE learned (episode_id TEXT PRIMARY KEY, learned_at REAL NOT NULL);
        """,
    ),
]

_COLS = "seq, id, system, kind, key, text, payload, embedding, episode_id, created_at, updated_at"


@dataclass(frozen=True)
class Item:
    """One stored memory unit.

    ``payload`` holds the system's structured fields (JSON-serialisable);
    ``text`` is what the agent is shown and what token statistics count;
    ``embedding`` is ``None`` for units that are never searched by vector.
    ``seq`` is assigned by the store (0 before insertion).
    """

    system: str
    kind: str
    text: str
    key: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None
    episode_id: str = ""
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    seq: int = 0


class ItemStore(SQLiteBackend):
    """A baseline bank in one SQLite file (``":memory:"`` for a throwaway bank).

    Args:
        path: the bank file; created with its folder when missing.
        timeout: seconds a writer waits for another writer's lock.
        readonly: open without creating or migrating (for inspection).

    Raises :class:`StoreError` when the file is not an item bank (a DeltaMem
    node bank included) or has a newer schema than this code reads.
    """

    schema_version = ITEMS_SCHEMA_VERSION
    schema_label = "item schema"
    REJECTION_COLUMNS = ("created_at", "episode_id", "role", "reason", "raw")
    META_IMPORT_KEYS = ("system", *META_KEYS)

    def __init__(self, path: str | Path, *, timeout: float = 60.0, readonly: bool = False):
        self._open_file(path, timeout=timeout, readonly=readonly, synchronous="full")

    # -- setup -----------------------------------------------------------------
    @guarded
    def _setup(self, readonly: bool, synchronous: Synchronous) -> None:
        if readonly:
            if not self._has_table("items"):
                raise StoreError(f"{self.path} is not a baseline memory bank (no items table)")
        else:
            self._migrate()
        self._check_schema()

    def _migrate(self) -> None:
        if self._has_table("nodes"):
            raise StoreError(
                f"{self.path} is a DeltaMem node bank, not a baseline item bank; "
                "open it with DeltaMem or use another file"
            )
        with self.transaction():
            done = self._migrations_done()
            if not done and self._has_table("meta"):
                raise StoreError(f"{self.path} holds tables deltamem did not create")
            self._apply_migrations(_MIGRATIONS, done)

    # -- meta --------------------------------------------------------------------
    @guarded
    def init_meta(
        self,
        *,
        system: str,
        embedder_name: str,
        embedder_dim: int,
        config: Mapping[str, Any],
    ) -> None:
        """Record system, embedder and configuration once; on later opens, check them.

        Raises :class:`StoreError` when the bank belongs to another memory system
        and :class:`EmbedderMismatchError` when it was built with another
        embedder (name or dimension). The recorded configuration is never
        overwritten.
        """
        with self.transaction():
            cur = self.meta()
            if "system" in cur and cur["system"] != system:
                raise StoreError(
                    f"bank {self.path} belongs to memory system {cur['system']!r}, "
                    f"not {system!r}"
                )
            if "embedder_name" in cur:
                self.check_embedder(embedder_name, embedder_dim)
                return
            self._put_meta([
                ("system", system),
                ("embedder_name", embedder_name),
                ("embedder_dim", str(int(embedder_dim))),
                ("config", json.dumps(dict(config), sort_keys=True)),
                ("created_at", repr(time.time())),
            ])

    @guarded
    def check_embedder(self, name: str, dim: int) -> None:
        """Raise :class:`EmbedderMismatchError` unless the bank records this embedder
        (a bank without a recorded embedder accepts any)."""
        meta = self.meta()
        rec_name, rec_dim = meta.get("embedder_name"), meta.get("embedder_dim")
        if rec_name is None:
            return
        if rec_name != name or rec_dim != int(dim):
            raise EmbedderMismatchError(
                f"bank {self.path} was built with embedder {rec_name!r} (dim {rec_dim}); got "
                f"{name!r} (dim {dim}). Open it with the same embedder, or build a new bank."
            )

    # -- items ---------------------------------------------------------------------
    @staticmethod
    def _row_to_item(r: sqlite3.Row) -> Item:
        emb = r["embedding"]
        return Item(
            system=r["system"],
            kind=r["kind"],
            text=r["text"],
            key=r["key"],
            payload=json.loads(r["payload"]),
            embedding=None if emb is None else np.frombuffer(emb, dtype="<f4").astype(np.float32),
            episode_id=r["episode_id"],
            id=r["id"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            seq=r["seq"],
        )

    @guarded
    def items(self, kind: str | None = None, key: str | None = None) -> list[Item]:
        """Stored items in insertion order, optionally only of one ``kind`` / ``key``."""
        where, args = [], []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if key is not None:
            where.append("key = ?")
            args.append(key)
        sql = f"SELECT {_COLS} FROM items"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [self._row_to_item(r) for r in rows]

    @guarded
    def get(self, item_id: str) -> Item:
        """The item with ``item_id``; :class:`StoreError` when there is none."""
        row = self._conn.execute(f"SELECT {_COLS} FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise StoreError(f"no item {item_id!r} in bank {self.path}")
        return self._row_to_item(row)

    @guarded
    def count(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self._conn.execute("SELECT COUNT(*) FROM items").fetchone()[0])
        return int(
            self._conn.execute("SELECT COUNT(*) FROM items WHERE kind = ?", (kind,)).fetchone()[0]
        )

    @guarded
    def insert(self, item: Item, *, keep_seq: bool = False) -> Item:
        """Store a new item; returns it with its ``seq`` (and ``updated_at`` if it was 0)."""
        item = replace(item, updated_at=item.updated_at or item.created_at)
        values = (
            item.id, item.system, item.kind, item.key, item.text, _dump_payload(item.payload),
            _blob(item.embedding), item.episode_id, item.created_at, item.updated_at,
        )
        cols = _COLS.replace("seq, ", "", 1)
        with self.transaction():
            try:
                if keep_seq:
                    self._conn.execute(
                        f"INSERT INTO items ({_COLS}) VALUES ({', '.join('?' * 11)})",
                        (item.seq, *values),
                    )
                    seq = item.seq
                else:
                    cur = self._conn.execute(
                        f"INSERT INTO items ({cols}) VALUES ({', '.join('?' * 10)})", values
                    )
                    seq = int(cur.lastrowid or 0)
            except sqlite3.IntegrityError as e:
                raise StoreError(f"cannot store item {item.id}: {e}") from e
        return replace(item, seq=seq)

    @guarded
    def update(
        self,
        item_id: str,
        *,
        text: str,
        payload: Mapping[str, Any],
        embedding: np.ndarray | None,
        episode_id: str,
        updated_at: float | None = None,
    ) -> None:
        """Replace an item's text, payload, embedding and last episode (AWM's online merge)."""
        with self.transaction():
            cur = self._conn.execute(
                "UPDATE items SET text = ?, payload = ?, embedding = ?, episode_id = ?, "
                "updated_at = ? WHERE id = ?",
                (text, _dump_payload(payload), _blob(embedding), episode_id,
                 updated_at or time.time(), item_id),
            )
        if cur.rowcount != 1:
            raise StoreError(f"no item {item_id!r} in bank {self.path}")

    # -- logs ----------------------------------------------------------------------
    def add_rejection(
        self, *, episode_id: str, role: str, reason: str, raw: str,
        created_at: float | None = None,
    ) -> None:
        """Log an LLM output that was rejected (``raw`` is kept up to 20,000 characters)."""
        self._add_rejection(episode_id=episode_id, role=role, reason=reason, raw=raw,
                            created_at=created_at)

    # -- export / import --------------------------------------------------------------
    @guarded
    def iter_export(self) -> Iterator[dict[str, Any]]:
        """Every record as JSON-ready dicts: meta first, then items, rejections, learned ids."""
        meta = self.meta()
        yield {"type": "meta", **{k: meta[k] for k in sorted(meta)}}
        for r in self._conn.execute(f"SELECT {_COLS} FROM items ORDER BY seq"):
            d = {k: r[k] for k in r.keys()}  # noqa: SIM118 - sqlite3.Row
            d["payload"] = json.loads(d["payload"])
            if d["embedding"] is not None:
                d["embedding"] = base64.b64encode(d["embedding"]).decode("ascii")
            yield {"type": "item", **d}
        yield from self._export_ledgers()

    @guarded
    def import_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Load exported records into this (empty) bank in one transaction; returns item count.

        Raises :class:`StoreError` for a non-empty bank, a malformed or unknown
        record, or an export of a newer schema; nothing is written then.
        """
        handlers: dict[str, Callable[[Mapping[str, Any]], object]] = {
            "meta": self.import_meta,
            "item": lambda r: self.insert(_item_from_record(r), keep_seq=True),
            "rejection": lambda r: self.add_rejection(
                episode_id=r["episode_id"], role=r["role"], reason=r["reason"], raw=r["raw"],
                created_at=r["created_at"],
            ),
            "learned": lambda r: self.mark_learned(r["episode_id"], r["learned_at"]),
        }
        with self.transaction():
            if self.count() or self.learned_count():
                raise StoreError(f"import needs an empty bank; {self.path} already has content")
            return apply_records(records, handlers, counted="item")

    def export_jsonl(self, path: str | Path) -> int:
        """Write the bank to a JSONL file (one record a line, atomically); returns records."""
        return export_jsonl(self, path)

    def import_jsonl(self, path: str | Path) -> int:
        """Load a file written by :meth:`export_jsonl` into this empty bank; returns items."""
        return self.import_records(read_export(path))



def _dump_payload(payload: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(payload), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StoreError(f"item payload is not JSON-serialisable: {e}") from e


def _blob(embedding: np.ndarray | None) -> bytes | None:
    if embedding is None:
        return None
    vec = np.asarray(embedding, dtype="<f4").reshape(-1)
    if not np.all(np.isfinite(vec)):
        raise StoreError("item embedding has non-finite values")
    return vec.tobytes()


def _item_from_record(rec: Mapping[str, Any]) -> Item:
    emb = rec["embedding"]
    created = float(rec["created_at"])
    if not math.isfinite(created):
        raise ValueError("created_at is not finite")
    return Item(
        system=rec["system"],
        kind=rec["kind"],
        text=rec["text"],
        key=rec["key"],
        payload=dict(rec["payload"]),
        embedding=None if emb is None
        else np.frombuffer(base64.b64decode(emb), dtype="<f4").astype(np.float32),
        episode_id=rec["episode_id"],
        id=rec["id"],
        created_at=created,
        updated_at=float(rec["updated_at"]),
        seq=int(rec["seq"]),
    )
