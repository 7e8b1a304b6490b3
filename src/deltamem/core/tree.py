"""Residual trees (paper §3.2–3.3): node schema, global failure-penalised match, attachment.

Pure code: no I/O, no embedder, no LLM. A :class:`ResidualTree` holds the nodes
of one tree (Task-Tree or Env-Tree) as columns: a contiguous float32 matrix of
their trigger embeddings, so a query is one matrix-vector product, and small
arrays of what Eq. 4–8 read (label, kind, parent, depth, hits, flags).

Equations implemented here:

* Eq. 3 — :class:`Node` ⟨type, label, d(v), c(v), e_v, P⟩ (``kind``, ``label``,
  ``depth``, ``success_hits``, ``embedding``, ``payload``).
* Eq. 6 — :meth:`ResidualTree.match`: s(v) = cos(e_q, e_v) − ε·𝟙[label = FAILURE],
  arg-max over *every* node of the tree, accepted iff s(v*) ≥ τ. Extended (off by
  default, ``failure_weight`` λ > 0): − λ·f(v)/(f(v) + c(v) + 1), the *standing penalty*
  of a node whose matches keep failing (:func:`standing_penalty`).
* Eq. 4 — :attr:`BestNode.accepted`: ROOT when no accepted match (cold start),
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
* ``"record"``: the node with the best record of the episodes that followed it, the
  Laplace-smoothed success rate (c(v) + 1) / (c(v) + f(v) + 2) of §3.5's success-hit
  count c(v) beside the failure-hit count f(v); then as ``"deepest"``. Among variants
  of one goal (every node of a chain of repeats ties) the one most often followed to
  a win is recalled, a variant that lost falls behind a fresh one (1/2), and the hits
  gather on one node, so consolidation (§3.5) can reach K_cons.

Scores. s(v) is the cosine of Eq. 6, not the raw dot product: a float32 row
normalised by an embedder is not exactly unit length (its dot with itself can
be 0.99999996), and with τ = 1.0 a repeated text must still be accepted
(cos(e, e) = 1). "Equal score" must also not depend on where a row sits in the
matrix, yet a matrix-vector product rounds rows differently by position (two
identical rows can differ in the last bit). So the float32 product is only a
filter: every row whose float32 score is within a proven rounding bound of the
float32 maximum (see :meth:`ResidualTree._tolerance`) is scored again in
float64 by :func:`exact_cosine` — the dot product of the stored float32
components made float64 (each product exact) and summed by BLAS ``ddot``,
divided by the float64 norms computed the same way, clipped to [−1, 1] — minus
ε for FAILURE nodes (and the standing penalty), and the arg-max and the tie
rule are taken on those scores. ``ddot`` sums a vector of a given length in one
fixed order wherever it lies in memory, so the same vectors always give the
same score, wherever they sit in the matrix; a vector against itself scores
exactly 1 (the dot and both norms are the same sum x, and sqrt(x·x) = x in IEEE
arithmetic); the score is within ~d·2⁻⁵³ of the exact cosine. (The order can
differ between CPU families, so the last bit of a score can differ between
machines; it never differs between two scans on one.) Usually one row is in the
window, told apart by the second best float32 score, so a query costs one
mat-vec and a few microseconds. ``BestNode.score`` is that score.

Threads. The float32 product runs on the calling thread: up to
:data:`GEMV_ONE_THREAD` matrix elements as one ``M @ q`` (OpenBLAS, numpy's
BLAS, keeps a matrix-vector product that small on the calling thread), above
it as one dot per row (``np.vecdot``; numpy 1.26: ``einsum``), which never
wakes the BLAS thread pool. Measured on the 2-core machine this project runs
on, busy with other work (load 12–20; ``benchmarks/retrieval.py --kernels``):
the pool's ``M @ q`` took 20–28 ms median for 10k × 384 (0.12 ms at best)
against 0.35 ms for the per-row dots, 16–24 ms against 1.6–1.9 ms at 30k and
32–51 ms against 9–16 ms at 100k: a multi-threaded product waits for its
workers to be scheduled on cores the agent's LLM keeps busy, and the workers
then spin, taking CPU from the caller. :data:`SINGLE_THREAD_MAX` (default: no
limit) is the largest matrix kept on the calling thread; above it the product
uses the pool, which pays off only on an idle machine with memory bandwidth to
spare. Both kernels obey the same rounding bound, so the match does not depend
on which one ran.

Memory. Per node the tree keeps its row of the matrix (4·d bytes), ~60 bytes
of columns and its id: ~1.1× the float32 matrix at d = 384. A node's text
(trigger, payload) and provenance are kept only when the tree has no
``details`` source; a tree opened on a bank is given one (the store) and
reads them when a chain is recalled, keeping the last :data:`DETAILS_CACHE` nodes read or
added (a node's text never changes, so the cache needs no invalidation; a node removed from
the bank is removed with its tree). Nodes added from a bank being opened keep their text
too (it was read anyway): on a bank of up to :data:`DETAILS_CACHE` nodes a recall reads
no text from the store.
Arrays grow by doubling but only their used rows are ever written, so the
unused capacity is never resident.

Search modes. ``search="exact"`` (default) scans every row as above.
``search="ann"`` asks :class:`deltamem.core.ann.AnnIndex` (optional package)
for candidate rows — the best of the SUCCESS index and of the FAILURE index,
so the penalty is applied exactly — then re-scores and breaks ties exactly
as above, among the candidates returned.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from deltamem.core.payload import ChainEntry, Kind, Label, Payload, TreeName
from deltamem.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from deltamem.core.ann import AnnIndex

SINGLE_THREAD_MAX: float = math.inf
"""Largest matrix (rows × d elements) scored on the calling thread; above it ``M @ q`` on
the BLAS thread pool (module doc, Threads). Default: no limit."""
GEMV_ONE_THREAD = 409_600
"""Largest matrix (elements) scored by one ``M @ q`` on the calling thread; larger ones by
one dot per row. OpenBLAS runs a matrix-vector product on one thread below 460,800
elements (``115200 × GEMM_MULTITHREAD_THRESHOLD``); at these sizes its kernel is ~25 %
faster than the per-row dots (1k × 384: 22 µs against 29 µs)."""
DETAILS_CACHE = 2048
"""Nodes whose text a tree with a ``details`` source keeps after reading or adding them
(least recently used first out; ~0.5–1.5 KB each with household payloads, so 1–3 MiB a
tree, bounded whatever the bank's size: a service keeping 64 banks open holds at most
~0.4 GiB of text). 512 made a recall at 1k nodes read half its chains from SQLite
(``benchmarks/peers.py``)."""
UNIT_SLACK = 1e-6
"""|‖e‖² − 1| below which a vector counts as unit length, so the float32 filter skips the
scaling by its norm (the tolerance absorbs the difference; module doc, Scores)."""
SearchMode = Literal["exact", "ann"]
SEARCH_MODES: tuple[str, ...] = ("exact", "ann")
TieRule = Literal["bfs", "deepest", "record"]
TIE_RULES: tuple[str, ...] = ("bfs", "deepest", "record")


def standing_penalty(success_hits: int, failure_hits: int, weight: float) -> float:
    """λ·f(v) / (f(v) + c(v) + 1): how much standing a node has lost (Eq. 6 extended).

    ε of Eq. 6 penalises a node by the outcome of the one episode that *wrote* it; this
    term penalises it by the outcomes of the episodes that *followed* it since: f(v)
    failed ones beside c(v) successful ones. A node never followed into a failure keeps
    its full score; one that failed f times and never succeeded loses λ·f/(f+1) (λ/2
    after one failure, → λ); successes restore it. ``weight`` λ = 0 gives the paper's
    Eq. 6 exactly. The +1 keeps a single failure of a fresh node from costing all of λ.

    >>> standing_penalty(0, 0, 0.1), standing_penalty(0, 1, 0.1), standing_penalty(3, 1, 0.1)
    (0.0, 0.05, 0.02)
    """
    if weight <= 0 or failure_hits <= 0:
        return 0.0
    return weight * failure_hits / (failure_hits + success_hits + 1)


def _dot64(a64: np.ndarray, b64: np.ndarray) -> float:
    """Σ aᵢbᵢ of two float64 vectors (float32 components made float64, so each product is
    exact), summed by BLAS ``ddot``: one fixed order for a given length, whatever the
    vectors' place in memory (module doc, Scores)."""
    return float(a64.dot(b64))


