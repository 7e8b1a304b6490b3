"""What one ``learn`` will do, decided before its transaction: :class:`Plan`, its write
records and :func:`apply`, the one function that runs them.

Every memory system learns in two steps (:class:`~deltamem.memories.banked.BankedMemory`):
plan (validate, match, call the LLM: slow, outside any lock), then apply the plan inside
one store transaction (fast, self-contained writes). A :class:`Plan` is the hand-over
between the two: the :class:`~deltamem.types.Change` list ``learn`` returns, the writes as
data records (:data:`Write`), and the LLM outputs that stayed invalid and must be logged in
the bank. A plan can be read (and tested) before anything is written.

The records, by the store they write to:

* a DeltaMem bank (:class:`~deltamem.store.base.Store`): :class:`InsertNode` (Eq. 4, 5: a
  ROOT or a RESIDUAL under its parent), :class:`IncrementHits` (c(v) + 1, and the Eq. 8
  consolidation as a compare-and-set on the stored count), :class:`IncrementFailures`
  (f(v) + 1, audited when it lowers the node's standing), :class:`AddAudit`,
  :class:`TouchNodes` (the last use ``prune --policy unused:N`` reads) and
  :class:`DeleteNodes` (a prune);
* an item bank (:class:`~deltamem.store.items.ItemStore`): :class:`InsertItem`,
  :class:`UpdateItem` (optionally guarded by the item's ``updated_at``) and
  :class:`PutItem` (replace the one item of a kind and key, or insert it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deltamem.core.tree import Node, standing_penalty
from deltamem.errors import ExtractionError
from deltamem.store.items import Item, ItemStore
from deltamem.types import Change

__all__ = [
    "AddAudit",
    "DeleteNodes",
    "IncrementFailures",
    "IncrementHits",
    "InsertItem",
    "InsertNode",
    "Plan",
    "PutItem",
    "Rejection",
    "TouchNodes",
    "UpdateItem",
    "Write",
    "apply",
]


@dataclass(frozen=True)
class Rejection:
    """An LLM output that stayed invalid after its repair call (logged, never stored).

    ``source`` is where it would have gone (a tree of DeltaMem, a baseline's name),
    ``role`` the prompt that produced it, ``raw`` the rejected answer.
    """

    source: str
    role: str
    reason: str
    raw: str


# -- the write records: a DeltaMem bank ------------------------------------------------------

@dataclass(frozen=True)
class InsertNode:
    """Insert ``node`` (its parent and depth are fixed: nodes are append-only)."""

    node: Node


@dataclass(frozen=True)
class IncrementHits:
    """A success hit on ``node_id``: c(v) + 1 in the store.

    With ``consolidate`` (the ROOT distilled from the root → v chain, Eq. 8), the root is
    inserted only if the stored count reached ``k`` (K_cons) and the node's consolidation
    flag was not set yet, both read under the write lock (compare-and-set): two processes
    that both planned the K-th hit consolidate once.
    """

    node_id: str
    consolidate: Node | None = None
    k: float = math.inf


@dataclass(frozen=True)
class IncrementFailures:
    """A failure hit on ``node_id``: f(v) + 1 in the store.

    With a standing-penalty weight λ > 0 (``failure_weight``, Eq. 6 extended) an audit entry
    ``penalised`` says what the stored count now costs the node: λ·f/(f + c + 1), ``c`` being
    ``success_hits`` as planned.
    """

    node_id: str
    tree: str
    episode_id: str
    weight: float = 0.0
    success_hits: int = 0


@dataclass(frozen=True)
class AddAudit:
    """Append one entry to the bank's audit trail (superseded, penalised, pruned)."""

    episode_id: str
    node_id: str
    tree: str
    action: str
    policy: str
    reason: str
    record: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TouchNodes:
    """Record the last use of ``node_ids``: the learn's episode number, the learned ledger's
    size when the record is applied (this episode counted)."""

    node_ids: tuple[str, ...]


@dataclass(frozen=True)
class DeleteNodes:
    """Remove ``node_ids`` (each with its subtree among them, parents before children)."""

    node_ids: tuple[str, ...]


# -- the write records: an item bank ---------------------------------------------------------

@dataclass(frozen=True)
class InsertItem:
    """Insert ``item``."""

    item: Item


@dataclass(frozen=True)
class UpdateItem:
    """Replace an item's text, payload, embedding and last episode.

    ``unchanged_since``: write only if the stored item's ``updated_at`` is still this (another
    process did not change it since it was read); otherwise nothing is written and, with
    ``stale``, the plan's change ``stale[0]`` is replaced by ``stale[1]``.
    """

    item_id: str
    text: str
    payload: Mapping[str, Any]
    embedding: np.ndarray | None
    episode_id: str
    unchanged_since: float | None = None
    stale: tuple[Change, Change] | None = None


@dataclass(frozen=True)
class PutItem:
    """Replace the text and payload of the one item of ``(kind, key)`` (its embedding
    cleared), or insert it when there is none: looked up when applied."""

    system: str
    kind: str
    key: str
    text: str
    payload: Mapping[str, Any]
    episode_id: str


Write = (InsertNode | IncrementHits | IncrementFailures | AddAudit | TouchNodes | DeleteNodes
         | InsertItem | UpdateItem | PutItem)
"""One write of a plan (a frozen record; :func:`apply` runs it)."""


@dataclass
class Plan:
    """What one ``learn`` will do: its changes, its writes (records, run in order inside the
    learn's transaction by :func:`apply`) and the rejections to log.

    ``basis`` is what the plan's decision read, for a memory that checks it under the write
    lock before the writes run (DeltaMem: the store's version and each tree's v* with its
    c(v) and flag, :mod:`deltamem.memories.deltamem.decision`); ``None`` otherwise.
    """

    changes: list[Change] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    basis: Any = None

    def reject(self, source: str, error: ExtractionError, *, role: str | None = None,
               id: str | None = None) -> None:
        """Record an LLM output that stayed invalid: Change ``rejected`` + a log row.

        ``role`` defaults to the error's; ``id`` names the node the output was about.
        """
        role = error.role if role is None else role
        self.changes.append(Change("rejected", source, f"{role}: {error}", id))
        self.rejections.append(Rejection(source, role, str(error), error.raw))

    def extend(self, other: Plan) -> None:
        """Append ``other``'s changes, writes and rejections after this plan's."""
        self.changes += other.changes
        self.writes += other.writes
        self.rejections += other.rejections

    @classmethod
    def join(cls, plans: Iterable[Plan]) -> Plan:
        """One plan doing ``plans`` in order."""
        out = cls()
        for p in plans:
            out.extend(p)
        return out


def apply(store: Any, plan: Plan) -> None:
    """Run ``plan``'s writes on ``store``, in order (inside the caller's transaction).

    ``store`` is the bank the records address: a :class:`~deltamem.store.base.Store` for
    the node records, an :class:`~deltamem.store.items.ItemStore` for the item records
    (:func:`_apply_item`). A guarded :class:`UpdateItem` that finds the item changed writes
    nothing and swaps its ``stale`` change in ``plan.changes``.
    """
    for w in plan.writes:
        match w:
            case InsertNode(node=node):
                store.insert_node(node)
            case IncrementHits(node_id=node_id, consolidate=root, k=k):
                hits = store.increment_hits(node_id)
                if root is not None and hits >= k and store.mark_consolidated(node_id):
                    store.insert_node(root)
            case IncrementFailures():
                failures = store.increment_failures(w.node_id)
                if w.weight:
                    penalty = standing_penalty(w.success_hits, failures, w.weight)
                    store.add_audit(
                        episode_id=w.episode_id, node_id=w.node_id, tree=w.tree,
                        action="penalised", policy="standing",
                        reason=f"a failed episode followed this node: f(v) = {failures}, "
                               f"c(v) = {w.success_hits}, penalty λ·f/(f+c+1) = "
                               f"{penalty:.4f}")
            case AddAudit():
                store.add_audit(episode_id=w.episode_id, node_id=w.node_id, tree=w.tree,
                                action=w.action, policy=w.policy, reason=w.reason,
                                record=w.record)
            case TouchNodes(node_ids=ids):
                store.touch(ids, store.learned_count())
            case DeleteNodes(node_ids=ids):
                store.delete_nodes(ids)
            case InsertItem() | UpdateItem() | PutItem():
                _apply_item(store, plan, w)
            case _:  # pragma: no cover - a record type added without its case
                raise TypeError(f"not a write record: {w!r}")


def _apply_item(bank: ItemStore, plan: Plan, w: InsertItem | UpdateItem | PutItem) -> None:
    """One item record of :func:`apply` on the item bank ``bank``."""
    match w:
        case InsertItem(item=item):
            bank.insert(item)
        case UpdateItem():
            since = w.unchanged_since
            if since is not None and bank.get(w.item_id).updated_at != since:
                if w.stale is not None:
                    old, new = w.stale
                    at = next(i for i, c in enumerate(plan.changes) if c is old)
                    plan.changes[at] = new
                return
            bank.update(w.item_id, text=w.text, payload=w.payload, embedding=w.embedding,
                        episode_id=w.episode_id)
        case PutItem():
            current = bank.items(kind=w.kind, key=w.key)
            if current:
                bank.update(current[0].id, text=w.text, payload=w.payload, embedding=None,
                            episode_id=w.episode_id)
            else:
                bank.insert(Item(system=w.system, kind=w.kind, key=w.key, text=w.text,
                                 payload=w.payload, episode_id=w.episode_id))
