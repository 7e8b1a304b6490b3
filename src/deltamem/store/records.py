"""The bank's JSONL export records, shared by every tree store (no I/O here).

An export is a stream of JSON objects, each with a ``type``:

- ``meta``: ``schema_version``, ``embedder_name``, ``embedder_dim``, ``created_at``, ``config``;
- ``node``: every column of a node, the embedding as base64 of little-endian float32;
- ``rejection``: one rejected LLM output (tree, role, reason, raw, episode id, time);
- ``learned``: one learned episode id and when it was learned;
- ``audit``: one entry of the audit trail of forgetting and correction (schema version 2).

A version-1 export (nodes without ``failure_hits`` and ``last_used``, no audit) imports
with both fields 0.

:class:`~deltamem.store.sqlite.SQLiteStore` and :class:`~deltamem.store.postgres.PostgresStore`
write the same records field for field, so a bank moves between backends by export and import.
This module holds the parts both read the same way: decoding a node, checking and encoding the
meta rows, checking every record against the invariants the loader relies on
(:class:`ImportChecker`) and applying a record stream to a store (:func:`apply_records`); the
baseline item store (:mod:`deltamem.store.items`) reads its own records with the same two
functions.

An import is all or nothing: the stores apply the records inside one transaction and the
checker refuses the first record that would leave a bank the loader cannot read (a parent
that is not an earlier node of the same tree, a depth that is not the parent's + 1 or exceeds
D_max, an embedding of another dimension or with non-finite values, a ``seq`` out of range,
a field of the wrong type ...), with :class:`~deltamem.errors.InvalidImportError` naming the
record's 1-based position and the reason.

What a bank's *configuration* may say belongs to the memory that owns the bank, not to the
store: the caller hands the store a :data:`~deltamem.store.base.ConfigCheck` (DeltaMem gives
its own), which validates an imported configuration and yields D_max.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.errors import ConfigError, InvalidImportError
from deltamem.store.base import SCHEMA_VERSION, ConfigCheck
from deltamem.store.frames import Unframe

#: meta keys an import restores; the others (schema version) are the importing bank's own
META_KEYS = ("embedder_name", "embedder_dim", "created_at", "config")


def node_from_columns(cols: Any, embedding: np.ndarray) -> Node:
    """The :class:`Node` of a row of the ``nodes`` columns (any object indexable by column
    name: an export record, a ``sqlite3.Row``, a dict) and its decoded embedding. Made
    with :meth:`Node._of` (every field is given), as a bank is opened row by row."""
    return Node._of(
        id=cols["id"],
        tree=cols["tree"],
        kind=cols["kind"],
        label=cols["label"],
        parent=cols["parent_id"],
        depth=int(cols["depth"]),
        trigger=cols["trigger"],
        embedding=embedding,
        payload=Payload(cols["activation"], cols["procedure"], cols["termination"]),
        success_hits=int(cols["success_hits"]),
        consolidated=bool(cols["consolidated"]),
        seq=int(cols["seq"]),
        origin=cols["origin"],
        source=cols["source_id"],
        episode_id=cols["episode_id"],
        created_at=float(cols["created_at"]),
        failure_hits=int(_column(cols, "failure_hits", 0)),
        last_used=int(_column(cols, "last_used", 0)),
    )


def _column(cols: Any, key: str, default: Any) -> Any:
    """``cols[key]``, or ``default`` where a version-1 record has no such field."""
    try:
        return cols[key]
    except (KeyError, IndexError):
        return default


def node_from_record(rec: Mapping[str, Any]) -> Node:
    """The :class:`Node` of a ``node`` record (KeyError/TypeError/ValueError when malformed)."""
    emb = np.frombuffer(base64.b64decode(rec["embedding"]), dtype="<f4").astype(np.float32)
    return node_from_columns(rec, emb)


def meta_rows(
    rec: Mapping[str, Any],
    *,
    keys: Sequence[str] = META_KEYS,
    schema_version: int = SCHEMA_VERSION,
    what: str = "schema",
) -> list[tuple[str, str]]:
    """The (key, text) meta rows a ``meta`` record restores, in the stores' text encoding.

    Raises :class:`InvalidImportError` (a :class:`~deltamem.errors.StoreError`) for an export
    written by a newer schema than the reader's
    ``schema_version`` (``what`` names the schema in the message).
    """
    v = int(rec.get("schema_version", 0))
    if v > schema_version:
        raise InvalidImportError(
            f"export has {what} version {v}; this deltamem reads {schema_version}"
        )
    rows = []
    for k in keys:
        if k not in rec:
            continue
        val = rec[k]
        if k == "config":
            val = json.dumps(val, sort_keys=True)
        elif k == "created_at":
            val = repr(float(val))
        elif k == "embedder_dim":
            val = int(val)
        rows.append((k, str(val)))
    return rows


def apply_records(
    records: Iterable[Any], handlers: Mapping[str, Callable[[Mapping[str, Any]], object]],
    *, counted: str, check: Callable[[int, Mapping[str, Any]], None] | None = None,
) -> int:
    """Apply an export's records in order, each by the handler of its ``type``.

    Returns how many records of type ``counted`` were applied. The caller holds the
    transaction (an import is all or nothing) and has checked that the bank is empty.
    ``check(position, record)`` runs before each handler (see :class:`ImportChecker`). A record
    that is not an object, has a type without a handler, fails ``check`` or misses a field (a
    handler raising KeyError, TypeError or ValueError) raises :class:`InvalidImportError`
    naming its 1-based position. An empty stream is refused too (not an export).

    A header and a trailer (:mod:`deltamem.store.frames`) are checked, not applied: a stream
    that is not already an :class:`~deltamem.store.frames.Unframe` is read through one, so a
    cut export raises :class:`~deltamem.errors.IncompleteExportError` when it ends, inside
    the caller's transaction (an unframed stream, an older export, applies as before).
    """
    n = 0
    seen = 0
    stream = records if isinstance(records, Unframe) else Unframe(records)
    for i, rec in enumerate(stream):
        seen = i + 1
        if not isinstance(rec, Mapping):
            raise InvalidImportError(f"record {i + 1} is not an object: {type(rec).__name__}")
        kind = rec.get("type")
        handler = handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            raise InvalidImportError(f"record {i + 1}: unknown type {_show(kind)}")
        if check is not None:
            check(i + 1, rec)
        try:
            handler(rec)
        except InvalidImportError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise InvalidImportError(f"record {i + 1} is malformed: {e!r}") from e
        n += kind == counted
    if not seen:
        raise InvalidImportError("the export holds no records (an empty file?)")
    return n


MAX_SEQ = 1 << 53
"""Largest ``seq`` an import accepts: the bank keeps room to grow, and every value is exact as
a float (JSON readers in other languages)."""
MAX_DIM = 1 << 16
MAX_ID = 200
NODE_FIELDS = ("id", "tree", "kind", "label", "parent_id", "depth", "success_hits",
               "consolidated", "origin", "source_id", "trigger", "activation", "procedure",
               "termination", "embedding", "episode_id", "created_at", "seq")
"""The fields every node record has (``failure_hits`` and ``last_used`` are optional: a
version-1 export has neither)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ImportChecker:
    """Checks an export's records one by one against every invariant the bank relies on.

    Args:
        meta: the importing bank's meta (its embedder name and dimension when it has them).
        config_check: validates the export's configuration and gives its D_max (see
            :data:`~deltamem.store.base.ConfigCheck`); ``None``: a configuration need only
            be an object, and depth is not bounded by a D_max.

    :meth:`check` raises :class:`InvalidImportError` ``"record N: <reason>"``. Node records
    must follow their parent (an earlier record of the same tree with a smaller ``seq``), have
    depth = parent depth + 1 (1 for a ROOT, which has no parent) and ≤ D_max of the bank's
    configuration, an embedding of the bank's dimension with finite values and norm ≤ 1 (unit
    vectors; cosine is a dot product), ``1 ≤ seq ≤`` :data:`MAX_SEQ` (unique), unique ids and
    strict field types (a string is a string, a count an integer, a flag a boolean). A meta
    record may only come first.
    """

    def __init__(self, meta: Mapping[str, Any], config_check: ConfigCheck | None = None) -> None:
        self.embedder_name = meta.get("embedder_name")
        self.dim: int | None = meta.get("embedder_dim")
        self.config_check = config_check
        self.d_max = _d_max(meta.get("config"), config_check)
        self.nodes: dict[str, tuple[str, int, int]] = {}  # id -> (tree, depth, seq)
        self.seqs: set[int] = set()

    def check(self, pos: int, rec: Mapping[str, Any]) -> None:
        kind = rec.get("type")
        try:
            if kind == "meta":
                self._meta(pos, rec)
            elif kind == "node":
                self._node(rec)
            elif kind == "rejection":
                for k in ("tree", "role", "reason", "raw", "episode_id"):
                    _text(rec, k)
                _time(rec, "created_at", optional=True)
            elif kind == "learned":
                _text(rec, "episode_id", empty=False)
                _time(rec, "learned_at", optional=True)
            elif kind == "audit":
                for k in ("episode_id", "node_id", "tree", "action", "policy", "reason"):
                    _text(rec, k)
                _time(rec, "created_at", optional=True)
                if not isinstance(rec.get("record", {}), Mapping):
                    raise _Bad(f"record must be an object, not {_show(rec.get('record'))}")
        except _Bad as e:
            raise InvalidImportError(f"record {pos}: {e}") from None

    def _meta(self, pos: int, rec: Mapping[str, Any]) -> None:
        if pos != 1:
            raise _Bad("a meta record may only be the first record")
        v = rec.get("schema_version", 0)
        if not _is_int(v) or v < 0:
            raise _Bad(f"schema_version must be a non-negative integer, not {_show(v)}")
        if ("embedder_name" in rec) != ("embedder_dim" in rec):
            raise _Bad("embedder_name and embedder_dim must come together (a bank records both)")
        if "embedder_name" in rec:
            name = _text(rec, "embedder_name", empty=False)
            if self.embedder_name is not None and name != self.embedder_name:
                raise _Bad(f"embedder {name!r}, but the bank uses {self.embedder_name!r}")
        if "embedder_dim" in rec:
            dim = rec["embedder_dim"]
            if not _is_int(dim) or not 1 <= dim <= MAX_DIM:
                raise _Bad(f"embedder_dim must be an integer in 1..{MAX_DIM}, not {_show(dim)}")
            if self.dim is not None and dim != self.dim:
                raise _Bad(f"embedder_dim {dim}, but the bank's embedder has {self.dim}")
            self.dim = dim
        if "created_at" in rec:
            _time(rec, "created_at")
        if "config" in rec:
            cfg = rec["config"]
            if not isinstance(cfg, Mapping):
                raise _Bad(f"config must be an object, not {_show(cfg)}")
            if self.config_check is not None:
                try:
                    cfg = self.config_check(cfg)
                except (ConfigError, ValueError, TypeError) as e:
                    first = str(e).strip().splitlines()
                    raise _Bad(f"config: {' '.join(first[:3])[:300]}") from None
            self.d_max = _d_max(cfg, None)

    def _node(self, rec: Mapping[str, Any]) -> None:
        missing = [k for k in NODE_FIELDS if k not in rec]
        if missing:
            raise _Bad(f"node misses {', '.join(missing)}")
        node_id = _text(rec, "id", empty=False, limit=MAX_ID)
        if node_id in self.nodes:
            raise _Bad(f"node id {node_id!r} occurs twice")
        tree = _choice(rec, "tree", ("task", "env"))
        kind = _choice(rec, "kind", ("ROOT", "RESIDUAL"))
        _choice(rec, "label", ("SUCCESS", "FAILURE"))
        seq = rec["seq"]
        if not _is_int(seq) or not 1 <= seq <= MAX_SEQ:
            raise _Bad(f"node {node_id!r}: seq must be an integer in 1..2^53, not {_show(seq)}")
        if seq in self.seqs:
            raise _Bad(f"node {node_id!r}: seq {seq} occurs twice")
        depth = rec["depth"]
        if not _is_int(depth) or not 1 <= depth <= (self.d_max or MAX_SEQ):
            bound = f"1..{self.d_max} (D_max)" if self.d_max else "1..2^53"
            raise _Bad(f"node {node_id!r}: depth must be an integer in {bound}, "
                       f"not {_show(depth)}")
        parent = rec["parent_id"]
        if kind == "ROOT":
            if parent is not None:
                raise _Bad(f"node {node_id!r} is a ROOT but has parent {_show(parent)}")
            if depth != 1:
                raise _Bad(f"node {node_id!r} is a ROOT at depth {depth}, not 1")
        else:
            if not isinstance(parent, str):
                raise _Bad(f"node {node_id!r} is a RESIDUAL; parent_id must be a node id, "
                           f"not {_show(parent)}")
            if parent == node_id:
                raise _Bad(f"node {node_id!r} is its own parent")
            if parent not in self.nodes:
                raise _Bad(f"node {node_id!r}: parent {parent!r} is not an earlier node")
            p_tree, p_depth, p_seq = self.nodes[parent]
            if p_tree != tree:
                raise _Bad(f"node {node_id!r} of the {tree} tree has parent {parent!r} of the "
                           f"{p_tree} tree")
            if p_seq >= seq:
                raise _Bad(f"node {node_id!r} (seq {seq}) comes before its parent {parent!r} "
                           f"(seq {p_seq})")
            if depth != p_depth + 1:
                raise _Bad(f"node {node_id!r} has depth {depth}; its parent's is {p_depth}")
        for key in ("success_hits", "failure_hits", "last_used"):
            hits = rec.get(key, 0)
            if not _is_int(hits) or not 0 <= hits <= MAX_SEQ:
                raise _Bad(f"node {node_id!r}: {key} must be a non-negative integer, "
                           f"not {_show(hits)}")
        if not isinstance(rec["consolidated"], bool):
            raise _Bad(f"node {node_id!r}: consolidated must be true or false, "
                       f"not {_show(rec['consolidated'])}")
        for k in ("origin", "trigger", "activation", "procedure", "termination", "episode_id"):
            _text(rec, k)
        if rec["source_id"] is not None:
            _text(rec, "source_id", limit=MAX_ID)
        _time(rec, "created_at")
        self._embedding(node_id, rec["embedding"])
        self.nodes[node_id] = (tree, depth, seq)
        self.seqs.add(seq)

    def _embedding(self, node_id: str, value: Any) -> None:
        if not isinstance(value, str):
            raise _Bad(f"node {node_id!r}: embedding must be base64 text, not {_show(value)}")
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _Bad(f"node {node_id!r}: embedding is not valid base64") from None
        if not raw or len(raw) % 4:
            raise _Bad(f"node {node_id!r}: embedding has {len(raw)} bytes, not a whole "
                       "number of float32 values")
        vec = np.frombuffer(raw, dtype="<f4")
        if self.dim is None:
            self.dim = len(vec)
        if len(vec) != self.dim:
            raise _Bad(f"node {node_id!r}: embedding has dimension {len(vec)}, the bank "
                       f"{self.dim}")
        if not np.all(np.isfinite(vec)):
            raise _Bad(f"node {node_id!r}: embedding holds a non-finite value (NaN or inf)")
        norm = float(np.linalg.norm(vec.astype(np.float64)))
        if norm > 1.0 + 1e-3:
            raise _Bad(f"node {node_id!r}: embedding has norm {norm:.4g}; embeddings are unit "
                       "vectors")