_F32 = np.dtype(np.float32)
_ULP = 2.0**-21
_SLACK8 = 8 * UNIT_SLACK


def exact_cosine(row: np.ndarray, query64: np.ndarray, query_norm2: float | None = None,
                 row_norm2: float | None = None) -> float:
    """cos(e_v, e_q) of Eq. 6 in float64: the same vectors always give the same value.

    ``row`` holds the stored float32 components, ``query64`` the query's float32
    components as float64. The dot product and both squared norms are float64 sums of
    the exact float64 products, in numpy's pairwise order (module doc, Scores); the
    cosine is ``dot / sqrt(|v|² |q|²)`` clipped to [−1, 1]. For ``row == query`` every
    sum is the same number x and ``sqrt(x·x) == x`` in IEEE arithmetic, so the result
    is exactly 1.0. A zero vector scores 0. ``query_norm2`` / ``row_norm2``: the squared
    norms when already known (computed the same way).
    """
    r64 = np.asarray(row, dtype=np.float32).reshape(-1).astype(np.float64)
    q64 = np.ascontiguousarray(query64, dtype=np.float64).reshape(-1)
    dot = _dot64(r64, q64)
    nr = _dot64(r64, r64) if row_norm2 is None else row_norm2
    nq = _dot64(q64, q64) if query_norm2 is None else query_norm2
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
        failure_hits: f(v), failed episodes whose match was this node (beside c(v); what
            the standing penalty of :func:`standing_penalty` reads).
        last_used: the episode number (learned episodes, counted) of the last learn that
            wrote the node or followed its chain (what ``unused`` pruning reads; the store
            keeps it current, a loaded tree keeps the value it was loaded with).
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
    failure_hits: int = 0
    last_used: int = 0

    def entry(self) -> ChainEntry:
        return ChainEntry(self.kind, self.label, self.payload)

    @classmethod
    def _of(cls, **fields: Any) -> Node:
        """The same node as ``Node(**fields)`` — every field given, by name — without the
        frozen dataclass's ``__init__`` (~4 µs of its 18 checked assignments; a node is made
        per chain entry recalled and per row a bank is opened with)."""
        self = object.__new__(cls)
        self.__dict__.update(fields)
        return self


