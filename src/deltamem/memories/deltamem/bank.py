"""The bank view: DeltaMem's two residual trees (paper §3.1, §3.2) kept in step with its
store.

A :class:`BankView` holds one :class:`~deltamem.core.tree.ResidualTree` per tree, built from
the store's nodes (Eq. 3: kind, label, depth, c(v), embedding, parent) and brought up to
date incrementally (:meth:`BankView.reload`): nodes are append-only, so only rows past the
last seen ``seq`` are loaded; hit counts, failure counts and consolidation flags are
re-read when they may have moved. The trees keep what Eq. 6 and the write decisions read;
a node's text is read from the store when a chain is recalled (Eq. 7), so an open bank
costs about its embedding matrix in memory.

Nodes the inspector hid (:mod:`~deltamem.memories.deltamem.inspector`), and their
descendants, are not in the trees: they are never matched, recalled or written under. An
inspector edit changes nodes in place, which the incremental reload would miss: it bumps a
meta counter, and a view that sees the counter move (another process edited) loads afresh.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from deltamem.core.payload import TreeName
from deltamem.core.tree import Node, ResidualTree
from deltamem.errors import ConfigError
from deltamem.memories.deltamem.config import TREES, DeltaMemConfig
from deltamem.memories.deltamem.edit_log import EDITS_KEY, hidden_ids
from deltamem.store.base import Store
from deltamem.types import Match

__all__ = ["OPEN_HEADROOM", "BankView", "set_durability"]

OPEN_HEADROOM = 2
"""A tree opened on a bank of n nodes makes room for ``OPEN_HEADROOM × n`` rows up front.
Room for exactly n made the first learn after an open copy the whole matrix (the tree
doubles its arrays when full: 0.1–0.25 s at 100k nodes, a quarter of 200 learns' time);
unused rows are zeroed pages never written, so they cost address space, not memory
(:class:`~deltamem.core.tree.ResidualTree`, Memory), and the next copy comes after n
more nodes."""


def set_durability(store: Store, mode: str) -> None:
    """Set the store's commit durability (``config.synchronous``: SQLite only; ``full`` is
    the only choice for another store, :class:`ConfigError` otherwise)."""
    setter = getattr(store, "set_synchronous", None)
    if setter is not None:
        setter(mode)
    elif mode != "full":
        raise ConfigError(
            f"synchronous={mode!r} is a SQLite bank option; {type(store).__name__} "
            "has no such setting: use synchronous='full'"
        )


class BankView:
    """The trees of the bank ``store`` (see the module docstring).

    ``dim`` is the embedding dimension (0: take the first node's); ``config`` gives the
    trees' search mode, tie rule and failure weight.
    """

    def __init__(self, store: Store, config: DeltaMemConfig, dim: int) -> None:
        self.store = store
        self.config = config
        self.dim = dim
        self.trees: dict[TreeName, ResidualTree] = {}
        #: bumped by every reload that re-read anything (a write by this process or another,
        #: a removal): what is derived from the trees and cached (rendered recalls,
        #: :class:`~deltamem.memories.deltamem.render.RecallCache`) is valid for one value
        self.generation = 0
        self._version = -1
        self._max_seq = 0
        #: the nodes hidden by the inspector and their descendants (left out of the trees)
        self.hidden: set[str] = set()
        self._edits: object = None

    def reload(self, *, force: bool = False, touched: Collection[str] | None = None) -> None:
        """Bring both trees up to date with the store, incrementally.

        ``PRAGMA data_version`` tells when another connection committed; our own commits
        do not change it (a PostgreSQL bank's counter does, and the store says which value
        its own last commit wrote), so a learn calls this with ``force=True`` and
        ``touched``, the nodes whose hits or flags its transaction changed. Nodes are
        append-only (ordered by ``seq``), so only rows past the last seen ``seq`` are
        loaded. Hit counts and consolidation flags: when no other connection committed
        since the last reload, only the ``touched`` nodes are re-read; otherwise all are,
        from one narrow query. A node removed (``prune``, by any process) makes the bank
        load afresh.
        """
        v = self.store.version()
        if v == self._version and self.trees and not force:
            return
        self.generation += 1
        # only this connection wrote since the last reload: SQLite's data_version does not
        # move on its own commits; PostgreSQL's counter moves by one, which the store
        # reports as its own commit (``own_commit``)
        own = v == self._version or getattr(self.store, "own_commit", None) == (self._version, v)
        if self.trees and touched is not None and own:
            self._load_new()
            for node_id in touched:
                for t in self.trees.values():
                    if node_id in t:
                        hits, cons = self.store.node_state(node_id)
                        t.set_state(node_id, hits, cons, self.store.node_failures(node_id))
            self._version = v
            return
        if not self.trees:
            self._load_all()
        elif self.store.meta().get(EDITS_KEY) != self._edits:
            # the inspector changed nodes in place (another process): load afresh
            self.trees = {}
            self.reload(force=True)
            return
        else:
            self._load_new()
            states = self.store.node_states()
            known = {state[0] for state in states}
            if any(i not in known for t in self.trees.values() for i in t.ids()):
                # nodes were removed (``prune``, by any process): load the bank afresh
                self.trees = {}
                self.reload(force=True)
                return
            for node_id, tree, hits, cons, failures in states:
                t = self.trees[tree]
                if node_id not in t:
                    # committed by another process after load_nodes() read: data_version
                    # has moved past ``v``, so the next reload loads it
                    continue
                if t.state(node_id) != (hits, cons, failures):
                    t.set_state(node_id, hits, cons, failures)
        self._version = v

    def reset(self) -> None:
        """Drop the trees and load the bank afresh (after nodes were removed)."""
        self.trees = {}
        self.reload(force=True)

    def _load_all(self) -> None:
        counts = self.store.node_counts()
        nodes = self.store.iter_nodes()
        first = next(nodes, None)
        dim = self.dim or (len(first.embedding) if first is not None else 1)
        cfg = self.config
        self.trees = {
            t: ResidualTree(t, dim, search="ann" if cfg.search == "ann" else "exact",
                            tie_rule=cfg.tie_rule_of(t), failure_weight=cfg.failure_weight,
                            details=self.store.nodes_by_id,
                            capacity=OPEN_HEADROOM * counts.get(t, 0))
            for t in TREES
        }
        self._max_seq = 0
        self._edits = self.store.meta().get(EDITS_KEY)
        self.hidden = hidden_ids(self.store)
        if first is not None:
            self._add_loaded(first)
            for n in nodes:
                self._add_loaded(n)

    def _load_new(self) -> None:
        """Add the nodes committed after the last one loaded."""
        for n in self.store.iter_nodes(after_seq=self._max_seq):
            self._add_loaded(n)

    def _add_loaded(self, n: Node) -> None:
        if n.id in self.hidden or n.parent in self.hidden:
            self.hidden.add(n.id)  # hidden, or under a hidden node
        else:
            self.trees[n.tree].add(n)
        self._max_seq = max(self._max_seq, n.seq)

    def load_matched(self, matches: Mapping[TreeName, Match]) -> None:
        """Bring the trees up to date, forcing a reload when a matched node committed after
        the last one (so its chain and state can be read)."""
        self.reload()
        if any(m.accepted and m.node_id not in self.trees[t]
               for t, m in matches.items() if t in self.trees):
            self.reload(force=True)

    def holds(self, tree: TreeName, m: Match) -> bool:
        """Whether ``m`` accepted a node this bank view holds (a warm start's v*)."""
        return m.accepted and m.node_id is not None and m.node_id in self.trees[tree]

    # -- inspection ---------------------------------------------------------------------------
    def chain(self, node_id: str) -> list[Node]:
        """The root → ``node_id`` path of whichever tree holds it; ``KeyError`` otherwise."""
        for t in self.trees.values():
            if node_id in t:
                return t.chain(node_id)
        raise KeyError(node_id)

    def figures(self) -> dict[str, Any]:
        """Node counts by tree, depth, kind, label, consolidated; average whitespace tokens
        per ROOT/RESIDUAL; ``units``; ``failure_hits`` per tree (from the trees' columns:
        no text is read)."""
        out: dict[str, Any] = {
            "nodes": {},
            "depth_histogram": {},
            "kind": {},
            "label": {},
            "consolidated": {},
            "avg_tokens": {},
        }
        tokens: dict[str, list[int]] = {"ROOT": [0, 0], "RESIDUAL": [0, 0]}  # sum, nodes
        failure_hits: dict[str, int] = {}
        for t in TREES:
            tree = self.trees[t]
            out["nodes"][t] = len(tree)
            out["depth_histogram"][t] = {str(d): c for d, c in tree.depth_histogram().items()}
            summary = tree.summary()
            out["kind"][t] = summary["kind"]
            out["label"][t] = summary["label"]
            out["consolidated"][t] = summary["consolidated"]
            failure_hits[t] = summary["failure_hits"]
            for kind, (total, count) in summary["tokens"].items():
                tokens[kind][0] += total
                tokens[kind][1] += count
        for kind, (total, count) in tokens.items():
            out["avg_tokens"][kind] = round(total / count, 1) if count else 0.0
        out["units"] = sum(out["nodes"].values())
        out["failure_hits"] = failure_hits
        return out
