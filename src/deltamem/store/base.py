"""The bank-store contract (SQLite now; PostgreSQL + pgvector later).

A store persists the nodes of both trees, per-bank metadata (schema version,
embedder name and dimension, configuration), the log of rejected extractor
outputs and the ids of the episodes already learned. All writes of one
``learn()`` happen inside one :meth:`Store.transaction`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deltamem.core.tree import Match, Node

SCHEMA_VERSION = 1


class Store(Protocol):
    """What DeltaMem needs from a bank store.

    * ``meta()`` → dict with ``schema_version``, ``embedder_name``,
      ``embedder_dim``, ``config`` (dict), ``created_at``; empty for a new bank.
    * ``init_meta(embedder_name, embedder_dim, config)`` records them once.
    * ``load_nodes(after_seq)`` returns the nodes with ``seq > after_seq``, by ``seq``.
    * ``node_states()`` returns ``(id, tree, success_hits, consolidated)`` of every node.
    * ``transaction()``: a context manager; writes inside it commit together or
      not at all, and hold the bank's write lock.
    * ``insert_node(node) -> Node`` stores a new node and returns it with its ``seq``.
    * ``increment_hits(node_id) -> int`` adds one success hit atomically, returns c(v).
    * ``mark_consolidated(node_id) -> bool`` sets the flag if not yet set
      (compare-and-set); False when it was already set.
    * ``add_rejection(...)`` appends to the rejection log.
    * ``mark_learned(episode_id) -> bool``: False if that episode was learned before.
    * ``version()``: a token that changes whenever another writer committed.
    """

    def meta(self) -> dict[str, Any]: ...
    def init_meta(self, embedder_name: str, embedder_dim: int, config: dict[str, Any]) -> None: ...
    def load_nodes(self, after_seq: int = 0) -> list[Node]: ...
    def node_states(self) -> list[tuple[str, str, int, bool]]: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def insert_node(self, node: Node) -> Node: ...
    def increment_hits(self, node_id: str) -> int: ...
    def mark_consolidated(self, node_id: str) -> bool: ...
    def add_rejection(
        self, *, tree: str, role: str, reason: str, raw: str, episode_id: str
    ) -> None: ...
    def rejections(self) -> list[dict[str, Any]]: ...
    def mark_learned(self, episode_id: str) -> bool: ...
    def version(self) -> int: ...
    def iter_export(self) -> Iterator[dict[str, Any]]: ...
    def close(self) -> None: ...


@runtime_checkable
class SearchStore(Protocol):
    """Optional: a store that computes Eq. 6 itself (PostgreSQL + pgvector does; SQLite not).

    ``match(tree, query, tau, epsilon)`` must return exactly what
    :meth:`deltamem.core.tree.ResidualTree.match` returns on the store's committed
    nodes of ``tree`` with ``tie_rule="deepest"``: the same node (ties: unconsolidated,
    then deeper, then newer), the same exact score (:func:`deltamem.core.tree.exact_cosine`
    of the stored float32 components, minus ``epsilon`` for FAILURE nodes), accepted
    iff score ≥ ``tau``.
    An approximate index may narrow the candidates (the store documents when).
    :class:`~deltamem.memories.deltamem.DeltaMem` uses it when ``search`` is
    ``auto`` or ``store``.
    """

    def match(self, tree: str, query: np.ndarray, tau: float, epsilon: float) -> Match: ...