@dataclass(frozen=True)
class BestNode:
    """The best node v* of one tree for a query: the outcome of one global scan (Eq. 6).

    ``node_id``/``score`` describe v* (``None`` on an empty tree); ``accepted`` is
    ``score >= tau``. What a recall reports per tree is :class:`deltamem.types.Match`:
    these four fields plus the tree's name and the recalled chain.
    """

    node_id: str | None
    score: float | None
    tau: float
    accepted: bool

    @classmethod
    def _of(cls, node_id: str | None, score: float | None, tau: float,
            accepted: bool) -> BestNode:
        """The same as ``BestNode(...)`` without the frozen dataclass's ``__init__`` (one
        per query: ~1 µs less)."""
        self = object.__new__(cls)
        d = self.__dict__
        d["node_id"], d["score"], d["tau"], d["accepted"] = node_id, score, tau, accepted
        return self

    def to_dict(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "score": self.score,
            "tau": self.tau,
            "accepted": self.accepted,
        }


class _Details(NamedTuple):
    """What a tree does not need to score a node: its text and provenance."""

    trigger: str
    payload: Payload
    origin: str
    source: str | None
    episode_id: str
    created_at: float

    @classmethod
    def of(cls, n: Node) -> _Details:
        return cls(n.trigger, n.payload, n.origin, n.source, n.episode_id, n.created_at)


DetailSource = Callable[[Sequence[str]], Iterable[Node]]
"""Where a tree reads the text of its nodes: given ids, the stored nodes with those ids
(in any order; only the text and provenance fields are read)."""

# columns: name → dtype (one entry per row; ``_emb`` is the (rows, d) matrix)
_COLUMNS: dict[str, Any] = {
    "_fail": np.float32,  # 1 for a FAILURE node
    "_kind": np.int8,  # 1 for a RESIDUAL
    "_up": np.int32,  # row of the parent + 1 (0: a root, so zeroed capacity means roots)
    "_depth": np.int32,
    "_seq": np.int64,
    "_hits": np.int32,  # c(v)
    "_failures": np.int32,  # f(v)
    "_used": np.int64,  # last use
    "_cons": np.int8,
    "_tokens": np.int32,  # whitespace tokens of the payload
    "_inv": np.float32,  # 1/|e_v| (0 for a zero row)
    "_norm2": np.float64,  # |e_v|², float64 (exact_cosine's)
    "_pen": np.float32,  # standing penalty (0 unless λ > 0)
    "_penalty": np.float32,  # ε·[FAILURE] + standing penalty, for ``_penalty_eps``
    "_buf": np.float32,  # the float32 scores of the last query (scratch)
}


