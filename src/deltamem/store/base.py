"""The node-bank store contract: everything a memory may call on the store of its bank.

A store persists the nodes of both trees, per-bank metadata (schema version,
embedder name and dimension, configuration), the log of rejected extractor
outputs and the ids of the episodes already learned. All writes of one
``learn()`` happen inside one :meth:`Store.transaction`.

Two stores implement it, :class:`~deltamem.store.sqlite.SQLiteStore` (one file per
bank) and :class:`~deltamem.store.postgres.PostgresStore` (PostgreSQL + pgvector); the
SQL they share is written once in :mod:`deltamem.store.sql`, and the conformance suite
runs the same tests on both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from deltamem.core.tree import BestNode, Node

SCHEMA_VERSION = 3
"""Version of the node bank's schema: 2 added each node's failure count and last use, and
the audit trail of forgetting (migration ``0002_forgetting``); 3 the ledger's count of
learned episodes kept in one row (``0003_learned_count``). Migrations are applied when a
bank is opened for writing."""

ConfigCheck = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""What the memory that owns a bank says about a bank configuration.

Called with a configuration (an imported ``meta`` record's ``config``; ``{}`` for the
defaults), it returns the configuration with every default filled in, or raises
:class:`~deltamem.errors.ConfigError` / ``ValueError`` / ``TypeError`` saying why it is
invalid. The store refuses an import whose configuration the check refuses, and bounds
node depth by the returned ``d_max`` (D_max, paper Eq. 5). The store does not know the
memory's configuration schema: its caller passes the check (DeltaMem passes
:func:`deltamem.memories.deltamem.check_bank_config`).
"""


