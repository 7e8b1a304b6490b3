"""Residual trees (paper §3.2–3.3): node schema, global failure-penalised match, attachment.

Pure code: no I/O, no embedder, no LLM. A :class:`ResidualTree` holds the nodes
of one tree (Task-Tree or Env-Tree) plus a contiguous float32 matrix of their
normalised trigger embeddings, so a query is one matrix-vector product.

Equations implemented here:

* Eq. 3 — :class:`Node` ⟨type, label, d(v), c(v), e_v, P⟩ (``kind``, ``label``,
  ``depth``, ``success_hits``, ``embedding``, ``payload``).
* Eq. 6 — :meth:`ResidualTree.match`: s(v) = cos(e_q, e_v) − ε·𝟙[label = FAILURE],
  arg-max over *every* node of the tree, accepted iff s(v*) ≥ τ.
* Eq. 4 — :meth:`Match.warm`: ROOT when no accepted match (cold start),
  RESIDUAL otherwise (warm start).
* Eq. 5 — :meth:`ResidualTree.attachment`: ROOT → virtual root r0;
  RESIDUAL → v* if d(v*) < D_max else parent(v*).
* Eq. 7 — :meth:`ResidualTree.chain`: the root → v path.

Depth convention: the virtual root r0 has depth 0, roots depth 1, so with
D_max = 5 no node is ever deeper than 5.

Tie rule (Eq. 6 leaves it open). Exact ties happen whenever triggers repeat
(the same goal text seen again writes a residual whose embedding equals its
parent's). Among nodes of exactly equal score a node not marked consolidated
beats a consolidated one, so the root R* distilled from v (which copies v's
embedding) wins over v itself, as §3.5 Phase 3 describes ("subsequent queries
match R* directly"). Then ``tie_rule`` decides:

* ``"bfs"``: the first node in breadth-first order (shallower first;
  at equal depth, the one whose root → node path of insertion numbers is
  smaller), which is what the authors' public tree code does (it keeps the
  first maximum of a breadth-first scan). A repeated trigger attaches next to
  its earlier copies instead of under them.
* ``"deepest"`` (default): the deeper node, then the most recently inserted one (largest
  ``seq``): the chain with the most specific deltas. Each repeat of a trigger
  then attaches under the previous one, so chains of repeats reach D_max.

Exact scores. s(v) is the cosine of Eq. 6, not the raw dot product: a float32
row normalised by an embedder is not exactly unit length (its dot with itself
can be 0.99999996), and with τ = 1.0 a repeated text must still be accepted
(cos(e, e) = 1). "Equal score" must also not depend on where a row sits in the
matrix, yet BLAS ``sgemv`` rounds rows differently by position (two identical
rows can differ in the last bit). So the float32 product is only a filter:
every row whose float32 score is within a proven rounding bound of the
float32 maximum (see :meth:`ResidualTree._window`) is re-scored exactly by
:func:`exact_cosine` — the exact float64 dot product (``math.fsum`` of the
exact float64 products of the stored float32 components) divided by the
float64 norms, clipped to [−1, 1], so identical vectors score exactly 1 —
minus ε for FAILURE nodes, and the arg-max and the tie rule are taken on those
exact scores. Only near-ties are re-scored, so the cost stays one mat-vec plus
a few microseconds. ``Match.score`` is that exact score.

Threads. The float32 product of a tree of up to :data:`SINGLE_THREAD_MAX`
matrix elements (16 MiB: 10.9k nodes at d = 384) runs on the calling thread
(one BLAS dot per row); larger ones use ``M @ q``, which OpenBLAS spreads over
its thread pool. A multi-threaded mat-vec must wait for its worker thread to be
scheduled, and the workers then spin for a while taking CPU from the caller:
on a machine whose cores are busy — typically with the local LLM the agent
is talking to — that cost up to a scheduler slice (~10 ms, measured on 2 busy
cores) for a product one core finishes in ~0.5 ms (5000 × 384). Above the
limit the product itself is long enough for a second thread to pay off on an
idle machine. Both kernels obey the same rounding bound (Exact scores, above), so the match
does not depend on which one ran.

Search modes. ``search="exact"`` (default) scans every row as above.
``search="ann"`` asks :class:`deltamem.core.ann.AnnIndex` (optional package)
for candidate rows — the best of the SUCCESS index and of the FAILURE index,
so the penalty is applied exactly — then re-scores and breaks ties exactly
as above, among the candidates returned.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from deltamem.core.payload import ChainEntry, Kind, Label, Payload, TreeName
from deltamem.errors import ConfigError

if TYPE_CHECKING:
    from deltamem.core.ann import AnnIndex

VIRTUAL_ROOT_DEPTH = 0
SINGLE_THREAD_MAX = 1 << 22
"""Largest matrix (rows × d elements) scored on the calling thread (module doc, Threads)."""
SearchMode = Literal["exact", "ann"]
SEARCH_MODES: tuple[str, ...] = ("exact", "ann")
TieRule = Literal["bfs", "deepest"]
TIE_RULES: tuple[str, ...] = ("bfs", "deepest")


def exact_cosine(row: np.ndarray, query64: np.ndarray, query_norm2: float | None = None,
                 row_norm2: float | None = None) -> float:
    """cos(e_v, e_q) of Eq. 6, exactly: the same vectors always give the same value.

    ``row`` holds the stored float32 components, ``query64`` the query's float32
    components as float64. The dot product and both squared norms are correctly
    rounded sums of exact float64 products (``math.fsum``); the cosine is
    ``dot / sqrt(|v|² |q|²)`` clipped to [−1, 1]. For ``row == query`` every sum
    is the same number x and ``sqrt(x·x) == x`` in IEEE arithmetic, so the result
    is exactly 1.0. A zero vector scores 0.
    """
    r = np.asarray(row, dtype=np.float32).astype(np.float64)
    dot = math.fsum((r * query64).tolist())
    nr = math.fsum((r * r).tolist()) if row_norm2 is None else row_norm2
    nq = math.fsum((query64 * query64).tolist()) if query_norm2 is None else query_norm2
    den = math.sqrt(nr * nq)
    if den == 0.0:
        return 0.0
    return min(1.0, max(-1.0, dot / den))


@dataclass(frozen=True)
class Node:
    """One memory node (Eq. 3).

    Attributes:
        id: unique id.
        tree: ``task`` or ``env``.
        kind: ``ROOT`` or ``RESIDUAL`` (type in the paper).
        label: ``SUCCESS`` or ``FAILURE``: outcome of the episode that wrote it.
        parent: parent id; ``None`` means the virtual root r0 (only for ROOTs).
        depth: d(v); 1 for roots.
        success_hits: c(v), successful episodes whose match was this node.
        consolidated: the root→v chain has been distilled into a new root.
        trigger: the text whose embedding is ``embedding`` (the episode's query).
        embedding: e_v, unit-norm float32 vector.
        payload: P (a full skill/knowledge for roots, a delta ΔP for residuals).
        seq: insertion order inside the bank (assigned by the store).
        origin: ``extracted`` or ``consolidated`` (a root made by Eq. 8).
        source: for consolidated roots, the id of the node v whose chain was fused.
        episode_id: the episode that produced the node.
        created_at: UNIX time of creation.
    """

    id: str
    tree: TreeName
    kind: Kind
    label: Label
    parent: str | None
    depth: int
    trigger: str
    embedding: np.ndarray = field(repr=False, compare=False)
    payload: Payload
    success_hits: int = 0
    consolidated: bool = False
    seq: int = 0
    origin: str = "extracted"
    source: str | None = None
    episode_id: str = ""
    created_at: float = 0.0

    def entry(self) -> ChainEntry:
        return ChainEntry(self.kind, self.label, self.payload)


@dataclass(frozen=True)
class Match:
    """Outcome of one global scan (Eq. 6).

    ``node_id``/``score`` describe the best node v* (``None`` on an empty tree);
    ``accepted`` is ``score >= tau``.
    """

    node_id: str | None
    score: float | None
    tau: float
    accepted: bool

    @property
    def warm(self) -> bool:
        """Eq. 4: a warm start writes a RESIDUAL, a cold start a ROOT."""
        return self.accepted

    def to_dict(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "score": self.score,
            "tau": self.tau,
            "accepted": self.accepted,
        }


class ResidualTree:
    """The nodes of one tree and the matrix used to score them.

    Nodes are added with :meth:`add` (ids must be new) and updated with
    :meth:`replace`; nothing is ever removed (memories are non-destructive).

    ``search`` picks exact scanning or ANN candidates (module doc);
    ``ann_options`` are passed to :class:`deltamem.core.ann.AnnIndex`. An
    unknown mode, or ``"ann"`` without its package, raises :class:`ConfigError`.
    """

    def __init__(
        self,
        name: TreeName,
        dim: int,
        nodes: Iterable[Node] = (),
        *,
        search: SearchMode = "exact",
        ann_options: Mapping[str, Any] | None = None,
        tie_rule: TieRule = "deepest",
    ) -> None:
        if tie_rule not in TIE_RULES:
            raise ConfigError(f"unknown tie rule {tie_rule!r}; use one of {TIE_RULES}")
        self.name = name
        self.dim = dim
        self.search = search
        self.tie_rule = tie_rule
        self._ann: AnnIndex | None = None
        if search == "ann":
            from deltamem.core.ann import AnnIndex

            self._ann = AnnIndex(dim, **dict(ann_options or {}))
        elif search != "exact":
            raise ConfigError(f"unknown search mode {search!r}; use one of {SEARCH_MODES}")
        self._nodes: dict[str, Node] = {}
        self._row: dict[str, int] = {}
        self._ids: list[str] = []
        cap = 16
        self._emb = np.zeros((cap, dim), dtype=np.float32)
        self._fail = np.zeros(cap, dtype=np.float32)
        self._depth = np.zeros(cap, dtype=np.int64)
        self._seq = np.zeros(cap, dtype=np.int64)
        self._cons = np.zeros(cap, dtype=np.int64)
        self._inv = np.zeros(cap, dtype=np.float32)  # 1/|e_v| (0 for a zero row)
        self._norm2 = np.zeros(cap, dtype=np.float64)  # |e_v|², exact (fsum)
        for n in sorted(nodes, key=lambda n: n.seq):
            self.add(n)

    # -- container -------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[Node]:
        return (self._nodes[i] for i in self._ids)

    def get(self, node_id: str) -> Node:
        return self._nodes[node_id]

    def children(self, node_id: str | None) -> list[Node]:
        """Children of ``node_id`` (``None``: the roots), in insertion order."""
        return [n for n in self if n.parent == node_id]

    def add(self, node: Node) -> None:
        """Append a node; its parent must already be in the tree (or be r0)."""
        if node.id in self._nodes:
            raise ValueError(f"node {node.id!r} already in the {self.name} tree")
        if node.tree != self.name:
            raise ValueError(f"node {node.id!r} belongs to the {node.tree} tree")
        if node.parent is not None and node.parent not in self._nodes:
            raise ValueError(f"parent {node.parent!r} of node {node.id!r} is unknown")
        emb = np.asarray(node.embedding, dtype=np.float32).reshape(-1)
        if emb.shape[0] != self.dim:
            raise ValueError(f"node {node.id!r} has dimension {emb.shape[0]}, tree has {self.dim}")
        n = len(self._ids)
        if n == self._emb.shape[0]:
            self._grow()
        self._emb[n] = emb
        self._fail[n] = 1.0 if node.label == "FAILURE" else 0.0
        self._depth[n] = node.depth
        self._seq[n] = node.seq
        self._cons[n] = int(node.consolidated)
        e64 = emb.astype(np.float64)
        norm2 = math.fsum((e64 * e64).tolist())
        self._norm2[n] = norm2
        self._inv[n] = 1.0 / math.sqrt(norm2) if norm2 > 0 else 0.0
        self._row[node.id] = n
        self._ids.append(node.id)
        self._nodes[node.id] = node

    def replace(self, node: Node) -> None:
        """Update the mutable fields (hits, consolidated) of an existing node."""
        old = self._nodes[node.id]
        self._nodes[node.id] = replace(
            old, success_hits=node.success_hits, consolidated=node.consolidated
        )
        self._cons[self._row[node.id]] = int(node.consolidated)

    def _grow(self) -> None:
        cap = self._emb.shape[0] * 2
        for attr in ("_emb", "_fail", "_depth", "_seq", "_cons", "_inv", "_norm2"):
            old = getattr(self, attr)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, attr, new)

    # -- Eq. 6 -----------------------------------------------------------
    def scores(self, query: np.ndarray, epsilon: float) -> np.ndarray:
        """s(v) for every node in float32, in insertion order (Eq. 6).

        This is the fast filter :meth:`match` uses: the float32 dot products
        divided by the float32 norms; it can differ from the exact score in the
        last float32 bits (see the module doc).
        """
        n = len(self._ids)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        m = self._emb[:n]
        s = _rowdot(m, q) if m.size <= SINGLE_THREAD_MAX else m @ q
        s *= self._inv[:n]
        qn = float(np.linalg.norm(q.astype(np.float64)))
        if qn > 0:
            s *= np.float32(1.0 / qn)
        if epsilon:
            # in place: one temporary of n floats for the penalty, none for the result
            s -= np.float32(epsilon) * self._fail[:n]
        return s

    def exact_scores(self, rows: np.ndarray, query: np.ndarray, epsilon: float) -> np.ndarray:
        """Exact s(v) (float64) of the given rows: the definition :meth:`match` decides on.

        :func:`exact_cosine` of the stored row and the query (identical
        embeddings always score identically, a vector against itself exactly 1);
        FAILURE nodes lose ``epsilon``.
        """
        q = np.asarray(query, dtype=np.float32).reshape(-1).astype(np.float64)
        qn2 = math.fsum((q * q).tolist())
        out = np.empty(len(rows), dtype=np.float64)
        seen: dict[bytes, float] = {}
        for k, r in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
            row = self._emb[r]
            key = row.tobytes()
            cos = seen.get(key)
            if cos is None:
                cos = exact_cosine(row, q, qn2, float(self._norm2[r]))
                seen[key] = cos
            out[k] = cos - float(epsilon) if self._fail[r] else cos
        return out

    def _tolerance(self, query: np.ndarray, epsilon: float) -> float:
        """Bound on |float32 score − exact score| summed over two rows.

        Each float32 score (d products, d−1 sums, two scalings by reciprocal
        norms, one penalty subtraction) is off by at most (d+6)·2⁻²⁴·(1 + ε)
        of the cosine (standard dot-product error bound, first order, relative
        to |e_v||e_q|); the window needs twice that; we take another 2× of margin.
        """
        return (self.dim + 6) * (1.0 + abs(epsilon)) * 2.0**-21

    def _window(self, query: np.ndarray, epsilon: float) -> np.ndarray:
        """Rows that can be the exact arg-max: float32 score ≥ float32 max − tolerance."""
        s = self.scores(query, epsilon)
        top = s.max()
        return np.flatnonzero(s >= top - np.float32(self._tolerance(query, epsilon)))

    def _bfs_key(self, row: int) -> tuple[int, ...]:
        """Insertion numbers along the root → node path: sorts nodes in breadth-first order
        when compared at equal depth (parents first by their own order, then siblings)."""
        return tuple(n.seq for n in self.chain(self._ids[row]))

    def _break_tie(self, cand: np.ndarray) -> int:
        """The winner among rows of exactly equal score (module doc, Tie rule)."""
        depth, seq, cons = self._depth[cand], self._seq[cand], self._cons[cand]
        if self.tie_rule == "deepest":
            # lexsort: last key is primary → unconsolidated, deeper, newer first
            return int(cand[np.lexsort((-seq, -depth, cons))][0])
        return int(min(cand.tolist(), key=lambda r: (int(self._cons[r]), int(self._depth[r]),
                                                      self._bfs_key(r))))

    def match(self, query: np.ndarray, tau: float, epsilon: float) -> Match:
        """Global arg-max of s(v) over every node, accepted iff s(v*) ≥ τ (Eq. 6).

        ``query`` must be unit-norm (cosine = dot product). Scores and ties: see
        the module doc. In ``ann`` mode the arg-max is over the ANN candidates.
        """
        n = len(self._ids)
        if not n:
            return Match(None, None, tau, False)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if self._ann is not None:
            rows = self._ann.candidates(self._emb, self._fail, n, q)
            qn = float(np.linalg.norm(q.astype(np.float64))) or 1.0
            s32 = (self._emb[rows] @ q) * self._inv[rows] * np.float32(1.0 / qn)
            s32 -= np.float32(epsilon) * self._fail[rows]
            rows = rows[s32 >= s32.max() - np.float32(self._tolerance(q, epsilon))]
        else:
            rows = self._window(q, epsilon)
        exact = self.exact_scores(rows, q, epsilon)
        best = exact.max()
        cand = rows[exact == best]
        row = int(cand[0]) if cand.size == 1 else self._break_tie(cand)
        score = float(best)
        return Match(self._ids[row], score, tau, score >= tau)

    # -- Eq. 5 / Eq. 7 ----------------------------------------------------
    def attachment(self, match: Match, d_max: int) -> tuple[str | None, int]:
        """(parent id, depth) for a new node given the match (Eq. 4–5).

        ``d_max`` must be at least 2: with D_max = 1 a warm start on a root would
        file a RESIDUAL at the virtual root r0, a delta with no base to patch.
        """
        if d_max < 2:
            raise ConfigError(f"d_max must be >= 2 (roots have depth 1), got {d_max}")
        if not match.accepted or match.node_id is None:
            return None, 1
        v = self._nodes[match.node_id]
        if v.depth < d_max:
            return v.id, v.depth + 1
        return v.parent, v.depth  # sibling of v*

    def chain(self, node_id: str) -> list[Node]:
        """The root → ``node_id`` path (Eq. 7), root first."""
        path: list[Node] = []
        cur: str | None = node_id
        while cur is not None:
            node = self._nodes[cur]
            path.append(node)
            cur = node.parent
        path.reverse()
        return path

    def depth_histogram(self) -> dict[int, int]:
        hist: dict[int, int] = {}
        for n in self:
            hist[n.depth] = hist.get(n.depth, 0) + 1
        return dict(sorted(hist.items()))


def _rowdot(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``m @ q`` computed on the calling thread (float32, one dot per row)."""
    if _VECDOT is not None:  # numpy >= 2: a BLAS sdot per row, no thread pool
        return _VECDOT(m, q)
    return np.einsum("ij,j->i", m, q)  # numpy 1.26: einsum's own SIMD loop


_VECDOT = getattr(np, "vecdot", None)