class ResidualTree:
    """The nodes of one tree and the matrix used to score them.

    Nodes are added with :meth:`add` (ids must be new) and updated with
    :meth:`replace`; nothing is removed here (a bank that forgot nodes, ``deltamem
    prune``, is loaded into a new tree).

    ``search`` picks exact scanning or ANN candidates (module doc);
    ``ann_options`` are passed to :class:`deltamem.core.ann.AnnIndex`. An
    unknown mode, or ``"ann"`` without its package, raises :class:`ConfigError`.
    ``failure_weight`` λ ≥ 0 switches on the standing penalty (:func:`standing_penalty`;
    0, the default, is the paper's Eq. 6); ANN candidates are then still drawn by
    cosine, the penalty applied among them. ``details``: where the text of the nodes
    is read (:data:`DetailSource`, e.g. the bank's store); ``None`` keeps it in memory.
    ``capacity``: rows to make room for up front.
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
        failure_weight: float = 0.0,
        details: DetailSource | None = None,
        capacity: int = 0,
    ) -> None:
        if tie_rule not in TIE_RULES:
            raise ConfigError(f"unknown tie rule {tie_rule!r}; use one of {TIE_RULES}")
        if not 0.0 <= failure_weight <= 2.0 or math.isnan(failure_weight):
            raise ConfigError(f"failure_weight must be in [0, 2], got {failure_weight}")
        self.name = name
        self.dim = dim
        self.search = search
        self.tie_rule = tie_rule
        self.failure_weight = float(failure_weight)
        self._ann: AnnIndex | None = None
        if search == "ann":
            from deltamem.core.ann import AnnIndex

            self._ann = AnnIndex(dim, **dict(ann_options or {}))
        elif search != "exact":
            raise ConfigError(f"unknown search mode {search!r}; use one of {SEARCH_MODES}")
        self._source = details
        self._held: list[_Details] | None = None if details is not None else []
        self._cache: OrderedDict[str, _Details] = OrderedDict()
        self._n = 0
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._nfail = 0  # FAILURE rows
        self._npen = 0  # rows with a standing penalty
        self._off_unit = 0  # rows whose norm is not 1 (UNIT_SLACK)
        self._penalty_eps: float | None = None
        self._penalty_on = False
        self._shape = (dim,)
        self._tol_eps: float | None = None
        self._tol = 0.0
        # float64 scratch of match (like ``_buf``): the query, then the best row
        self._q64 = np.empty(dim, dtype=np.float64)
        self._r64 = np.empty(dim, dtype=np.float64)
        # np.zeros: untouched capacity stays virtual (not resident) until a row is written
        cap = max(16, int(capacity))
        self._emb = np.zeros((cap, dim), dtype=np.float32)
        for col, dtype in _COLUMNS.items():
            setattr(self, col, np.zeros(cap, dtype=dtype))
        self._views()
        for n in sorted(nodes, key=lambda n: n.seq):
            self.add(n)

    # -- container -------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._row

    def __iter__(self) -> Iterator[Node]:
        """Every node, in insertion order (their text read in batches from the source)."""
        for lo in range(0, self._n, 512):
            rows = list(range(lo, min(self._n, lo + 512)))
            yield from self._nodes(rows, cache=False)

    def ids(self) -> list[str]:
        """Every node id, in insertion order."""
        return list(self._ids)

    def get(self, node_id: str) -> Node:
        """The node ``node_id`` (``KeyError`` when it is not in the tree)."""
        return self._nodes([self._row[node_id]])[0]

    def children(self, node_id: str | None) -> list[Node]:
        """Children of ``node_id`` (``None``: the roots), in insertion order."""
        up = 0 if node_id is None else self._row[node_id] + 1
        return self._nodes(np.flatnonzero(self._up[: self._n] == up).tolist())

    def add(self, node: Node) -> None:
        """Append a node; its parent must already be in the tree (or be r0)."""
        if node.id in self._row:
            raise ValueError(f"node {node.id!r} already in the {self.name} tree")
        if node.tree != self.name:
            raise ValueError(f"node {node.id!r} belongs to the {node.tree} tree")
        if node.parent is not None and node.parent not in self._row:
            raise ValueError(f"parent {node.parent!r} of node {node.id!r} is unknown")
        emb = np.asarray(node.embedding, dtype=np.float32).reshape(-1)
        if emb.shape[0] != self.dim:
            raise ValueError(f"node {node.id!r} has dimension {emb.shape[0]}, tree has {self.dim}")
        n = self._n
        if n == self._emb.shape[0]:
            self._grow()
        self._emb[n] = emb
        failure = node.label == "FAILURE"
        self._fail[n] = 1.0 if failure else 0.0
        self._nfail += failure
        self._kind[n] = node.kind == "RESIDUAL"
        self._up[n] = 0 if node.parent is None else self._row[node.parent] + 1
        self._depth[n] = node.depth
        self._seq[n] = node.seq
        self._tokens[n] = len(node.payload.text.split())
        e64 = emb.astype(np.float64)
        norm2 = _dot64(e64, e64)
        self._norm2[n] = norm2
        self._inv[n] = 1.0 / math.sqrt(norm2) if norm2 > 0 else 0.0
        self._off_unit += abs(norm2 - 1.0) > UNIT_SLACK
        self._row[node.id] = n
        self._ids.append(node.id)
        if self._held is not None:
            self._held.append(_Details.of(node))
        else:
            self._cache[node.id] = _Details.of(node)
            if len(self._cache) > DETAILS_CACHE:
                self._cache.popitem(last=False)
        self._n = n + 1
        self._views()
        self._set_state(n, node.success_hits, node.consolidated, node.failure_hits,
                        node.last_used)

    def replace(self, node: Node) -> None:
        """Update the mutable fields (hits, failures, consolidated, last use) of a node."""
        self._set_state(self._row[node.id], node.success_hits, node.consolidated,
                        node.failure_hits, node.last_used)

    def state(self, node_id: str) -> tuple[int, bool, int]:
        """``(success_hits, consolidated, failure_hits)`` of a node (no text is read)."""
        row = self._row[node_id]
        return int(self._hits[row]), bool(self._cons[row]), int(self._failures[row])

    def set_state(self, node_id: str, success_hits: int, consolidated: bool,
                  failure_hits: int) -> None:
        """Update c(v), the consolidation flag and f(v) of a node (what the store says)."""
        row = self._row[node_id]
        self._set_state(row, success_hits, consolidated, failure_hits, int(self._used[row]))

    def _set_state(self, row: int, hits: int, consolidated: bool, failures: int,
                   used: int) -> None:
        self._hits[row] = hits
        self._failures[row] = failures
        self._used[row] = used
        self._cons[row] = int(consolidated)
        pen = standing_penalty(hits, failures, self.failure_weight)
        self._npen += int(pen > 0) - int(self._pen[row] > 0)
        self._pen[row] = pen
        if self._penalty_eps is not None:
            self._penalty[row] = np.float32(self._penalty_eps) * self._fail[row] + self._pen[row]
            self._penalty_on = bool((self._penalty_eps and self._nfail) or self._npen)

    def _grow(self) -> None:
        """Double the capacity; only the used rows are copied (the rest stays virtual)."""
        n, cap = self._n, self._emb.shape[0] * 2
        for attr in ("_emb", *_COLUMNS):
            old = getattr(self, attr)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[:n] = old[:n]
            setattr(self, attr, new)
        self._views()

    def _views(self) -> None:
        """The used rows of the matrix, the score buffer and the penalties (per query)."""
        n = self._n
        self._m, self._s, self._p = self._emb[:n], self._buf[:n], self._penalty[:n]

    # -- text of the nodes -------------------------------------------------
    def _details(self, rows: Sequence[int], *, cache: bool = True) -> list[_Details]:
        if self._held is not None:
            return [self._held[r] for r in rows]
        ids = [self._ids[r] for r in rows]
        found: dict[str, _Details] = {}
        for i in ids:
            d = self._cache.get(i)
            if d is not None:
                self._cache.move_to_end(i)
                found[i] = d
        missing = [i for i in ids if i not in found]
        if missing:
            assert self._source is not None
            for n in self._source(missing):
                found[n.id] = d = _Details.of(n)
                if cache:
                    self._cache[n.id] = d
            while len(self._cache) > DETAILS_CACHE:
                self._cache.popitem(last=False)
        try:
            return [found[i] for i in ids]
        except KeyError as e:
            raise StoreError(
                f"node {e.args[0]!r} of the {self.name} tree is no longer stored (removed by "
                "another process?): reopen the bank"
            ) from None

    def _nodes(self, rows: Sequence[int], *, cache: bool = True) -> list[Node]:
        """The :class:`Node` of each row: columns, text and a copy of its embedding."""
        dets = self._details(rows, cache=cache)
        ids, up = self._ids, self._up
        out = []
        for r, d in zip(rows, dets, strict=True):
            p = int(up[r])
            out.append(Node._of(
                id=ids[r], tree=self.name, kind="RESIDUAL" if self._kind[r] else "ROOT",
                label="FAILURE" if self._fail[r] else "SUCCESS",
                parent=ids[p - 1] if p else None, depth=int(self._depth[r]),
                trigger=d.trigger, embedding=self._emb[r].copy(), payload=d.payload,
                success_hits=int(self._hits[r]), consolidated=bool(self._cons[r]),
                seq=int(self._seq[r]), origin=d.origin, source=d.source,
                episode_id=d.episode_id, created_at=d.created_at,
                failure_hits=int(self._failures[r]), last_used=int(self._used[r]),
            ))  # fmt: skip
        return out

    # -- Eq. 6 -----------------------------------------------------------
    def _query(self, query: np.ndarray) -> np.ndarray:
        q = query
        if not (isinstance(q, np.ndarray) and q.dtype == np.float32 and q.ndim == 1
                and q.flags.c_contiguous):
            q = np.ascontiguousarray(q, dtype=np.float32).reshape(-1)
        if q.shape != self._shape:
            raise ValueError(f"query has dimension {q.shape[0]}, tree has {self.dim}")
        return q

    def _set_penalty(self, epsilon: float) -> None:
        """ε·[FAILURE] + standing penalty of every row, for ``epsilon`` (kept until ε
        changes; rows written later are updated one by one)."""
        n = self._n
        np.multiply(self._fail[:n], np.float32(epsilon), out=self._penalty[:n])
        self._penalty[:n] += self._pen[:n]
        self._penalty_eps = float(epsilon)
        self._penalty_on = bool((epsilon and self._nfail) or self._npen)

    def _filter(self, q: np.ndarray, qn2: float, epsilon: float) -> np.ndarray:
        """The float32 scores of every row into the scratch buffer (a view of it)."""
        m, s = self._m, self._s
        if m.size > SINGLE_THREAD_MAX:
            np.matmul(m, q, out=s)  # BLAS thread pool
        else:
            _rowdot(m, q, s)
        return self._adjust(s, qn2, epsilon)

    def _adjust(self, s: np.ndarray, qn2: float, epsilon: float) -> np.ndarray:
        """The float32 dot products ``s`` made scores, in place: scaled by the norms (rows and
        query not of unit length), minus the penalties."""
        if self._off_unit:
            np.multiply(s, self._inv[: self._n], out=s)
        if abs(qn2 - 1.0) > UNIT_SLACK:
            scale = 1.0 / math.sqrt(qn2) if qn2 > 0 else 0.0
            np.multiply(s, np.float32(scale), out=s)
        if self._penalty_eps != epsilon:
            self._set_penalty(epsilon)
        if self._penalty_on:
            np.subtract(s, self._p, out=s)
        return s

    def scores(self, query: np.ndarray, epsilon: float) -> np.ndarray:
        """s(v) for every node in float32, in insertion order (Eq. 6).

        This is the fast filter :meth:`match` uses: the float32 dot products divided by
        the norms (skipped for rows and queries of unit length); it can differ from the
        float64 score in the last float32 bits (see the module doc).
        """
        q = self._query(query)
        q64 = q.astype(np.float64)
        return self._filter(q, _dot64(q64, q64), epsilon).copy()

    def _cos(self, row: int, q64: np.ndarray, qn2: float) -> float:
        """:func:`exact_cosine` of one row and the query (norms known)."""
        den = math.sqrt(float(self._norm2[row]) * qn2)
        if den == 0.0:
            return 0.0
        return min(1.0, max(-1.0, _dot64(self._emb[row].astype(np.float64), q64) / den))

    def _penalised(self, row: int, cos: float, epsilon: float) -> float:
        """s(v) from the cosine: minus ε for a FAILURE node, minus its standing penalty."""
        if self._fail[row]:
            cos -= float(epsilon)
        if self._pen[row]:
            cos -= float(self._pen[row])
        return cos

    def exact_scores(self, rows: np.ndarray, query: np.ndarray, epsilon: float) -> np.ndarray:
        """Float64 s(v) of the given rows: the definition :meth:`match` decides on.

        :func:`exact_cosine` of the stored row and the query (identical
        embeddings always score identically, a vector against itself exactly 1);
        FAILURE nodes lose ``epsilon``; with ``failure_weight`` every node loses its
        standing penalty (the stored float32 value).
        """
        q = self._query(query)
        q64 = q.astype(np.float64)
        qn2 = _dot64(q64, q64)
        return self._exact(np.asarray(rows, dtype=np.int64), q64, qn2, epsilon)

    def _exact(self, rows: np.ndarray, q64: np.ndarray, qn2: float,
               epsilon: float) -> np.ndarray:
        out = np.empty(len(rows), dtype=np.float64)
        seen: dict[bytes, float] = {}  # identical rows: one cosine
        for k, r in enumerate(rows.tolist()):
            key = self._emb[r].tobytes()
            cos = seen.get(key)
            if cos is None:
                cos = seen[key] = self._cos(r, q64, qn2)
            out[k] = self._penalised(r, cos, epsilon)
        return out

    def _tolerance(self, epsilon: float) -> float:
        """Bound on |float32 score − float64 score| summed over two rows.

        Each float32 score (d products, d−1 sums, two scalings by reciprocal norms, one
        penalty subtraction) is off by at most (d+6)·2⁻²⁴·(1 + ε + λ) of the cosine
        (standard dot-product error bound, first order, relative to |e_v||e_q|); the
        window needs twice that; we take another 2× of margin, which also covers the
        float64 score's own error (~log₂(d)·2⁻⁵³). Skipping the scaling of unit-length
        rows and queries (|‖e‖² − 1| ≤ :data:`UNIT_SLACK`) adds at most 2·UNIT_SLACK per
        score.
        """
        return (self.dim + 6) * (1.0 + abs(epsilon) + self.failure_weight) * _ULP + _SLACK8

    def _bfs_key(self, row: int) -> tuple[int, ...]:
        """Insertion numbers along the root → node path: sorts nodes in breadth-first order
        when compared at equal depth (parents first by their own order, then siblings)."""
        return tuple(int(self._seq[r]) for r in self._path(row))

    def _break_tie(self, cand: np.ndarray) -> int:
        """The winner among rows of exactly equal score (module doc, Tie rule)."""
        depth, seq, cons = self._depth[cand], self._seq[cand], self._cons[cand]
        if self.tie_rule == "deepest":
            # lexsort: last key is primary → unconsolidated, deeper, newer first
            return int(cand[np.lexsort((-seq, -depth, cons))][0])
        if self.tie_rule == "record":
            # unconsolidated, then the best record (c+1)/(c+f+2), then deeper, newer
            hits = self._hits[cand].astype(np.float64)
            rate = (hits + 1.0) / (hits + self._failures[cand] + 2.0)
            return int(cand[np.lexsort((-seq, -depth, -rate, cons))][0])
        return int(min(cand.tolist(), key=lambda r: (int(self._cons[r]), int(self._depth[r]),
                                                      self._bfs_key(r))))

    def match(self, query: np.ndarray, tau: float, epsilon: float) -> BestNode:
        """Global arg-max of s(v) over every node, accepted iff s(v*) ≥ τ (Eq. 6).

        Scores and ties: see the module doc. In ``ann`` mode the arg-max is over the
        ANN candidates. This is the per-query path: what :meth:`_window` and
        :meth:`_exact` do for any number of rows is done inline for the usual single one, and
        :meth:`_filter` inline too (its scaling only when a row or the query is not of unit
        length or ε changed).
        """
        n = self._n
        if not n:
            return BestNode(None, None, tau, False)
        q = query
        if not (type(q) is np.ndarray and q.dtype is _F32 and q.shape == self._shape):
            q = self._query(query)
        q64 = self._q64
        q64[...] = q  # float32 → float64 is exact: q.astype(np.float64) without allocating
        qn2 = float(q64.dot(q64))  # _dot64(q64, q64) without np.dot's dispatch
        if self._ann is not None:
            rows = self._ann_window(q, qn2, epsilon)
        else:
            # _filter inline: with unit rows and query and ε unchanged, only the penalties
            m, s = self._m, self._s
            if m.size > SINGLE_THREAD_MAX:
                np.matmul(m, q, out=s)  # BLAS thread pool
            else:
                _rowdot(m, q, s)
            if self._off_unit or abs(qn2 - 1.0) > UNIT_SLACK or self._penalty_eps != epsilon:
                self._adjust(s, qn2, epsilon)
            elif self._penalty_on:
                s -= self._p
            best = int(s.argmax())
            top = s.item(best)
            if epsilon != self._tol_eps:
                self._tol, self._tol_eps = self._tolerance(epsilon), epsilon
            floor = top - self._tol
            s[best] = -np.inf  # the second best tells whether best is alone in the window
            if s.item(s.argmax()) < floor:
                # _exact of one row: exact_cosine of the row minus its penalties
                den = math.sqrt(self._norm2.item(best) * qn2)
                r64 = self._r64
                r64[...] = self._emb[best]
                score = 0.0 if den == 0.0 else float(r64.dot(q64)) / den
                score = min(1.0, max(-1.0, score))
                if self._fail.item(best):
                    score -= float(epsilon)
                if self._npen and self._pen.item(best):
                    score -= self._pen.item(best)
                return BestNode._of(self._ids[best], score, tau, score >= tau)
            s[best] = top
            rows = np.flatnonzero(s >= np.float32(floor))
        exact = self._exact(rows, q64, qn2, epsilon)
        best_score = exact.max()
        cand = rows[exact == best_score]
        row = int(cand[0]) if cand.size == 1 else self._break_tie(cand)
        score = float(best_score)
        return BestNode._of(self._ids[row], score, tau, score >= tau)

    def _window(self, q: np.ndarray, qn2: float, epsilon: float) -> np.ndarray:
        """Rows that can be the arg-max: float32 score ≥ float32 max − tolerance."""
        s = self._filter(q, qn2, epsilon)
        return np.flatnonzero(s >= s.max() - np.float32(self._tolerance(epsilon)))

    def _ann_window(self, q: np.ndarray, qn2: float, epsilon: float) -> np.ndarray:
        assert self._ann is not None
        n = self._n
        rows = self._ann.candidates(self._emb, self._fail, n, q)
        s32 = (self._emb[rows] @ q) * self._inv[rows]
        if qn2 > 0:
            s32 *= np.float32(1.0 / math.sqrt(qn2))
        s32 -= np.float32(epsilon) * self._fail[rows]
        if self.failure_weight:
            s32 -= self._pen[rows]
        return rows[s32 >= s32.max() - np.float32(self._tolerance(epsilon))]

    # -- Eq. 5 / Eq. 7 ----------------------------------------------------
    def attachment(self, anchor: str | None, d_max: int) -> tuple[str | None, int]:
        """(parent id, depth) of a new node (Eq. 4–5): ``anchor`` is v*, the node of an
        accepted match (warm start), ``None`` for a cold start (a new ROOT under r0).

        ``d_max`` must be at least 2: with D_max = 1 a warm start on a root would
        file a RESIDUAL at the virtual root r0, a delta with no base to patch.
        """
        if d_max < 2:
            raise ConfigError(f"d_max must be >= 2 (roots have depth 1), got {d_max}")
        if anchor is None:
            return None, 1
        row = self._row[anchor]
        depth = int(self._depth[row])
        if depth < d_max:
            return anchor, depth + 1
        p = int(self._up[row])
        return (self._ids[p - 1] if p else None), depth  # sibling of v*

    def _path(self, row: int) -> list[int]:
        """Rows of the root → ``row`` path, root first."""
        path = [row]
        while up := int(self._up[path[-1]]):
            path.append(up - 1)
        path.reverse()
        return path

    def chain(self, node_id: str) -> list[Node]:
        """The root → ``node_id`` path (Eq. 7), root first."""
        return self._nodes(self._path(self._row[node_id]))

    def chain_entries(self, node_id: str) -> tuple[list[str], list[ChainEntry]]:
        """The ids and :class:`ChainEntry` of :meth:`chain`, root first, without making the
        :class:`Node` objects (what a recall shows; the text from the cache or the source)."""
        rows = self._path(self._row[node_id])
        dets = self._details(rows)
        ids, kind, fail = self._ids, self._kind, self._fail
        return [ids[r] for r in rows], [
            ChainEntry("RESIDUAL" if kind[r] else "ROOT", "FAILURE" if fail[r] else "SUCCESS",
                       d.payload) for r, d in zip(rows, dets, strict=True)]

    def chain_ids(self, node_id: str) -> list[str]:
        """The ids of :meth:`chain`, root first (no text is read)."""
        return [self._ids[r] for r in self._path(self._row[node_id])]

    def depth_histogram(self) -> dict[int, int]:
        counts = np.bincount(self._depth[: self._n]) if self._n else np.zeros(0, np.int64)
        return {d: int(c) for d, c in enumerate(counts.tolist()) if c}

    def summary(self) -> dict[str, Any]:
        """Counts without reading any text: nodes by kind and label, consolidated ones,
        failure hits in all, and the payloads' whitespace tokens summed and counted by
        kind."""
        n = self._n
        kind, fail, tokens = self._kind[:n], self._fail[:n] > 0, self._tokens[:n]
        residual = int(np.count_nonzero(kind))
        failures = int(np.count_nonzero(fail))
        return {
            "kind": {k: v for k, v in (("ROOT", n - residual), ("RESIDUAL", residual)) if v},
            "label": {k: v for k, v in (("SUCCESS", n - failures), ("FAILURE", failures)) if v},
            "consolidated": int(np.count_nonzero(self._cons[:n])),
            "failure_hits": int(self._failures[:n].sum()),
            "tokens": {"ROOT": (int(tokens[kind == 0].sum()), n - residual),
                       "RESIDUAL": (int(tokens[kind == 1].sum()), residual)},
        }


def _rowdot(m: np.ndarray, q: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``m @ q`` into ``out``, computed on the calling thread (module doc, Threads)."""
    if m.size <= GEMV_ONE_THREAD:
        # one BLAS gemv, below OpenBLAS's threading size; ndarray.dot reaches the same
        # cblas_sgemv as np.matmul with ~1 µs less dispatch (1k × 384: 21.4 µs against 22.6)
        return m.dot(q, out=out)
    if _VECDOT is not None:  # numpy >= 2: a BLAS sdot per row, no thread pool
        return _VECDOT(m, q, out=out)
    return np.einsum("ij,j->i", m, q, out=out)  # numpy 1.26: einsum's own SIMD loop


_VECDOT = getattr(np, "vecdot", None)
