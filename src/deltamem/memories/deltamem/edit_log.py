"""The inspector's entries in a bank's audit trail: what each edit changed, and which nodes
are hidden.

Every change the inspector makes (:mod:`deltamem.memories.deltamem.inspector`) is one row of
the bank's audit trail (``store.audit()``, the table pruning writes to) with policy
:data:`POLICY`. The row's ``record`` holds the whole edit (record version
:data:`RECORD_VERSION`)::

    {"inspector": 1, "edit_id": "ed-…", "op": "edit", "who": "…", "undoes": null,
     "before": {NODE_ID: SNAPSHOT | null, …}, "after": {NODE_ID: SNAPSHOT | null, …}}

A snapshot (:func:`snapshot`) is every stored field of a node but its embedding (which is
re-computed from the trigger through the bank's embedder), plus ``hidden``; ``null`` means
the node does not exist (before an undone deletion, after a deletion). The audit trail is
the only place hiding is kept: a node is hidden when the last inspector row that names it
says so (:func:`hidden_ids`), so hiding travels with an export like the rest of the trail.
The row's ``created_at`` is when, ``action`` the past tense of the operation
(:data:`ACTIONS`), ``reason`` the editor's note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.errors import StoreError
from deltamem.store.base import Store

__all__ = ["ACTIONS", "EDITS_KEY", "POLICY", "RECORD_VERSION", "Edit", "edits", "hidden_ids",
           "node_of", "snapshot"]

POLICY = "inspector"
"""The audit trail's ``policy`` of the inspector's rows (pruning writes ``unused:N`` …)."""
RECORD_VERSION = 1
"""Version of the inspector's audit record (its ``"inspector"`` field)."""
EDITS_KEY = "inspector_edits"
"""Meta key counting the inspector's edits: another process's bank view reloads in full when
it moves (an edit changes a node in place, which the append-only reload would miss)."""
ACTIONS = {"edit": "edited", "hide": "hidden", "unhide": "unhidden", "relabel": "relabelled",
           "delete": "deleted", "undo": "undone"}
"""Operation → the audit row's ``action``."""

Snapshots = dict[str, dict[str, Any] | None]


@dataclass(frozen=True)
class Edit:
    """One inspector change as its audit row holds it.

    Attributes:
        id: the edit's id (``ed-`` and 16 hex digits).
        op: ``edit``, ``hide``, ``unhide``, ``relabel``, ``delete`` or ``undo``.
        node_id: the node edited (a deletion's top node; an undo's: the undone edit's).
        tree: that node's tree.
        who: who made it (the service: ``tenant <name> (key <fingerprint>)``).
        at: UNIX time.
        reason: the editor's note ("" when none).
        before: node id → its snapshot before the change (``None``: did not exist).
        after: node id → its snapshot after it (``None``: removed).
        undoes: the id of the edit an undo reverted.
    """

    id: str
    op: str
    node_id: str
    tree: str
    who: str
    at: float
    reason: str = ""
    before: Snapshots = field(default_factory=dict)
    after: Snapshots = field(default_factory=dict)
    undoes: str | None = None

    def record(self) -> dict[str, Any]:
        """The audit row's ``record``."""
        return {"inspector": RECORD_VERSION, "edit_id": self.id, "op": self.op,
                "who": self.who, "undoes": self.undoes, "before": self.before,
                "after": self.after}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field."""
        return {"id": self.id, "op": self.op, "node_id": self.node_id, "tree": self.tree,
                "who": self.who, "at": self.at, "reason": self.reason, "before": self.before,
                "after": self.after, "undoes": self.undoes}


def _edit_of(row: Mapping[str, Any]) -> Edit:
    rec = row.get("record") or {}
    version = rec.get("inspector")
    if not isinstance(version, int) or version > RECORD_VERSION:
        raise StoreError(f"an inspector audit row has record version {version!r}; this "
                         f"deltamem reads up to {RECORD_VERSION}: upgrade deltamem")
    return Edit(id=str(rec["edit_id"]), op=str(rec["op"]), node_id=str(row["node_id"]),
                tree=str(row["tree"]), who=str(rec.get("who", "")),
                at=float(row["created_at"]), reason=str(row.get("reason") or ""),
                before=dict(rec.get("before") or {}), after=dict(rec.get("after") or {}),
                undoes=rec.get("undoes"))


def edits(store: Store, rows: Iterable[Mapping[str, Any]] | None = None) -> list[Edit]:
    """The inspector's edits of the bank, oldest first (``rows``: the audit trail, if read
    already)."""
    return [_edit_of(r) for r in (store.audit() if rows is None else rows)
            if r.get("policy") == POLICY]


def hidden_ids(store: Store, rows: Iterable[Mapping[str, Any]] | None = None) -> set[str]:
    """The ids of the hidden nodes: those whose last inspector edit left them hidden."""
    state: dict[str, bool] = {}
    for e in edits(store, rows):
        for node_id, snap in e.after.items():
            state[node_id] = bool(snap and snap.get("hidden"))
    return {i for i, h in state.items() if h}


def snapshot(node: Node, hidden: bool) -> dict[str, Any]:
    """Every stored field of ``node`` but its embedding, and whether it is hidden."""
    return {"id": node.id, "tree": node.tree, "kind": node.kind, "label": node.label,
            "parent": node.parent, "depth": node.depth, "trigger": node.trigger,
            "payload": node.payload.to_dict(), "success_hits": node.success_hits,
            "consolidated": bool(node.consolidated), "seq": node.seq, "origin": node.origin,
            "source": node.source, "episode_id": node.episode_id,
            "created_at": node.created_at, "failure_hits": node.failure_hits,
            "last_used": node.last_used, "hidden": bool(hidden)}


def node_of(snap: Mapping[str, Any], embedding: np.ndarray) -> Node:
    """The node a snapshot describes, with ``embedding`` (re-computed from its trigger)."""
    return Node(id=snap["id"], tree=snap["tree"], kind=snap["kind"], label=snap["label"],
                parent=snap["parent"], depth=int(snap["depth"]), trigger=snap["trigger"],
                embedding=np.asarray(embedding, dtype=np.float32),
                payload=Payload.from_dict(snap["payload"]),
                success_hits=int(snap["success_hits"]), consolidated=bool(snap["consolidated"]),
                seq=int(snap["seq"]), origin=snap["origin"], source=snap["source"],
                episode_id=snap["episode_id"], created_at=float(snap["created_at"]),
                failure_hits=int(snap["failure_hits"]), last_used=int(snap["last_used"]))
