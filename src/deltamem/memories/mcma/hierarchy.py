"""Hierarchical abstraction of memories (§3.4 Eq. 8–9, Appendix A.7). Pure functions.

Levels (Eq. 8, L = 2): H0 raw (pruned) trajectories, H1 episodic memories written by
the copilot, H2 abstract scripts. H2 is built from H1 as A.7 describes:

1. each H1 entry is embedded by its name + description (done by the caller);
2. :func:`knn_graph`: cosine k-NN graph (k = 10), only the k strongest edges per entry
   (``networkx``);
3. :func:`cluster`: hierarchical (agglomerative, average linkage, cosine distance)
   clustering constrained to that graph's edges (scikit-learn's ``connectivity``), cut
   at ``distance``. The paper gives no cut; a fixed cosine cut means something else for
   every embedder and even for every copilot (the bundled MiniLM puts rule-copilot entries
   of different task types at median distance 0.55, LLM-copilot entries at 0.75), so the
   caller may instead cut at a quantile of the bank's own pairwise distances
   (:func:`distance_quantile`), which no change of scale moves;
4. :func:`fuse`: intra-cluster fusion: members of a cluster whose cosine is at least
   ``fuse_cos`` are one redundant group; the member nearest the group's centroid stands
   for it and inherits every member's sources;
5. :func:`abstraction_groups`: inter-cluster abstraction: the fused entries are clustered
   again at a coarser cut; each resulting group becomes one H2 script (written by the
   caller's abstractor: rule or LLM).

Reuse (Eq. 9, :func:`choose_level`): ``m_reuse = argmax_{m ∈ H_ℓ} sim(τ_new, m)`` with the
level picked by how close the new task is to what is stored: a near-identical task reuses
H0 (its raw trajectory), a similar one H1 (detailed episodic memory), a distant one H2
(abstract scripts). The paper leaves this choice to a manual rule (its Limitations); the
bands are :class:`ReuseBands`. :func:`char_similarity` is the character-level matching of
task descriptions the paper uses for Top-N retrieval.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from deltamem.errors import ConfigError

__all__ = [
    "DEFAULT_K",
    "ReuseBands",
    "abstraction_groups",
    "char_similarity",
    "choose_level",
    "cluster",
    "distance_quantile",
    "fuse",
    "knn_graph",
    "pairwise_distances",
    "top_n",
]

DEFAULT_K = 10
"""Neighbours kept per entry in the k-NN graph (Appendix A.7)."""


def _unit(vecs: np.ndarray) -> np.ndarray:
    v = np.asarray(vecs, dtype=np.float64)
    if v.ndim != 2:
        raise ConfigError(f"embeddings must be 2-D, got shape {v.shape}")
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return v / n


def knn_graph(vecs: np.ndarray, k: int = DEFAULT_K) -> nx.Graph:
    """Undirected graph over rows of ``vecs``: each node linked to its ``k`` most
    cosine-similar other nodes (edge attribute ``weight`` = cosine)."""
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    u = _unit(vecs)
    g = nx.Graph()
    g.add_nodes_from(range(len(u)))
    if len(u) < 2:
        return g
    sims = u @ u.T
    np.fill_diagonal(sims, -np.inf)
    kk = min(k, len(u) - 1)
    for i in range(len(u)):
        for j in np.argsort(-sims[i], kind="stable")[:kk]:
            g.add_edge(i, int(j), weight=float(sims[i, j]))
    return g


def pairwise_distances(vecs: np.ndarray) -> np.ndarray:
    """Cosine distance of every pair of rows ``i < j``, in ``np.triu_indices`` order."""
    u = _unit(vecs)
    return (1.0 - u @ u.T)[np.triu_indices(len(u), 1)]


def distance_quantile(vecs: np.ndarray, q: float) -> float:
    """The ``q``-quantile of the pairwise cosine distances between rows of ``vecs``, as a
    cut for :func:`cluster` (at least 1e-6, so identical rows still give a valid cut;
    1.0 with fewer than two rows)."""
    if not 0.0 < q < 1.0:
        raise ConfigError(f"quantile must be in (0, 1), got {q}")
    pairs = pairwise_distances(vecs)
    if not len(pairs):
        return 1.0
    return float(min(2.0, max(1e-6, np.quantile(pairs, q))))


def cluster(vecs: np.ndarray, graph: nx.Graph | None = None, *, distance: float = 0.5
            ) -> list[int]:
    """Cluster label of each row: agglomerative clustering (average linkage, cosine
    distance) over the k-NN ``graph``'s edges, cut at cosine ``distance``."""
    from sklearn.cluster import AgglomerativeClustering

    n = len(vecs)
    if n == 0:
        return []
    if n == 1:
        return [0]
    if not 0.0 < distance <= 2.0:
        raise ConfigError(f"distance must be in (0, 2], got {distance}")
    u = _unit(vecs)
    graph = graph if graph is not None else knn_graph(u)
    conn = nx.to_scipy_sparse_array(graph, nodelist=range(n), weight=None, format="csr")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the number of connected components ..." notices
        model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                        distance_threshold=distance, connectivity=conn)
        labels = model.fit_predict(u)
    # relabel in order of first appearance (deterministic names)
    order: dict[int, int] = {}
    return [order.setdefault(int(x), len(order)) for x in labels]


