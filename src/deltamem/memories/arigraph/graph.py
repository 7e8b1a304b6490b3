"""The AriGraph world model (paper §2): semantic triplets plus episodic vertices and edges.

``G = (V_s, E_s, V_e, E_e)``:

* semantic vertices ``V_s`` are the subjects and objects of the triplets and
  semantic edges ``E_s`` the triplets themselves, held in a
  :class:`networkx.MultiDiGraph` (edge key = relation, so two different
  relations between the same vertices coexist);
* an episodic vertex is one observation (:class:`Observation`), and its
  episodic edge links it to every triplet extracted from that observation
  (kept as the vertex's ``triplets``, also after a triplet left ``E_s``).

Updating (:meth:`AriGraph.update`): remove the outdated triplets, add the new
ones, add the episodic vertex, and record a :class:`Growth` row (triplets
added and replaced at that step; the paper's Figure 5).

Retrieval (Algorithm 1): :meth:`AriGraph.semantic_search` (Algorithm 2, a BFS
of depth ``d`` and width ``w`` over embedding-ranked edges) per query, then
:meth:`AriGraph.episodic_search` ranks observations by Eq. 1.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, InvalidInputError, StoreError
from deltamem.memories.arigraph.triplets import Triplet, normalize_entity, unique

__all__ = ["AriGraph", "Growth", "Observation", "episodic_score", "networkx"]


def networkx() -> Any:
    """The ``networkx`` module; :class:`ConfigError` naming the package when it is missing."""
    try:
        import networkx as nx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ConfigError("AriGraph needs the 'networkx' package: pip install networkx") from e
    return nx


@dataclass(frozen=True)
class Observation:
    """An episodic vertex: the observation of one step and the triplets extracted from it."""

    step: int
    text: str
    triplets: tuple[Triplet, ...] = ()
    action: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "text": self.text, "action": self.action,
                "triplets": [t.to_list() for t in self.triplets]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Observation:
        return cls(step=int(d["step"]), text=str(d["text"]), action=str(d.get("action", "")),
                   triplets=tuple(Triplet.from_obj(t) for t in d["triplets"]))


@dataclass(frozen=True)
class Growth:
    """What one update did: triplets ``added`` (new to ``E_s``) and ``replaced`` (removed as
    outdated), and the sizes after it."""

    step: int
    added: int
    replaced: int
    triplets: int
    vertices: int

    def to_dict(self) -> dict[str, int]:
        return {"step": self.step, "added": self.added, "replaced": self.replaced,
                "triplets": self.triplets, "vertices": self.vertices}


def episodic_score(n_matched: int, n_total: int) -> float:
    """Eq. 1: ``n / max(N, 1) * log2(max(N, 1))``; zero for observations of one triplet.

    >>> episodic_score(2, 4)
    1.0
    >>> episodic_score(1, 1)
    0.0
    """
    if n_matched < 0 or n_total < 0 or n_matched > max(n_total, 0):
        raise InvalidInputError(f"need 0 <= n <= N, got n={n_matched}, N={n_total}")
    big = max(n_total, 1)
    if n_total == 1:
        return 0.0
    return n_matched / big * math.log2(big)


@dataclass
class AriGraph:
    """A mutable memory graph (see the module docstring).

    ``observations`` are the episodic vertices in insertion order; ``growth``
    has one row per :meth:`update`.
    """

    observations: list[Observation] = field(default_factory=list)
    growth: list[Growth] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.g = networkx().MultiDiGraph()
        self._emb: dict[str, np.ndarray] = {}

    # -- semantic memory --------------------------------------------------------------------
    def triplets(self) -> list[Triplet]:
        """Every semantic edge, in insertion order."""
        return [Triplet(u, k, v) for u, v, k in self.g.edges(keys=True)]

    def __contains__(self, t: object) -> bool:
        return isinstance(t, Triplet) and self.g.has_edge(t.subject, t.object, key=t.relation)

    def __len__(self) -> int:
        return int(self.g.number_of_edges())

    @property
    def vertices(self) -> list[str]:
        return list(self.g.nodes)

    def add(self, t: Triplet) -> bool:
        """Add ``t``; False when it was already there."""
        if t in self:
            return False
        self.g.add_edge(t.subject, t.object, key=t.relation)
        return True

    def remove(self, t: Triplet) -> bool:
        """Remove ``t`` (and vertices left without edges); False when it was absent."""
        if t not in self:
            return False
        self.g.remove_edge(t.subject, t.object, key=t.relation)
        for v in t.vertices:
            if v in self.g and self.g.degree(v) == 0:
                self.g.remove_node(v)
        return True

    def incident(self, vertices: Iterable[str]) -> list[Triplet]:
        """The semantic edges touching any of ``vertices`` (the 1-hop neighbourhood E_rel)."""
        out: list[Triplet] = []
        for v in dict.fromkeys(normalize_entity(x) for x in vertices):
            if v not in self.g:
                continue
            out.extend(Triplet(v, k, o) for _, o, k in self.g.out_edges(v, keys=True))
            out.extend(Triplet(s, k, v) for s, _, k in self.g.in_edges(v, keys=True))
        return unique(out)

    def update(
        self,
        step: int,
        observation: str,
        new: Sequence[Triplet],
        outdated: Iterable[Triplet] = (),
        *,
        action: str = "",
    ) -> Growth:
        """Apply one observation: drop ``outdated``, add ``new``, add the episodic vertex.

        A triplet both outdated and new stays. Returns (and records) the growth row.
        """
        new = unique(new)
        keep = set(new)
        replaced = sum(self.remove(t) for t in unique(outdated) if t not in keep)
        added = sum(self.add(t) for t in new)
        self.observations.append(Observation(step, observation, tuple(new), action))
        row = Growth(step, added, replaced, len(self), self.g.number_of_nodes())
        self.growth.append(row)
        return row

    # -- retrieval ----------------------------------------------------------------------------
    def _embed(self, embedder: Embedder, triplets: Sequence[Triplet]) -> np.ndarray:
        missing = [t.text for t in triplets if t.text not in self._emb]
        if missing:
            vecs = np.asarray(embedder.embed_passages(missing), dtype=np.float32)
            for text, vec in zip(missing, vecs, strict=True):
                n = float(np.linalg.norm(vec))
                self._emb[text] = vec / n if n > 0 else vec
        return np.stack([self._emb[t.text] for t in triplets])

    def embed_and_retrieve(
        self, embedder: Embedder, query: str, candidates: Sequence[Triplet], w: int
    ) -> list[Triplet]:
        """The ``w`` candidates with the highest dot product of normalised embeddings with
        ``query`` (ties: earlier candidate first)."""
        if not candidates or w <= 0:
            return []
        q = np.asarray(embedder.embed_queries([query]), dtype=np.float32).reshape(-1)
        n = float(np.linalg.norm(q))
        q = q / n if n > 0 else q
        scores = self._embed(embedder, candidates) @ q
        order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), i))
        return [candidates[i] for i in order[:w]]

    def semantic_search(self, embedder: Embedder, query: str, d: int = 2,
                        w: int = 5) -> list[Triplet]:
        """Algorithm 2: BFS from ``query`` of depth ``d`` and width ``w``.

        The queue starts with the query at distance 0. A dequeued item at
        distance ``>= d`` is skipped; otherwise its top-``w`` edges (by
        :meth:`embed_and_retrieve`) are added to the result and their incident
        vertices not yet seen are enqueued at distance + 1. Candidates of a
        vertex are its incident edges; candidates of the free-text query (or of
        a query that is not a vertex) are all edges. Edges already retrieved
        are not candidates again, so each expansion brings new edges. Returns
        the edges in the order they were retrieved.
        """
        if d < 0 or w < 0:
            raise ConfigError(f"search depth and width must be >= 0, got d={d}, w={w}")
        found: list[Triplet] = []
        got: set[Triplet] = set()
        queue: deque[str] = deque([query])
        dist: dict[str, int] = {query: 0}
        while queue:
            q = queue.popleft()
            if dist[q] >= d:
                continue
            key = normalize_entity(q)
            pool = self.incident([key]) if key in self.g else self.triplets()
            pool = [t for t in pool if t not in got]
            for t in self.embed_and_retrieve(embedder, q, pool, w):
                got.add(t)
                found.append(t)
                for v in t.vertices:
                    if v not in dist:
                        dist[v] = dist[q] + 1
                        queue.append(v)
        return found

    def episodic_search(self, triplets: Iterable[Triplet], k: int = 2
                        ) -> list[tuple[Observation, float]]:
        """Eq. 1 over every episodic vertex; the ``k`` best with a positive score.

        Ties go to the more recent observation.
        """
        if k < 0:
            raise ConfigError(f"k must be >= 0, got {k}")
        query = set(triplets)
        scored = []
        for i, obs in enumerate(self.observations):
            own = set(obs.triplets)
            s = episodic_score(len(own & query), len(own))
            if s > 0:
                scored.append((s, i, obs))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        return [(obs, s) for s, _, obs in scored[:k]]

    def search(self, embedder: Embedder, queries: Iterable[str], *, d: int = 2, w: int = 5,
               k: int = 2) -> tuple[list[Triplet], list[tuple[Observation, float]]]:
        """Algorithm 1: the union of the semantic searches of ``queries``, then episodic search."""
        found: list[Triplet] = []
        for q in dict.fromkeys(q for q in queries if q.strip()):
            found.extend(self.semantic_search(embedder, q, d, w))
        found = unique(found)
        return found, self.episodic_search(found, k)

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: triplets, observations (episodic vertices + edges) and growth."""
        return {
            "triplets": [t.to_list() for t in self.triplets()],
            "observations": [o.to_dict() for o in self.observations],
            "growth": [g.to_dict() for g in self.growth],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AriGraph:
        """Rebuild a graph written by :meth:`to_dict` (:class:`StoreError` when malformed)."""
        try:
            graph = cls(
                observations=[Observation.from_dict(o) for o in data.get("observations", ())],
                growth=[Growth(**g) for g in data.get("growth", ())],
            )
            for t in data.get("triplets", ()):
                graph.add(Triplet.from_obj(t))
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(f"malformed AriGraph data: {e!r}") from e
        return graph

    def copy(self) -> AriGraph:
        return AriGraph.from_dict(self.to_dict())

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON; returns the path."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False), encoding="utf-8")
        return p

    def to_networkx(self) -> Any:
        """A plain ``MultiDiGraph`` of both memories for export.

        Semantic vertices have ``kind="semantic"``; each observation is a vertex
        ``obs:<step>`` with ``kind="episodic"`` and its text; semantic edges
        carry ``relation``; an episodic edge becomes an edge
        ``obs:<step> → subject`` with ``relation="episodic"`` and the linked
        triplet's text in ``triplet``.
        """
        nx = networkx()
        out = nx.MultiDiGraph()
        for v in self.g.nodes:
            out.add_node(v, kind="semantic")
        for t in self.triplets():
            out.add_edge(t.subject, t.object, key=t.relation, relation=t.relation)
        for i, obs in enumerate(self.observations):
            node = f"obs:{i}"
            out.add_node(node, kind="episodic", step=obs.step, text=obs.text, action=obs.action)
            for t in obs.triplets:
                if t.subject not in out:
                    out.add_node(t.subject, kind="semantic")
                out.add_edge(node, t.subject, relation="episodic", triplet=t.text)
        return out

    def to_graphml(self, path: str | Path) -> Path:
        """Write :meth:`to_networkx` as GraphML; returns the path."""
        p = Path(path)
        networkx().write_graphml(self.to_networkx(), p)
        return p