class _Bad(Exception):
    """Internal: the reason a record is refused."""


def _d_max(config: Any, check: ConfigCheck | None) -> int | None:
    """A configuration's D_max: its own ``d_max``, else the default the check fills in, else
    none (no check: depth is bounded by the tree's shape only)."""
    if isinstance(config, Mapping) and _is_int(config.get("d_max")):
        return int(config["d_max"])
    if check is None:
        return None
    default = check({}).get("d_max")
    return int(default) if _is_int(default) else None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(rec: Mapping[str, Any], key: str, *, empty: bool = True, limit: int | None = None
          ) -> str:
    if key not in rec:
        raise _Bad(f"{key} is missing")
    v = rec[key]
    if not isinstance(v, str):
        raise _Bad(f"{key} must be text, not {_show(v)}")
    if not empty and not v:
        raise _Bad(f"{key} must not be empty")
    if limit is not None and len(v) > limit:
        raise _Bad(f"{key} is longer than {limit} characters")
    if "\x00" in v:
        raise _Bad(f"{key} contains a NUL character")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(f"{key} is not valid Unicode (a lone surrogate)") from None
    return v


def _choice(rec: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    v = rec[key]
    if not isinstance(v, str) or v not in allowed:
        raise _Bad(f"{key} must be one of {', '.join(allowed)}, not {_show(v)}")
    return v


def _time(rec: Mapping[str, Any], key: str, *, optional: bool = False) -> None:
    v = rec.get(key)
    if v is None and optional:
        return
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) \
            or abs(v) > 1e12:
        raise _Bad(f"{key} must be a finite number (UNIX time), not {_show(v)}")


