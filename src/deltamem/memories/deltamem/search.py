"""Search: the Eq. 6 match of each tree for a task (paper §3.1, §3.3), in-process or in the
store, and the typed record of what each tree offered.

Each tree is queried with its own text (§3.1: the goal → Task-Tree, the scene → Env-Tree,
in the configured trigger mode) and scans all its nodes for

    s(v) = cos(e_q, e_v) − ε · I(label_v = FAILURE)                               (Eq. 6)

(minus the standing penalty when ``failure_weight`` > 0); v* = argmax s(v) is accepted when
s(v*) ≥ τ_base. Where the scan runs follows ``config.search``: the in-memory trees of the
:class:`~deltamem.memories.deltamem.bank.BankView`, or the store's own search
(:class:`~deltamem.store.base.SearchStore`, a PostgreSQL bank), which gives the same node,
score and acceptance.

A match travels typed: :class:`~deltamem.core.tree.BestNode` from a scan,
:class:`~deltamem.types.Match` (with its tree and, for a recall, its chain) from
:func:`typed`, :class:`Found` (the match with its Eq. 7 chain of nodes) for rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deltamem.core.payload import TreeName
from deltamem.core.tree import BestNode, Node
from deltamem.core.triggers import task_text, tree_texts
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, StoreError
from deltamem.memories.deltamem.bank import BankView
from deltamem.memories.deltamem.config import TREES, DeltaMemConfig
from deltamem.store.base import SearchStore, Store
from deltamem.types import Match, Task

__all__ = ["Found", "enabled", "found", "match", "queries", "store_search", "typed"]


@dataclass(frozen=True)
class Found:
    """What one tree offered a recall: its :class:`~deltamem.types.Match` (chain ids
    included) and the root → v* chain of nodes (Eq. 7; empty when not accepted)."""

    match: Match
    chain: tuple[Node, ...]


def enabled(config: DeltaMemConfig) -> list[TreeName]:
    """The trees ``config`` switches on, Task-Tree first."""
    return [t for t in TREES if config.enabled(t)]


def queries(task: Task, config: DeltaMemConfig) -> dict[TreeName, str]:
    """The query text of each tree (§3.1): goal → Task-Tree, scene → Env-Tree, each in the
    config's trigger mode (:func:`deltamem.core.triggers.tree_texts`)."""
    return tree_texts(task, config.task_trigger or "goal", config.env_trigger or "scene")


def store_search(store: Store, config: DeltaMemConfig) -> SearchStore | None:
    """The store's Eq. 6 search when ``config.search`` uses it, else ``None`` (in-process):
    ``store`` on a store that offers one (with ``tie_rule='deepest'`` and no standing
    penalty), ``auto`` when the store also says its search should come first
    (:attr:`SearchStore.search_first`: a PostgreSQL bank with ``index=hnsw``). A
    PostgreSQL bank with the exact scan searches in-process under ``auto``: the same node
    and score as the database's scan, without two queries per recall (the service
    profile, ``docs/performance.md``). :class:`ConfigError` for ``search='store'``
    without one."""
    offers = (isinstance(store, SearchStore) and config.tie_rule == "deepest"
              and config.tie_rule_of("task") == "deepest" and not config.failure_weight)
    if config.search == "store" and not offers:
        raise ConfigError(
            f"search='store' needs a store with its own search (a postgresql:// bank), "
            f"tie_rule='deepest' in both trees and failure_weight=0; "
            f"{type(store).__name__} with tie_rule={config.tie_rule!r}, task_tie_rule="
            f"{config.tie_rule_of('task')!r}, failure_weight="
            f"{config.failure_weight:g} has none: use search='auto' or 'exact'"
        )
    if offers and (config.search == "store" or (
            config.search == "auto" and getattr(store, "search_first", False))):
        return store  # type: ignore[return-value]  # offers: a SearchStore
    return None


def match(
    bank: BankView,
    searcher: SearchStore | None,
    embedder: Embedder,
    task: Task,
    config: DeltaMemConfig,
    trees: list[TreeName] | None = None,
) -> dict[TreeName, BestNode]:
    """Eq. 6 match of each enabled tree for ``task`` (no side effects on the bank).

    With ``searcher`` (the store's search): one query per tree over the rows committed at
    that moment, by any process; otherwise the in-memory trees, first brought up to date
    with the store. Either way every returned node is in the bank view on return (a node
    another process committed after the last reload triggers one), so its chain can be
    read; a node the store cannot load back is a :class:`~deltamem.errors.StoreError`.
    ``trees``: :func:`enabled` of ``config``, when the caller keeps it.
    """
    if trees is None:
        trees = enabled(config)
    if trees == ["task"]:  # the Env-Tree off: its text is not made (a place list is parsed)
        vecs = embedder.embed_queries([task_text(task.goal, config.task_trigger or "goal")])
    else:
        q = queries(task, config)
        vecs = embedder.embed_queries([q[t] for t in trees])
    bank.reload()
    if searcher is None or bank.hidden:  # the store's search does not know what is hidden
        return {t: bank.trees[t].match(vecs[i], config.tau(t), config.epsilon)
                for i, t in enumerate(trees)}
    out = {t: searcher.match(t, vecs[i], config.tau(t), config.epsilon)
           for i, t in enumerate(trees)}
    if any(m.node_id and m.node_id not in bank.trees[t] for t, m in out.items()):
        bank.reload(force=True)  # committed by another process since the reload above
        for t, m in out.items():
            if m.node_id and m.node_id not in bank.trees[t]:
                raise StoreError(
                    f"bank {bank.store.path}: the store's search returned node "
                    f"{m.node_id!r} of the {t} tree, which loading the bank does not give"
                )
    return out


def typed(best: Mapping[TreeName, BestNode]) -> dict[TreeName, Match]:
    """Each tree's :class:`~deltamem.types.Match` (no chain: what a write decision reads)."""
    return {t: Match(t, b.node_id, b.score, b.tau, b.accepted) for t, b in best.items()}


def found(bank: BankView, best: Mapping[TreeName, BestNode]) -> dict[TreeName, Found]:
    """Each tree's match with its Eq. 7 chain (root → v*), read from the bank view."""
    out: dict[TreeName, Found] = {}
    for t, b in best.items():
        chain = bank.trees[t].chain(b.node_id) if b.accepted and b.node_id else []
        m = Match(t, b.node_id, b.score, b.tau, b.accepted, tuple(n.id for n in chain))
        out[t] = Found(m, tuple(chain))
    return out