@dataclass(frozen=True)
class Fused:
    """An intra-cluster group: its representative row and every member row."""

    representative: int
    members: tuple[int, ...]
    cluster: int


def fuse(vecs: np.ndarray, labels: Sequence[int], *, fuse_cos: float = 0.9) -> list[Fused]:
    """Intra-cluster fusion (see the module docstring); groups in order of first member."""
    u = _unit(vecs)
    out: list[Fused] = []
    for c in dict.fromkeys(labels):
        rows = [i for i, x in enumerate(labels) if x == c]
        left = list(rows)
        while left:
            seed = left[0]
            group = [seed] + [i for i in left[1:] if float(u[i] @ u[seed]) >= fuse_cos]
            centroid = u[group].mean(axis=0)
            rep = max(group, key=lambda i: (float(u[i] @ centroid), -i))
            out.append(Fused(rep, tuple(group), c))
            left = [i for i in left if i not in group]
    return out


def abstraction_groups(vecs: np.ndarray, fused: Sequence[Fused], *, distance: float = 0.8,
                       k: int = DEFAULT_K) -> list[list[Fused]]:
    """Inter-cluster abstraction: fused entries (by their members' centroid) clustered at
    the coarser cut ``distance``; each returned group becomes one H2 script."""
    if not fused:
        return []
    u = _unit(vecs)
    cents = np.stack([u[list(f.members)].mean(axis=0) for f in fused])
    labels = cluster(cents, knn_graph(cents, k), distance=distance)
    groups: dict[int, list[Fused]] = {}
    for f, x in zip(fused, labels, strict=True):
        groups.setdefault(x, []).append(f)
    return list(groups.values())


# -- reuse --------------------------------------------------------------------------------


def char_similarity(a: str, b: str) -> float:
    """Character-level similarity of two task descriptions in [0, 1] (difflib ratio of the
    lower-cased, whitespace-normalised texts)."""
    x, y = " ".join(a.lower().split()), " ".join(b.lower().split())
    if not x or not y:
        return 0.0
    return difflib.SequenceMatcher(None, x, y, autojunk=False).ratio()


def top_n(query: str, texts: Sequence[str], n: int) -> list[tuple[int, float]]:
    """The ``n`` best ``(index, similarity)`` by :func:`char_similarity` (ties: earlier)."""
    scored = [(i, char_similarity(query, t)) for i, t in enumerate(texts)]
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored[:n]


@dataclass(frozen=True)
class ReuseBands:
    """Similarity bands of Eq. 9's level choice (character-level similarity of tasks).

    ``h0``: at or above, the new task is near-identical to a stored one: its raw
    trajectory (H0) is reused; ``h1``: at or above, the detailed episodic memory (H1);
    below, the abstract scripts (H2).
    """

    h0: float = 0.95
    h1: float = 0.6

    def __post_init__(self) -> None:
        if not 0.0 <= self.h1 <= self.h0 <= 1.0:
            raise ConfigError(f"reuse bands need 0 <= h1 <= h0 <= 1, got h1={self.h1}, "
                              f"h0={self.h0}")


def choose_level(best_similarity: float, bands: ReuseBands, *, have_h2: bool = True) -> int:
    """The abstraction level ℓ of Eq. 9 for a task whose best stored match scores
    ``best_similarity`` (H2 only when it exists, else H1)."""
    if best_similarity >= bands.h0:
        return 0
    if best_similarity >= bands.h1 or not have_h2:
        return 1
    return 2
