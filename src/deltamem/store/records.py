"""The bank's JSONL export records, shared by every tree store (no I/O here).

An export is a stream of JSON objects, each with a ``type``:

- ``meta``: ``schema_version``, ``embedder_name``, ``embedder_dim``, ``created_at``, ``config``;
- ``node``: every column of a node, the embedding as base64 of little-endian float32;
- ``rejection``: one rejected LLM output (tree, role, reason, raw, episode id, time);
- ``learned``: one learned episode id and when it was learned.

:class:`~deltamem.store.sqlite.SQLiteStore` and :class:`~deltamem.store.postgres.PostgresStore`
write the same records field for field, so a bank moves between backends by export and import.
This module holds the parts both read the same way: decoding a node, checking and encoding the
meta rows, and applying a record stream to a store (:func:`apply_records`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.errors import StoreError
from deltamem.store.base import SCHEMA_VERSION

#: meta keys an import restores; the others (schema version) are the importing bank's own
META_KEYS = ("embedder_name", "embedder_dim", "created_at", "config")


class RecordSink(Protocol):
    """What :func:`apply_records` needs of a store (both tree stores have it)."""

    def _import_meta(self, rec: dict[str, Any]) -> None: ...

    def insert_node(self, node: Node, *, keep_seq: bool = False) -> Node: ...

    def add_rejection(self, *, tree: str, role: str, reason: str, raw: str,
                      episode_id: str, created_at: float | None = None) -> None: ...

    def mark_learned(self, episode_id: str, learned_at: float | None = None) -> bool: ...


def node_from_record(rec: dict[str, Any]) -> Node:
    """The :class:`Node` of a ``node`` record (KeyError/TypeError/ValueError when malformed)."""
    emb = np.frombuffer(base64.b64decode(rec["embedding"]), dtype="<f4").astype(np.float32)
    return Node(
        id=rec["id"],
        tree=rec["tree"],
        kind=rec["kind"],
        label=rec["label"],
        parent=rec["parent_id"],
        depth=int(rec["depth"]),
        trigger=rec["trigger"],
        embedding=emb,
        payload=Payload(rec["activation"], rec["procedure"], rec["termination"]),
        success_hits=int(rec["success_hits"]),
        consolidated=bool(rec["consolidated"]),
        seq=int(rec["seq"]),
        origin=rec["origin"],
        source=rec["source_id"],
        episode_id=rec["episode_id"],
        created_at=float(rec["created_at"]),
    )


def meta_rows(rec: dict[str, Any]) -> list[tuple[str, str]]:
    """The (key, text) meta rows a ``meta`` record restores, in the stores' text encoding.

    Raises :class:`StoreError` for an export written by a newer schema than this library reads.
    """
    v = int(rec.get("schema_version", 0))
    if v > SCHEMA_VERSION:
        raise StoreError(f"export has schema version {v}; this deltamem reads {SCHEMA_VERSION}")
    rows = []
    for k in META_KEYS:
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


def apply_records(store: RecordSink, records: Iterable[Any]) -> int:
    """Apply an export's records to ``store``, in order; returns the number of nodes inserted.

    The caller holds the transaction (an import is all or nothing) and has checked that the
    bank is empty. A record that is not an object, has an unknown ``type`` or misses a field
    raises :class:`StoreError` naming the record's 1-based position.
    """
    n = 0
    for i, rec in enumerate(records):
        kind = rec.get("type") if isinstance(rec, dict) else None
        try:
            if kind == "meta":
                store._import_meta(rec)
            elif kind == "node":
                store.insert_node(node_from_record(rec), keep_seq=True)
                n += 1
            elif kind == "rejection":
                store.add_rejection(
                    tree=rec["tree"],
                    role=rec["role"],
                    reason=rec["reason"],
                    raw=rec["raw"],
                    episode_id=rec["episode_id"],
                    created_at=rec["created_at"],
                )
            elif kind == "learned":
                store.mark_learned(rec["episode_id"], rec["learned_at"])
            elif isinstance(rec, dict):
                raise StoreError(f"record {i + 1}: unknown type {kind!r}")
            else:
                raise StoreError(f"record {i + 1} is not an object: {type(rec).__name__}")
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(f"record {i + 1} is malformed: {e!r}") from e
    return n
