"""The SQL every bank store runs, written once for SQLite and PostgreSQL.

:class:`~deltamem.store.sqlite.SQLiteStore`, :class:`~deltamem.store.postgres.PostgresStore`
and the flat memories' :class:`~deltamem.store.items.ItemStore` keep the same tables
(``meta``, ``rejections``, ``learned``; the node stores ``nodes``) and read and write them
with the same statements. Each statement is written here once, with ``?`` placeholders; a
backend supplies the connection and the few places where the two dialects differ:

* ``_fetch_one`` / ``_fetch_all`` / ``_run`` run one statement (``?`` becomes the driver's
  placeholder) and turn a driver error into the :class:`~deltamem.errors.StoreError` that
  says what it means for the bank; ``_violates_constraint(error)`` tells a constraint
  violation (a duplicate id, a missing parent) apart;
* ``transaction()``, ``version()``, ``integrity_ok()`` and ``close()``: locking, change
  detection and storage checks are the backend's own;
* ``_wrote(changed)``: told after every write inside a transaction (PostgreSQL counts them
  for :meth:`version`);
* the embedding column: ``EMBEDDING_IN`` (the placeholder of a stored embedding),
  ``EMBEDDING_OUT`` (the selected expression), ``_embedding_param``, ``_embedding_array``
  and ``_embedding_bytes`` (a float32 blob in SQLite, a pgvector ``vector`` in PostgreSQL);
* ``LEARNED_ORDER``: what orders the learned ledger (SQLite's ``rowid``, a column in
  PostgreSQL); ``_embedder_dim_known(dim)``: the bank's embedding width is now known
  (PostgreSQL fixes the column's type); ``_imported()``: an import is about to commit.

Statements that both dialects accept are used where one exists (``ON CONFLICT … DO``,
``RETURNING``, ``TRUE``/``FALSE``, quoted ``"trigger"``/``"procedure"`` columns), so a hook
is needed only where the data really differ.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from deltamem.core.tree import Node
from deltamem.errors import BankDamagedError, StoreError
from deltamem.store.base import SCHEMA_VERSION, ConfigCheck
from deltamem.store.records import META_KEYS, import_tree_records, meta_rows, node_from_columns

__all__ = ["AUDIT_COLUMNS", "NODE_KEYS", "RAW_MAX", "SQLLedger", "SQLTreeStore", "decode_meta"]

RAW_MAX = 20000
"""Characters of a rejected LLM output the rejection log keeps."""

NODE_KEYS = (
    "seq", "id", "tree", "kind", "label", "parent_id", "depth", "success_hits", "consolidated",
    "origin", "source_id", "trigger", "activation", "procedure", "termination", "embedding",
    "episode_id", "created_at", "failure_hits", "last_used",
)  # fmt: skip
"""The ``nodes`` columns in the order the stores select them (and an export lists them);
the last two came with schema version 2 (a version-1 bank opened read-only reads them as 0)."""

AUDIT_COLUMNS = ("created_at", "episode_id", "node_id", "tree", "action", "policy", "reason",
                 "record")
"""The columns of the audit trail of forgetting and correction (schema version 2)."""

FORGETTING_SCHEMA = 2
"""The schema version that added ``failure_hits``, ``last_used`` and the ``audit`` table."""
LEDGER_COUNT_SCHEMA = 3
"""The schema version that added ``learned_count``: the number of learned episodes, kept
by triggers on the ledger (migration ``0003_learned_count``), so a learn reads its episode
number in one row instead of counting the ledger (``COUNT(*)`` on PostgreSQL grew with the
bank)."""

_QUOTED = {"trigger": '"trigger"', "procedure": '"procedure"'}  # key words in PostgreSQL


def decode_meta(rows: Iterable[Sequence[Any]], path: str) -> dict[str, Any]:
    """The ``meta`` dict of a bank's ``(key, value)`` text rows: ``schema_version`` and
    ``embedder_dim`` as ints, ``created_at`` a float, ``config`` a dict, the rest text.

    A row that does not decode is :class:`BankDamagedError` (a bank only writes rows that
    do), on every backend alike.
    """
    out: dict[str, Any] = {}
    for k, v in rows:
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
                f"bank {path} is damaged: its settings do not decode ({e}); restore it "
                "from an export or a backup"
            ) from e
    return out


class SQLLedger:
    """What every bank keeps besides its memory units: the ``meta`` settings, the ledger of
    learned episodes and the log of rejected LLM outputs (shared by node and item banks).

    A subclass sets :attr:`schema_version` (and :attr:`schema_name` for messages),
    :attr:`REJECTION_COLUMNS` and :attr:`META_IMPORT_KEYS`, and a backend provides the hooks
    the module doc lists.
    """

    path: str
    schema_version: ClassVar[int] = SCHEMA_VERSION
    schema_label: ClassVar[str] = "schema"
    REJECTION_COLUMNS: ClassVar[tuple[str, ...]] = (
        "created_at", "episode_id", "tree", "role", "reason", "raw",
    )
    META_IMPORT_KEYS: ClassVar[tuple[str, ...]] = META_KEYS
    LEARNED_ORDER: ClassVar[str] = "rowid"

    # -- backend hooks -------------------------------------------------------------------
    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Any] | None:
        raise NotImplementedError

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        raise NotImplementedError

    def _fetch_iter(self, sql: str, params: Sequence[Any] = ()) -> Iterator[Sequence[Any]]:
        """The rows of a query one by one; a backend that can stream them (SQLite) keeps
        no more than one row in memory at a time."""
        yield from self._fetch_all(sql, params)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; returns the number of rows it changed."""
        raise NotImplementedError

    def _violates_constraint(self, error: StoreError) -> bool:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _wrote(self, changed: bool = True) -> None:
        """Told after each write inside a transaction (``changed``: it changed a row)."""

    def _embedder_dim_known(self, dim: int) -> None:
        """The bank's embedding width is now recorded (inside the transaction)."""

    # -- migrations ------------------------------------------------------------------------
    def _apply_migrations(self, migrations: Sequence[tuple[str, str]], done: set[str]) -> None:
        """Run the named migrations not in ``done`` (inside the caller's transaction); a new
        bank records its schema version, an upgraded one its new version."""
        applied = False
        for name, sql in migrations:
            if name in done:
                continue
            for stmt in self._statements(sql):
                self._run(stmt)
            self._run("INSERT INTO migrations VALUES (?, ?)", (name, time.time()))
            applied = True
        if not done:
            self._run("INSERT INTO meta VALUES ('schema_version', ?)",
                      (str(self.schema_version),))
            self._wrote()
        elif applied:
            self._run("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                      (str(self.schema_version),))
            self._wrote()

    def _statements(self, sql: str) -> list[str]:
        """The statements of a migration's text, split at ``;`` outside ``$$``-quoted
        bodies (PostgreSQL's function bodies); a backend may split otherwise."""
        out: list[str] = []
        cur = ""
        for i, chunk in enumerate(sql.split("$$")):
            if i % 2:  # inside a dollar-quoted body
                cur += "$$" + chunk + "$$"
                continue
            first, *rest = chunk.split(";")
            cur += first
            for piece in rest:
                out.append(cur)
                cur = piece
        out.append(cur)
        return [stmt for stmt in out if stmt.strip()]

    def _check_schema(self) -> None:
        v = self.meta().get("schema_version")
        if v is not None and v > self.schema_version:
            raise StoreError(
                f"bank {self.path} has {self.schema_label} version {v}; this deltamem reads up to "
                f"{self.schema_version}: upgrade deltamem"
            )

    # -- meta ------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        """The bank's settings (see :func:`decode_meta`)."""
        return decode_meta(self._fetch_all("SELECT key, value FROM meta"), self.path)

    def _put_meta(self, rows: Iterable[tuple[str, str]]) -> None:
        for k, v in rows:
            self._run(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (k, v),
            )
        self._wrote()

    def import_meta(self, rec: Mapping[str, Any]) -> None:
        """Restore an export's ``meta`` record (inside the caller's import transaction)."""
        self._put_meta(meta_rows(rec, keys=self.META_IMPORT_KEYS,
                                 schema_version=self.schema_version, what=self.schema_label))
        if "embedder_dim" in rec:
            self._embedder_dim_known(int(rec["embedder_dim"]))

    # -- learned episodes --------------------------------------------------------------------
    def mark_learned(self, episode_id: str, learned_at: float | None = None) -> bool:
        """Record ``episode_id`` as learned; False if it was already."""
        with self.transaction():
            added = self._run(
                "INSERT INTO learned (episode_id, learned_at) VALUES (?, ?) "
                "ON CONFLICT (episode_id) DO NOTHING",
                (episode_id, learned_at or time.time()),
            ) == 1
            self._wrote(added)
        return added

    def is_learned(self, episode_id: str) -> bool:
        return self._fetch_one(
            "SELECT 1 FROM learned WHERE episode_id = ?", (episode_id,)) is not None

    def last_learned(self) -> str | None:
        """Id of the episode whose learn committed last (``None`` for a new bank)."""
        row = self._fetch_one(
            f"SELECT episode_id FROM learned ORDER BY {self.LEARNED_ORDER} DESC LIMIT 1")
        return None if row is None else str(row[0])

    def learned_count(self) -> int:
        row = self._fetch_one("SELECT COUNT(*) FROM learned")
        return int(row[0]) if row is not None else 0

    # -- rejected outputs ----------------------------------------------------------------------
    def _add_rejection(self, **fields: Any) -> None:
        """Append to the rejection log (``raw`` kept up to :data:`RAW_MAX` characters)."""
        values = {**fields, "created_at": fields.get("created_at") or time.time(),
                  "raw": fields["raw"][:RAW_MAX]}
        cols = self.REJECTION_COLUMNS
        with self.transaction():
            self._run(f"INSERT INTO rejections ({', '.join(cols)}) "
                      f"VALUES ({', '.join('?' * len(cols))})", [values[c] for c in cols])
            self._wrote()

    def rejections(self) -> list[dict[str, Any]]:
        cols = self.REJECTION_COLUMNS
        rows = self._fetch_all(f"SELECT {', '.join(cols)} FROM rejections ORDER BY id")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def _export_ledgers(self) -> Iterator[dict[str, Any]]:
        """The export records of the rejection log and the learned ledger, in order."""
        for rec in self.rejections():
            yield {"type": "rejection", **rec}
        for eid, at in self._fetch_all(
            f"SELECT episode_id, learned_at FROM learned ORDER BY {self.LEARNED_ORDER}"
        ):
            yield {"type": "learned", "episode_id": eid, "learned_at": at}


class SQLTreeStore(SQLLedger):
    """The :class:`~deltamem.store.base.Store` of a node bank, on any SQL backend.

    ``config_check`` is the :data:`~deltamem.store.base.ConfigCheck` imports apply (set
    by the memory that owns the bank).
    """

    config_check: ConfigCheck | None = None
    EMBEDDING_IN: ClassVar[str] = "?"
    EMBEDDING_OUT: ClassVar[str] = "embedding"

    # -- backend hooks: the embedding column ------------------------------------------------
    def _embedding_param(self, vec: np.ndarray) -> Any:
        raise NotImplementedError

    def _embedding_array(self, value: Any) -> np.ndarray:
        raise NotImplementedError

    def _embedding_bytes(self, value: Any) -> bytes:
        """The stored embedding as little-endian float32 bytes (what an export holds)."""
        raise NotImplementedError

    def _imported(self) -> None:
        """An import's records are in; runs inside its transaction, before the commit."""

    # -- meta ----------------------------------------------------------------------------------
    def init_meta(self, embedder_name: str, embedder_dim: int, config: dict[str, Any]) -> None:
        """Record the embedder and the configuration, once (later calls change nothing)."""
        with self.transaction():
            if "embedder_name" in self.meta():
                return
            self._put_meta([
                ("embedder_name", embedder_name),
                ("embedder_dim", str(int(embedder_dim))),
                ("config", json.dumps(config, sort_keys=True)),
                ("created_at", repr(time.time())),
            ])
            self._embedder_dim_known(int(embedder_dim))

    # -- the ledger's count (schema version 3) -------------------------------------------------
    def _ledger_counted(self) -> bool:
        """Whether the bank keeps ``learned_count`` (schema version 3; a bank opened read-only,
        never migrated, can be older: its ledger is counted)."""
        counted = self.__dict__.get("_ledger_counted_schema")
        if counted is None:
            counted = int(self.meta().get("schema_version") or 0) >= LEDGER_COUNT_SCHEMA
            self.__dict__["_ledger_counted_schema"] = counted
        return bool(counted)

    def learned_count(self) -> int:
        """Episodes in the learned ledger: ``learned_count``'s one row, which triggers on
        ``learned`` keep equal to its rows (any insert or delete, by any writer, a rolled-back
        one rolled back with it); the ledger counted on a bank older than schema version 3."""
        if not self._ledger_counted():
            return super().learned_count()
        row = self._fetch_one("SELECT n FROM learned_count")
        return int(row[0]) if row is not None else 0

    # -- nodes ---------------------------------------------------------------------------------
    def _legacy(self) -> bool:
        """Whether the bank predates schema version 2 (only a bank opened read-only, which
        is never migrated, can): its nodes have no failure count and no last use."""
        legacy = self.__dict__.get("_legacy_schema")
        if legacy is None:
            legacy = int(self.meta().get("schema_version") or 0) < FORGETTING_SCHEMA
            self.__dict__["_legacy_schema"] = legacy
        return bool(legacy)

    def _select_nodes(self) -> str:
        legacy = self._legacy()
        cols = [self.EMBEDDING_OUT if k == "embedding"
                else f"0 AS {k}" if legacy and k in ("failure_hits", "last_used")
                else _QUOTED.get(k, k) for k in NODE_KEYS]
        return f"SELECT {', '.join(cols)} FROM nodes"

    def _row_to_node(self, row: Sequence[Any]) -> Node:
        try:
            cols = dict(zip(NODE_KEYS, row, strict=True))
            return node_from_columns(cols, self._embedding_array(cols["embedding"]))
        except (TypeError, ValueError, KeyError, IndexError) as e:  # what the driver let by
            raise BankDamagedError(
                f"bank {self.path} is damaged: a node row does not decode ({e}); restore it "
                "from an export or a backup"
            ) from e

    def load_nodes(self, after_seq: int = 0) -> list[Node]:
        """Nodes with ``seq > after_seq``, in ``seq`` order (append-only: parents first)."""
        return list(self.iter_nodes(after_seq))

    def iter_nodes(self, after_seq: int = 0) -> Iterator[Node]:
        """:meth:`load_nodes` one node at a time (what a bank of any size is opened with:
        only the node being read is in memory besides what the caller keeps)."""
        sql = f"{self._select_nodes()} WHERE seq > ? ORDER BY seq"
        for row in self._fetch_iter(sql, (after_seq,)):
            yield self._row_to_node(row)

    def nodes_by_id(self, node_ids: Sequence[str]) -> list[Node]:
        """The stored nodes among ``node_ids``, in ``seq`` order (ids not stored are left
        out): what a tree reads a recalled chain's text from."""
        out: list[Node] = []
        ids = list(dict.fromkeys(node_ids))
        for lo in range(0, len(ids), 500):
            chunk = ids[lo : lo + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self._fetch_all(
                f"{self._select_nodes()} WHERE id IN ({marks}) ORDER BY seq", chunk)
            out += [self._row_to_node(r) for r in rows]
        if len(ids) > 500:
            out.sort(key=lambda n: n.seq)
        return out

    def node_counts(self) -> dict[str, int]:
        """Nodes per tree (trees without nodes are left out)."""
        rows = self._fetch_all("SELECT tree, COUNT(*) FROM nodes GROUP BY tree")
        return {str(r[0]): int(r[1]) for r in rows}

    def node_states(self) -> list[tuple[str, str, int, bool, int]]:
        """``(id, tree, success_hits, consolidated, failure_hits)`` of every node (the fields
        a learn changes)."""
        failures = "0" if self._legacy() else "failure_hits"
        rows = self._fetch_all(
            f"SELECT id, tree, success_hits, consolidated, {failures} FROM nodes ORDER BY seq")
        return [(r[0], r[1], int(r[2]), bool(r[3]), int(r[4])) for r in rows]

    def node_state(self, node_id: str) -> tuple[int, bool]:
        """``(success_hits, consolidated)`` of one node."""
        row = self._fetch_one(
            "SELECT success_hits, consolidated FROM nodes WHERE id = ?", (node_id,))
        if row is None:
            raise StoreError(f"no node {node_id!r} in bank {self.path}")
        return int(row[0]), bool(row[1])

    def insert_node(self, node: Node, *, keep_seq: bool = False) -> Node:
        """Store a new node; ``keep_seq`` keeps ``node.seq`` (imports only)."""
        p = node.payload
        emb = np.asarray(node.embedding, dtype=np.float32).reshape(-1)
        values: dict[str, Any] = {
            "seq": node.seq, "id": node.id, "tree": node.tree, "kind": node.kind,
            "label": node.label, "parent_id": node.parent, "depth": node.depth,
            "success_hits": node.success_hits, "consolidated": bool(node.consolidated),
            "origin": node.origin, "source_id": node.source, "trigger": node.trigger,
            "activation": p.activation, "procedure": p.procedure, "termination": p.termination,
            "embedding": self._embedding_param(emb), "episode_id": node.episode_id,
            "created_at": node.created_at, "failure_hits": node.failure_hits,
            "last_used": node.last_used,
        }  # fmt: skip
        keys = NODE_KEYS if keep_seq else NODE_KEYS[1:]
        cols = ", ".join(_QUOTED.get(k, k) for k in keys)
        marks = ", ".join(self.EMBEDDING_IN if k == "embedding" else "?" for k in keys)
        with self.transaction():
            try:
                row = self._fetch_one(f"INSERT INTO nodes ({cols}) VALUES ({marks}) RETURNING seq",
                                      [values[k] for k in keys])
            except StoreError as e:
                if not self._violates_constraint(e):
                    raise
                raise StoreError(f"cannot store node {node.id}: {e.__cause__}") from e.__cause__
            self._wrote()
        assert row is not None
        return replace(node, seq=int(row[0]))

    def increment_hits(self, node_id: str) -> int:
        """Add one success hit atomically; returns c(v)."""
        with self.transaction():
            row = self._fetch_one(
                "UPDATE nodes SET success_hits = success_hits + 1 WHERE id = ? "
                "RETURNING success_hits",
                (node_id,),
            )
            if row is None:
                raise StoreError(f"no node {node_id!r} in bank {self.path}")
            self._wrote()
        return int(row[0])

    def mark_consolidated(self, node_id: str) -> bool:
        """Set the node's flag unless it is set (compare-and-set); False when it was."""
        with self.transaction():
            changed = self._run(
                "UPDATE nodes SET consolidated = TRUE WHERE id = ? AND consolidated = FALSE",
                (node_id,),
            ) == 1
            self._wrote(changed)
        return changed

    # -- forgetting and correction (schema version 2) ---------------------------------------------
    def increment_failures(self, node_id: str) -> int:
        """Add one failure hit atomically (a failed episode followed this node); returns f(v)."""
        with self.transaction():
            row = self._fetch_one(
                "UPDATE nodes SET failure_hits = failure_hits + 1 WHERE id = ? "
                "RETURNING failure_hits",
                (node_id,),
            )
            if row is None:
                raise StoreError(f"no node {node_id!r} in bank {self.path}")
            self._wrote()
        return int(row[0])

    def node_failures(self, node_id: str) -> int:
        """f(v) of one node."""
        row = self._fetch_one("SELECT failure_hits FROM nodes WHERE id = ?", (node_id,))
        if row is None:
            raise StoreError(f"no node {node_id!r} in bank {self.path}")
        return int(row[0])

    def touch(self, node_ids: Iterable[str], used_at: int) -> None:
        """Record that ``node_ids`` were used by the learn whose episode number (the learned
        ledger's size once it is counted) is ``used_at``; a later use is never undone."""
        ids = list(dict.fromkeys(node_ids))
        with self.transaction():
            for lo in range(0, len(ids), 500):  # one statement per 500 nodes (a chain: one)
                chunk = ids[lo : lo + 500]
                changed = self._run(
                    "UPDATE nodes SET last_used = ? WHERE last_used < ? AND id IN "
                    f"({', '.join('?' * len(chunk))})",
                    (int(used_at), int(used_at), *chunk),
                )
                self._wrote(changed > 0)

    def delete_nodes(self, node_ids: Iterable[str]) -> int:
        """Remove nodes (their descendants must be among them: children go first); returns
        how many were removed. A node with a child left behind is a :class:`StoreError`
        and nothing is removed."""
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return 0
        with self.transaction():
            depth: dict[str, int] = {}
            for node_id in ids:
                row = self._fetch_one("SELECT depth FROM nodes WHERE id = ?", (node_id,))
                if row is not None:
                    depth[node_id] = int(row[0])
            gone = set(depth)
            for node_id in depth:
                for (child,) in self._fetch_all("SELECT id FROM nodes WHERE parent_id = ?",
                                                (node_id,)):
                    if child not in gone:
                        raise StoreError(f"cannot remove node {node_id} without its child "
                                         f"{child}")
            for node_id in sorted(depth, key=lambda i: -depth[i]):
                self._run("DELETE FROM nodes WHERE id = ?", (node_id,))
            self._wrote(bool(depth))
        return len(depth)

    def update_node(self, node_id: str, *, label: str, trigger: str, payload: Any,
                    embedding: np.ndarray) -> None:
        """Replace a node's label, trigger, payload (``activation``, ``procedure``,
        ``termination``) and embedding: the inspector's edits
        (:mod:`deltamem.memories.deltamem.inspector`); everything else stays."""
        emb = np.asarray(embedding, dtype=np.float32).reshape(-1)
        with self.transaction():
            changed = self._run(
                f"UPDATE nodes SET label = ?, \"trigger\" = ?, activation = ?, "
                f"\"procedure\" = ?, termination = ?, embedding = {self.EMBEDDING_IN} "
                "WHERE id = ?",
                (label, trigger, payload.activation, payload.procedure, payload.termination,
                 self._embedding_param(emb), node_id),
            )
            if changed != 1:
                raise StoreError(f"no node {node_id!r} in bank {self.path}")
            self._wrote()

    def set_meta(self, key: str, value: str) -> None:
        """Set one of the bank's own settings (not those :meth:`init_meta` records once,
        nor the schema version)."""
        if key in META_KEYS or key == "schema_version":
            raise StoreError(f"meta key {key!r} is not set this way")
        with self.transaction():
            self._put_meta([(key, value)])

    def add_audit(self, *, episode_id: str, node_id: str, tree: str, action: str, policy: str,
                  reason: str, record: Mapping[str, Any] | None = None,
                  created_at: float | None = None) -> None:
        """Append one entry to the audit trail of forgetting and correction (what was
        superseded, penalised or removed, by which policy, why; ``record``: what the node
        held, for a removed one)."""
        values = {"created_at": created_at or time.time(), "episode_id": episode_id,
                  "node_id": node_id, "tree": tree, "action": action, "policy": policy,
                  "reason": reason, "record": json.dumps(dict(record or {}), sort_keys=True)}
        with self.transaction():
            self._run(f"INSERT INTO audit ({', '.join(AUDIT_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * len(AUDIT_COLUMNS))})",
                      [values[c] for c in AUDIT_COLUMNS])
            self._wrote()

    def audit(self) -> list[dict[str, Any]]:
        """The audit trail, oldest first (``record`` decoded); empty for a version-1 bank."""
        if self._legacy():
            return []
        rows = self._fetch_all(f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit ORDER BY id")
        out = []
        for r in rows:
            d = dict(zip(AUDIT_COLUMNS, r, strict=True))
            d["record"] = json.loads(d["record"] or "{}")
            out.append(d)
        return out

    # -- rejected outputs ----------------------------------------------------------------------
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
        """Log an extractor output that was rejected."""
        self._add_rejection(tree=tree, role=role, reason=reason, raw=raw,
                            episode_id=episode_id, created_at=created_at)

    # -- export / import -----------------------------------------------------------------------
    def iter_export(self) -> Iterator[dict[str, Any]]:
        """Every record of the bank as JSON-ready dicts: meta first, then nodes, logs.

        Every backend writes the same records, field for field.
        """
        meta = self.meta()
        yield {"type": "meta", **{k: meta[k] for k in sorted(meta)}}
        for row in self._fetch_all(f"{self._select_nodes()} ORDER BY seq"):
            d = dict(zip(NODE_KEYS, row, strict=True))
            d["consolidated"] = bool(d["consolidated"])
            d["failure_hits"], d["last_used"] = int(d["failure_hits"]), int(d["last_used"])
            d["embedding"] = base64.b64encode(self._embedding_bytes(d["embedding"])).decode(
                "ascii")
            yield {"type": "node", **d}
        yield from self._export_ledgers()
        for rec in self.audit():
            yield {"type": "audit", **rec}

    def import_records(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Load exported records into this (empty) bank in one transaction; returns node count.

        Each record is checked before it is written (:class:`~deltamem.store.records.
        ImportChecker`, with :attr:`config_check`); the first one refused raises
        :class:`~deltamem.errors.InvalidImportError` and nothing is written.
        """
        with self.transaction():
            row = self._fetch_one("SELECT COUNT(*) FROM nodes")
            if row is not None and row[0]:
                raise StoreError(f"import needs an empty bank; {self.path} already has nodes")
            n = import_tree_records(self, records, self.config_check)
            self._imported()
        return n
