"""Serialised write decisions: several processes learning into one bank decide as one
process would, in commit order (paper §3.2's Eq. 4, 5 and §3.5's Eq. 8 read the bank).

A learn's writes depend on each tree's v* (Eq. 4: warm or cold start; Eq. 5: where the node
hangs) and on v*'s c(v) and consolidation flag (Eq. 8). The decision is taken outside the
store's write lock (extraction is the LLM's time) and checked under it before anything is
written: when another writer committed since, the trees are reloaded and, for a learn that
matches for itself (no ``recall`` given), the match is made again; when the
:func:`basis` differs, the transaction rolls back and the decision is taken again
(:data:`OPTIMISTIC_TRIES` times outside the lock; the last attempt decides while holding
it, so a learn always finishes). A given ``recall`` fixes the matched node (a stale
cold-start recall still writes a ROOT, as a sequential learn with that recall would); its
hit count and flag are checked the same way, so consolidation follows the committed count.

This module holds the data of that protocol; the loop is
:meth:`deltamem.memories.banked.BankedMemory.learn` and DeltaMem plugs in through its hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from deltamem.core.payload import TreeName
from deltamem.memories.deltamem.bank import BankView
from deltamem.types import Match

__all__ = ["OPTIMISTIC_TRIES", "Decision", "LearnInputs", "attempts", "basis"]

OPTIMISTIC_TRIES = 2
"""Times a learn takes its write decision outside the store's write lock before it takes
it under the lock."""


@dataclass(frozen=True)
class LearnInputs:
    """What a learn computes once, before any attempt: the enabled ``trees``, the matches of
    the ``given`` recall, whether the learn matches for itself (``decides``: the recall is
    missing or lacks an enabled tree), and each tree's new-node text and embedding."""

    trees: tuple[TreeName, ...]
    given: Mapping[str, Match]
    decides: bool
    triggers: Mapping[TreeName, str]
    vecs: np.ndarray


@dataclass(frozen=True)
class Decision:
    """What a plan's decision read: the store's ``version`` when it was taken and the
    :func:`basis` of its matches."""

    version: int
    basis: tuple[object, ...]


def attempts() -> list[bool]:
    """Whether each attempt decides under the lock: :data:`OPTIMISTIC_TRIES` times outside
    it, then once holding it."""
    return [False] * OPTIMISTIC_TRIES + [True]


def basis(bank: BankView, matches: Mapping[str, Match],
          trees: Sequence[TreeName]) -> tuple[object, ...]:
    """What a learn's writes depend on, per enabled tree: the anchor v* (``None``: a cold
    start) and its success hits and consolidation flag (Eq. 4, 5, 8)."""
    out: list[object] = []
    for t in trees:
        m = matches[t]
        if not bank.holds(t, m):
            out.append((t, None))
            continue
        v = bank.trees[t].get(m.node_id)  # type: ignore[arg-type]
        out.append((t, v.id, v.success_hits, v.consolidated))
    return tuple(out)
