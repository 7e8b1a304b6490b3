"""The bank's JSONL export records, shared by every tree store (no I/O here).

An export is a stream of JSON objects, each with a ``type``:

- ``meta``: ``schema_version``, ``embedder_name``, ``embedder_dim``, ``created_at``, ``config``;
- ``node``: every column of a node, the embedding as base64 of little-endian float32;
- ``rejection``: one rejected LLM output (tree, role, reason, raw, episode id, time);
- ``learned``: one learned episode id and when it was learned.

:class:`~deltamem.store.sqlite.SQLiteStore` and :class:`~deltamem.store.postgres.PostgresStore`
write the same records field for field, so a bank moves between backends by export and import.
This module holds the parts both read the same way: decoding a node, checking and encoding the
meta rows, and applying a record stream to a store (:func:`apply_records`); the baseline
item store (:mod:`deltamem.store.items`) reads its own records with the same two functions.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.errors import StoreError
from deltamem.store.base import SCHEMA_VERSION

#: meta keys an import restores; the others (schema version) are the importing bank's own
META_KEYS = ("embedder_name", "embedder_dim", "created_at", "config")


def node_from_columns(cols: Any, embedding: np.ndarray) -> Node:
    """The :class:`Node` of a row of the ``nodes`` columns (any object indexable by column
    name: an export record, a ``sqlite3.Row``, a dict) and its decoded embedding."""
    return Node(
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
    )


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

    Raises :class:`StoreError` for an export written by a newer schema than the reader's
    ``schema_version`` (``what`` names the schema in the message).
    """
    v = int(rec.get("schema_version", 0))
    if v > schema_version:
        raise StoreError(f"export has {what} version {v}; this deltamem reads {schema_version}")
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
    *, counted: str,
) -> int:
    """Apply an export's records in order, each by the handler of its ``type``.

    Returns how many records of type ``counted`` were applied. The caller holds the
    transaction (an import is all or nothing) and has checked that the bank is empty. A record
    that is not an object, has a type without a handler, or misses a field (a handler raising
    KeyError, TypeError or ValueError) raises :class:`StoreError` naming its 1-based position.
    """
    n = 0
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise StoreError(f"record {i + 1} is not an object: {type(rec).__name__}")
        kind = rec.get("type")
        handler = handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            raise StoreError(f"record {i + 1}: unknown type {kind!r}")
        try:
            handler(rec)
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(f"record {i + 1} is malformed: {e!r}") from e
        n += kind == counted
    return n


def import_tree_records(store: Any, records: Iterable[Any]) -> int:
    """Apply a node bank's export to a tree store (SQLite or PostgreSQL); returns nodes added.

    ``store`` has ``_import_meta(rec)``, ``insert_node``, ``add_rejection`` and
    ``mark_learned``, as both tree stores do.
    """
    handlers: dict[str, Callable[[Mapping[str, Any]], object]] = {
        "meta": store._import_meta,
        "node": lambda r: store.insert_node(node_from_record(r), keep_seq=True),
        "rejection": lambda r: store.add_rejection(
            tree=r["tree"], role=r["role"], reason=r["reason"], raw=r["raw"],
            episode_id=r["episode_id"], created_at=r["created_at"],
        ),
        "learned": lambda r: store.mark_learned(r["episode_id"], r["learned_at"]),
    }
    return apply_records(records, handlers, counted="node")