class Store(Protocol):
    """What a memory needs from the store of a node bank (both trees of DeltaMem).

    Attributes:
        path: where the bank is, for messages (a file path, or a URL with the
            password masked).
        config_check: the :data:`ConfigCheck` imports apply (``None``: none); the memory
            owning the bank sets it.

    Meta:

    * ``meta()`` → dict with ``schema_version``, ``embedder_name``, ``embedder_dim``,
      ``config`` (dict), ``created_at``; only ``schema_version`` for a new bank. A value
      that does not decode is :class:`~deltamem.errors.BankDamagedError`.
    * ``init_meta(embedder_name, embedder_dim, config)`` records them once (later calls
      change nothing).

    Nodes (append-only; ``seq`` is the commit order):

    * ``load_nodes(after_seq)`` returns the nodes with ``seq > after_seq``, by ``seq``
      (parents before children); ``iter_nodes(after_seq)`` yields the same one at a time
      (a backend that can stream keeps one row in memory); ``nodes_by_id(ids)`` returns
      the stored nodes among ``ids``, by ``seq`` (unknown ids are left out);
      ``node_counts()`` the number of nodes per tree (trees without nodes left out).
    * ``node_states()`` returns ``(id, tree, success_hits, consolidated, failure_hits)`` of
      every node; ``node_state(node_id)`` → ``(success_hits, consolidated)`` of one and
      ``node_failures(node_id)`` its failure hits
      (:class:`~deltamem.errors.StoreError` for an unknown id).
    * ``insert_node(node) -> Node`` stores a new node and returns it with its ``seq``;
      an id already stored (or a parent that is not) is a ``StoreError``.
    * ``increment_hits(node_id) -> int`` adds one success hit atomically, returns c(v).
    * ``mark_consolidated(node_id) -> bool`` sets the flag if not yet set
      (compare-and-set); False when it was already set.

    Forgetting and correction:

    * ``increment_failures(node_id) -> int`` adds one failure hit atomically, returns f(v).
    * ``touch(node_ids, used_at)`` records the episode number of their last use (never
      lowered).
    * ``delete_nodes(node_ids) -> int`` removes nodes together with all their descendants
      (children first; a child left behind is a ``StoreError`` and nothing changes).
    * ``update_node(node_id, label=, trigger=, payload=, embedding=)`` replaces what the
      inspector edits (:mod:`deltamem.memories.deltamem.inspector`); ``set_meta(key, value)``
      sets a meta key of the bank's own (the inspector's edit counter).
    * ``add_audit(...)`` appends to the audit trail (what was superseded, penalised or
      removed, by which policy and why); ``audit()`` lists it.

    Ledgers:

    * ``mark_learned(episode_id) -> bool``: False if that episode was learned before;
      ``is_learned``, ``learned_count`` and ``last_learned`` (the id whose learn
      committed last, ``None`` for a new bank) read that ledger.
    * ``add_rejection(...)`` appends to the rejection log; ``rejections()`` lists it.

    Transactions and change detection:

    * ``transaction()``: a context manager; writes inside it commit together or
      not at all, and hold the bank's write lock. Nested calls join the outer one.
    * ``version()``: a token that changes whenever a writer (any connection) committed.

    Export and import (the records of :mod:`deltamem.store.records`):

    * ``iter_export()`` yields every record: meta first, then nodes, rejections,
      learned ids and the audit trail.
    * ``import_records(records) -> int`` loads an export into this empty bank in one
      transaction (checked record by record, :data:`config_check` included); returns
      the number of nodes. ``import_meta(record)`` restores a ``meta`` record (inside
      the caller's transaction).

    ``integrity_ok()`` checks the bank's storage; ``close()`` releases it.
    """

    path: str
    config_check: ConfigCheck | None

    def meta(self) -> dict[str, Any]: ...
    def init_meta(self, embedder_name: str, embedder_dim: int, config: dict[str, Any]) -> None: ...
    def load_nodes(self, after_seq: int = 0) -> list[Node]: ...
    def iter_nodes(self, after_seq: int = 0) -> Iterator[Node]: ...
    def nodes_by_id(self, node_ids: Sequence[str]) -> list[Node]: ...
    def node_counts(self) -> dict[str, int]: ...
    def node_states(self) -> list[tuple[str, str, int, bool, int]]: ...
    def node_state(self, node_id: str) -> tuple[int, bool]: ...
    def node_failures(self, node_id: str) -> int: ...
    def insert_node(self, node: Node, *, keep_seq: bool = False) -> Node: ...
    def increment_hits(self, node_id: str) -> int: ...
    def mark_consolidated(self, node_id: str) -> bool: ...
    def increment_failures(self, node_id: str) -> int: ...
    def touch(self, node_ids: Iterable[str], used_at: int) -> None: ...
    def delete_nodes(self, node_ids: Iterable[str]) -> int: ...
    def update_node(self, node_id: str, *, label: str, trigger: str, payload: Any,
                    embedding: np.ndarray) -> None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def add_audit(
        self, *, episode_id: str, node_id: str, tree: str, action: str, policy: str,
        reason: str, record: Mapping[str, Any] | None = None, created_at: float | None = None,
    ) -> None: ...
    def audit(self) -> list[dict[str, Any]]: ...
    def mark_learned(self, episode_id: str, learned_at: float | None = None) -> bool: ...
    def is_learned(self, episode_id: str) -> bool: ...
    def learned_count(self) -> int: ...
    def last_learned(self) -> str | None: ...
    def add_rejection(
        self, *, tree: str, role: str, reason: str, raw: str, episode_id: str,
        created_at: float | None = None,
    ) -> None: ...
    def rejections(self) -> list[dict[str, Any]]: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def version(self) -> int: ...
    def iter_export(self) -> Iterator[dict[str, Any]]: ...
    def import_records(self, records: Iterable[Mapping[str, Any]]) -> int: ...
    def import_meta(self, rec: Mapping[str, Any]) -> None: ...
    def integrity_ok(self) -> bool: ...
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
    :class:`~deltamem.memories.deltamem.DeltaMem` uses it when ``search`` is ``store``,
    and with ``auto`` when ``search_first`` is true (an index that spares the scan of every
    node; otherwise the in-process scan of the trees DeltaMem holds anyway gives the same
    node without the round trips).
    """

    search_first: bool

    def match(self, tree: str, query: np.ndarray, tau: float, epsilon: float) -> BestNode: ...