def import_tree_records(
    store: Any, records: Iterable[Any], config_check: ConfigCheck | None = None
) -> int:
    """Apply a node bank's export to a tree store (SQLite or PostgreSQL); returns nodes added.

    ``store`` has ``import_meta(rec)``, ``insert_node``, ``add_rejection`` and
    ``mark_learned``, as every :class:`~deltamem.store.base.Store` does.
    """
    checker = ImportChecker(store.meta(), config_check)
    handlers: dict[str, Callable[[Mapping[str, Any]], object]] = {
        "meta": store.import_meta,
        "node": lambda r: store.insert_node(node_from_record(r), keep_seq=True),
        "rejection": lambda r: store.add_rejection(
            tree=r["tree"], role=r["role"], reason=r["reason"], raw=r["raw"],
            episode_id=r["episode_id"], created_at=r["created_at"],
        ),
        "learned": lambda r: store.mark_learned(r["episode_id"], r["learned_at"]),
        "audit": lambda r: store.add_audit(
            episode_id=r["episode_id"], node_id=r["node_id"], tree=r["tree"],
            action=r["action"], policy=r["policy"], reason=r["reason"],
            record=r.get("record") or {}, created_at=r.get("created_at"),
        ),
    }
    return apply_records(records, handlers, counted="node", check=checker.check)
