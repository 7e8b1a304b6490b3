"""Clustering-based memory consolidation (paper §3.2, Appendix C.2).

Each entry i has the embedding of its task x_i and of its lesson ℓ_i; they are
mixed into ``e_i = normalize((1 − α)·emb(x_i) + α·emb(ℓ_i))`` (α = 0.5 by
default), the N entries are partitioned into N' clusters by standard k-means
(scikit-learn, fixed seed), and for each cluster the member nearest its
centroid is kept. The result keeps exactly ``min(N', N)`` distinct entries.

When the data have fewer distinct points than N', k-means can leave a cluster
empty; that cluster's representative is then the nearest entry to its centroid
not already kept, so the kept count is still exactly N' (recorded in
:attr:`Consolidation.filled`).

:func:`consolidate_bank` applies it to a stored lesson bank and writes the kept
entries to a new bank (the ``deltamem decocted consolidate`` command).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, InvalidInputError, StoreError

__all__ = [
    "DEFAULT_ALPHA",
    "BankConsolidation",
    "Consolidation",
    "KeptEntry",
    "consolidate",
    "consolidate_bank",
    "mix_embeddings",
]

DEFAULT_ALPHA = 0.5
"""Weight of the lesson embedding in the consolidation embedding (paper: 0.5)."""


def mix_embeddings(task_vecs: np.ndarray, lesson_vecs: np.ndarray,
                   alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Rows ``normalize((1 − α)·task + α·lesson)`` (float64; zero rows stay zero).

    Raises :class:`ConfigError` for α outside [0, 1] and
    :class:`InvalidInputError` for mismatched or non-finite inputs.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be in [0, 1], got {alpha!r}")
    t = np.asarray(task_vecs, dtype=np.float64)
    le = np.asarray(lesson_vecs, dtype=np.float64)
    if t.ndim != 2 or t.shape != le.shape:
        raise InvalidInputError(f"task and lesson embeddings must be 2-D of one shape, got "
                                f"{t.shape} and {le.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(le))):
        raise InvalidInputError("embeddings contain non-finite values")
    mixed = (1.0 - alpha) * t + alpha * le
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mixed / norms


@dataclass(frozen=True)
class Consolidation:
    """What :func:`consolidate` decided.

    Attributes:
        kept: indices of the kept entries, one per cluster, in cluster order.
        labels: cluster of every entry (length N).
        centroids: the N' cluster centres, shape (N', d).
        sizes: members per cluster.
        distances: distance of each kept entry to its cluster's centroid.
        filled: clusters that ended up empty and got the nearest unkept entry.
    """

    kept: tuple[int, ...]
    labels: tuple[int, ...]
    centroids: np.ndarray
    sizes: tuple[int, ...]
    distances: tuple[float, ...]
    filled: tuple[int, ...] = ()


def consolidate(vectors: np.ndarray, target: int, *, seed: int = 0,
                n_init: int = 4) -> Consolidation:
    """Partition ``vectors`` (N, d) into ``target`` k-means clusters; keep the member nearest
    each centroid.

    With N ≤ ``target`` every entry is kept (each its own cluster). Raises
    :class:`ConfigError` for ``target`` < 1 and :class:`InvalidInputError` for
    an empty or malformed matrix.
    """
    if target < 1:
        raise ConfigError(f"the consolidation target size must be >= 1, got {target}")
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise InvalidInputError(f"consolidate needs a non-empty (N, d) matrix, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InvalidInputError("embeddings contain non-finite values")
    n = x.shape[0]
    if n <= target:
        return Consolidation(kept=tuple(range(n)), labels=tuple(range(n)), centroids=x.copy(),
                             sizes=(1,) * n, distances=(0.0,) * n)
    from sklearn.cluster import KMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "fewer distinct points than clusters" is handled below
        km = KMeans(n_clusters=target, n_init=n_init, random_state=seed).fit(x)
    labels = km.labels_.astype(int)
    centroids = np.asarray(km.cluster_centers_, dtype=np.float64)
    dist = np.linalg.norm(x[:, None, :] - centroids[None, :, :], axis=2)  # (N, N')
    kept: list[int] = []
    distances: list[float] = []
    empty: list[int] = []
    for c in range(target):
        members = np.flatnonzero(labels == c)
        if members.size == 0:
            empty.append(c)
            kept.append(-1)
            distances.append(0.0)
            continue
        best = int(members[np.argmin(dist[members, c])])
        kept.append(best)
        distances.append(float(dist[best, c]))
    taken = {k for k in kept if k >= 0}
    for c in empty:
        order = [int(i) for i in np.argsort(dist[:, c], kind="stable") if int(i) not in taken]
        kept[c] = order[0]
        distances[c] = float(dist[order[0], c])
        taken.add(order[0])
    sizes = tuple(int(np.sum(labels == c)) for c in range(target))
    return Consolidation(kept=tuple(kept), labels=tuple(int(v) for v in labels),
                         centroids=centroids, sizes=sizes, distances=tuple(distances),
                         filled=tuple(empty))


# -- a bank, consolidated -------------------------------------------------------------------


@dataclass(frozen=True)
class KeptEntry:
    """One entry kept by :func:`consolidate_bank`: its id, task, cluster size and distance."""

    id: str
    task: str
    cluster: int
    cluster_size: int
    distance: float


@dataclass(frozen=True)
class BankConsolidation:
    """What :func:`consolidate_bank` wrote: the kept entries (cluster order) out of ``total``."""

    kept: tuple[KeptEntry, ...]
    total: int
    out: str


def consolidate_bank(source: str | Path, out: str | Path, *, embedder: Embedder, size: int,
                     alpha: float = DEFAULT_ALPHA, seed: int = 0) -> BankConsolidation:
    """Write to ``out`` a copy of the lesson bank ``source`` keeping ``size`` entries (§3.2).

    ``source`` is a bank of ``lessons``, ``lessons-raw``, ``lessons-kmeans`` or
    ``concept-tree`` (entries of kind ``lesson``); ``embedder`` must be the one the
    bank was built with (its task embeddings are reused, the contents are
    embedded). The new bank records the same system, embedder and configuration
    and holds the kept entries with their companion items (concept descriptions).
    ``out`` appears whole or not at all: the bank is built under ``out``'s name +
    ``.consolidating`` and linked into place when complete (a consolidation killed meanwhile
    leaves no ``out``; the next run removes the temporary file and starts over).
    Raises :class:`StoreError` when ``out`` exists or a bank cannot be read,
    :class:`EmbedderMismatchError` for another embedder and :class:`InvalidInputError`
    for a bank without entries.
    """
    from deltamem.store.factory import new_bank_file
    from deltamem.store.items import ItemStore

    out_path = Path(out)
    if str(out) != ":memory:" and out_path.exists():
        raise StoreError(f"{out_path} already exists; consolidation writes a new bank")
    src = ItemStore(source, readonly=True)
    try:
        src.check_embedder(embedder.name, embedder.dim)
        meta = src.meta()
        items = src.items()
    finally:
        src.close()
    entries = [i for i in items if i.kind == "lesson" and i.embedding is not None]
    if not entries:
        raise InvalidInputError(f"bank {source} holds no lesson entries")
    tasks = np.stack([np.asarray(e.embedding, dtype=np.float64) for e in entries])
    contents = embedder.embed_passages([str(e.payload.get("content", e.text)) for e in entries])
    result = consolidate(mix_embeddings(tasks, contents, alpha), size, seed=seed)
    kept_ids = {entries[i].id for i in result.kept}

    def write(path: str | Path) -> None:
        dst = ItemStore(path)
        try:
            dst.init_meta(system=str(meta.get("system", "lessons")), embedder_name=embedder.name,
                          embedder_dim=embedder.dim, config=dict(meta.get("config") or {}))
            with dst.transaction():
                for item in items:
                    if item.id in kept_ids or (item.kind != "lesson" and item.key in kept_ids):
                        dst.insert(item)
        finally:
            dst.close()

    if str(out) == ":memory:":
        write(out)
    else:
        # built whole under another name, then linked into place: a process killed meanwhile
        # leaves nothing at ``out`` (a re-run starts over), never a bank with part of the kept
        # entries
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with new_bank_file(out_path, suffix=".consolidating",
                           doing="consolidate into") as build:
            write(build)
    kept = tuple(
        KeptEntry(id=entries[i].id, task=str(entries[i].payload.get("task", "")), cluster=c,
                  cluster_size=result.sizes[c], distance=result.distances[c])
        for c, i in enumerate(result.kept)
    )
    return BankConsolidation(kept=kept, total=len(entries), out=str(out_path))
