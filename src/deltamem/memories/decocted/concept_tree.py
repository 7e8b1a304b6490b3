"""Hierarchical concept tree over a lesson memory, with LLM re-ranking (paper §5, Appendix C.2).

Offline (here: whenever the bank changed, before a recall):

1. every entry (x_i, ℓ_i) gets a *concept description* d_i — topic, problem
   pattern, technique — written by the LLM at learn time (prompt
   ``prompts/decocted/concept.txt``) or, in ``deterministic`` mode, built from
   the abstracted goal and the lesson's action verbs; d_i is embedded and stored
   as an item of kind ``concept`` next to its lesson;
2. :func:`build_tree` organises the concept embeddings into an L-level tree
   by recursive bisecting k-means on normalised vectors (Euclidean distance on
   the unit sphere ranks like cosine similarity). Every internal node splits
   into b = ⌈(N/s)^(1/L)⌉ children (s: target leaf size); a node is a leaf at
   depth L, or when it holds at most s entries, or fewer than b.

Online, :class:`ConceptTreeMemory` ranks the leaves by the cosine between the
query embedding and each leaf's (normalised) centroid, pools the members of the
top n_ℓ leaves, keeps the K_cand most similar to the query, and lets the LLM
pick a variable number (1..``max_select``) of useful entries from their task
statements (prompt ``rerank.txt``, purpose ``rerank``). In ``deterministic``
mode the pick goes round-robin over the selected leaves in affinity order,
taking each leaf's most similar remaining entry, up to ``max_select``. Recall
details report the selected leaves and how many distinct leaves the recalled
entries cover (the paper's diversity measure, Figure 8b).

An LLM re-ranking answer still invalid after its repair cannot be logged in the
bank (recall is read-only): it is logged as a warning, recorded under
``details["rerank"]``, and the deterministic pick is used for that recall.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from deltamem.errors import ConfigError, ExtractionError, InvalidInputError
from deltamem.extract.structural import abstract_text
from deltamem.llm.structured import ask_json
from deltamem.memories.decocted.lessons import (
    KIND,
    LessonConfig,
    LessonMemory,
    Selection,
    load_prompt,
)
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig
from deltamem.store.items import Item
from deltamem.types import Episode, Task

__all__ = [
    "CONCEPT_KIND",
    "Candidate",
    "Concept",
    "ConceptTree",
    "ConceptTreeConfig",
    "ConceptTreeMemory",
    "TreeNode",
    "branching_factor",
    "build_tree",
    "concept_schema",
    "leaves_covered",
    "make",
    "pool_candidates",
    "rerank_schema",
    "select_round_robin",
]

log = logging.getLogger("deltamem.memory")

CONCEPT_KIND = "concept"
_N_INIT = 8  # bisection restarts: few restarts split equidistant groups badly
TOPIC_MAX = 60
FIELD_MAX = 200
_CONCEPT_VARS = frozenset({"task_description", "lesson"})
_RERANK_VARS = frozenset({"query", "candidates", "max_select"})
_WORD = re.compile(r"[a-z][a-z-]+")
_FILLER = frozenset({"a", "an", "the", "some", "it", "them", "in", "on", "to", "of", "with",
                     "from", "and", "or", "for", "at", "into", "onto", "your", "tasks", "form",
                     "put", "place", "find", "take", "get", "go", "then", "is", "are", "two"})


# -- the tree -------------------------------------------------------------------------------


def branching_factor(n: int, leaf_size: int, levels: int) -> int:
    """b = ⌈(n/s)^(1/L)⌉, computed exactly: the least integer b ≥ 1 with b^L · s ≥ n."""
    if leaf_size < 1 or levels < 1:
        raise ConfigError(f"leaf_size and levels must be >= 1, got {leaf_size}, {levels}")
    if n < 0:
        raise InvalidInputError(f"n must be >= 0, got {n}")
    b = 1
    while b**levels * leaf_size < n:
        b += 1
    return b


@dataclass(frozen=True)
class TreeNode:
    """A node: its members (indices into the built vectors), depth (root 0), normalised
    centroid, parent and children ids (``children`` empty for a leaf)."""

    id: int
    parent: int | None
    depth: int
    members: tuple[int, ...]
    centroid: np.ndarray
    children: tuple[int, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class ConceptTree:
    """An L-level concept tree (see :func:`build_tree`); node 0 is the root."""

    nodes: tuple[TreeNode, ...]
    branching: int
    levels: int
    leaf_size: int

    @property
    def leaves(self) -> list[TreeNode]:
        return [n for n in self.nodes if n.is_leaf]

    def leaf_of(self) -> dict[int, int]:
        """Member index → id of the leaf holding it."""
        return {m: leaf.id for leaf in self.leaves for m in leaf.members}

    def rank_leaves(self, query: np.ndarray) -> list[tuple[int, float]]:
        """(leaf id, cosine affinity to ``query``), best first (ties: lower id first)."""
        q = _unit(np.asarray(query, dtype=np.float64).reshape(1, -1))[0]
        scored = [(leaf.id, float(leaf.centroid @ q)) for leaf in self.leaves]
        return sorted(scored, key=lambda t: (-t[1], t[0]))

    def shape(self) -> dict[str, Any]:
        """JSON-ready summary: branching, levels, leaf count and sizes, depth of the leaves."""
        leaves = self.leaves
        return {"branching": self.branching, "levels": self.levels, "leaf_size": self.leaf_size,
                "leaves": len(leaves), "leaf_sizes": [len(n.members) for n in leaves],
                "max_depth": max((n.depth for n in leaves), default=0)}


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def build_tree(vectors: np.ndarray, *, levels: int = 2, leaf_size: int = 20,
               seed: int = 0) -> ConceptTree:
    """Recursive bisecting k-means tree over ``vectors`` (N, d) (see the module docstring).

    Raises :class:`ConfigError` for ``levels`` or ``leaf_size`` < 1 and
    :class:`InvalidInputError` for an empty or non-finite matrix.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise InvalidInputError(f"build_tree needs a non-empty (N, d) matrix, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InvalidInputError("concept embeddings contain non-finite values")
    b = branching_factor(x.shape[0], leaf_size, levels)
    x = _unit(x)
    nodes: list[dict[str, Any]] = []

    def add(members: np.ndarray, parent: int | None, depth: int) -> int:
        nid = len(nodes)
        centroid = _unit(x[members].mean(axis=0, keepdims=True))[0]
        nodes.append({"id": nid, "parent": parent, "depth": depth,
                      "members": tuple(int(m) for m in members), "centroid": centroid,
                      "children": []})
        if _splits(len(members), depth, b, levels, leaf_size):
            labels = _bisecting(x[members], b, seed)
            groups = [members[labels == c] for c in range(b)]
            groups = [g for g in groups if g.size]
            if len(groups) >= 2:
                for g in groups:
                    nodes[nid]["children"].append(add(g, nid, depth + 1))
        return nid

    add(np.arange(x.shape[0]), None, 0)
    return ConceptTree(
        nodes=tuple(TreeNode(n["id"], n["parent"], n["depth"], n["members"], n["centroid"],
                             tuple(n["children"])) for n in nodes),
        branching=b, levels=levels, leaf_size=leaf_size,
    )


def _splits(size: int, depth: int, b: int, levels: int, leaf_size: int) -> bool:
    """A node splits unless it is at depth L, holds at most s entries, or fewer than b."""
    return depth < levels and b >= 2 and size > leaf_size and size >= b


def _bisecting(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import BisectingKMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate points: fewer distinct clusters is handled
        model = BisectingKMeans(n_clusters=k, random_state=seed, n_init=_N_INIT,
                                bisecting_strategy="largest_cluster").fit(x)
    return np.asarray(model.labels_, dtype=int)


# -- retrieval ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A pooled entry: its index, its leaf, that leaf's rank and the entry's query similarity."""

    index: int
    leaf: int
    leaf_rank: int
    score: float


def pool_candidates(tree: ConceptTree, query: np.ndarray, entry_vecs: np.ndarray, *,
                    n_leaves: int, k_cand: int) -> tuple[list[Candidate], list[tuple[int, float]]]:
    """Members of the ``n_leaves`` leaves nearest ``query``, the ``k_cand`` most similar to it
    (inner product with ``entry_vecs``), best first; also returns the selected leaves."""
    ranked = tree.rank_leaves(query)[:n_leaves]
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    vecs = np.asarray(entry_vecs, dtype=np.float64)
    nodes = {n.id: n for n in tree.nodes}
    pool = [Candidate(m, lid, rank, float(vecs[m] @ q))
            for rank, (lid, _) in enumerate(ranked) for m in nodes[lid].members]
    pool.sort(key=lambda c: (-c.score, c.leaf_rank, c.index))
    return pool[:k_cand], ranked


def select_round_robin(candidates: Sequence[Candidate], cap: int,
                       min_score: float | None = None) -> list[Candidate]:
    """Round-robin over leaves (in leaf-rank order), each turn the leaf's best remaining
    candidate, until ``cap`` picks; candidates scoring below ``min_score`` are never picked."""
    by_leaf: dict[int, list[Candidate]] = {}
    for c in sorted(candidates, key=lambda c: (c.leaf_rank, -c.score, c.index)):
        if min_score is None or c.score >= min_score:
            by_leaf.setdefault(c.leaf_rank, []).append(c)
    queues = [by_leaf[r] for r in sorted(by_leaf)]
    out: list[Candidate] = []
    while len(out) < cap and any(queues):
        for q in queues:
            if q and len(out) < cap:
                out.append(q.pop(0))
    return out


def leaves_covered(tree: ConceptTree, indices: Sequence[int]) -> int:
    """Distinct leaves holding the given member indices."""
    leaf = tree.leaf_of()
    return len({leaf[i] for i in indices})


# -- concepts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Concept:
    """A concept description: topic, problem pattern, technique."""

    topic: str
    pattern: str
    technique: str

    def render(self) -> str:
        return f"Topic: {self.topic} || Problem: {self.pattern} || Technique: {self.technique}"

    def to_dict(self) -> dict[str, str]:
        return {"topic": self.topic, "pattern": self.pattern, "technique": self.technique}


def concept_schema() -> dict[str, Any]:
    """JSON schema of a concept answer (three bounded, non-empty strings)."""
    def text(limit: int) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "maxLength": limit}

    return {"type": "object",
            "properties": {"topic": text(TOPIC_MAX), "pattern": text(FIELD_MAX),
                           "technique": text(FIELD_MAX)},
            "required": ["topic", "pattern", "technique"], "additionalProperties": False}


def rerank_schema(n_candidates: int, cap: int) -> dict[str, Any]:
    """JSON schema of a re-ranking answer: 1..``cap`` candidate indices in [0, n)."""
    return {"type": "object",
            "properties": {"selected": {"type": "array",
                                        "items": {"enum": list(range(n_candidates))},
                                        "minItems": 1, "maxItems": cap}},
            "required": ["selected"], "additionalProperties": False}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def deterministic_concept(task: str, lesson: Sequence[str]) -> Concept:
    """A concept from text alone: topic = the first content words of the abstracted goal,
    pattern = the abstracted goal, technique = the distinct leading verbs of the strategy."""
    goal = abstract_text(task).lower()
    words = [w for w in _WORD.findall(goal) if w not in _FILLER]
    topic = " ".join(words[:2]) or "task"
    verbs = list(dict.fromkeys(s.split()[0].lower() for s in lesson if s.split()))
    technique = ("steps: " + ", ".join(verbs[:8])) if verbs else "no recorded steps"
    return Concept(_clip(topic, TOPIC_MAX), _clip(goal, FIELD_MAX), _clip(technique, FIELD_MAX))


# -- the memory --------------------------------------------------------------------------------


class ConceptTreeConfig(LessonConfig):
    """Concept-tree settings (paper defaults: L = 2, n_ℓ = 5, K_cand = 300; s = 20 on WebShop).

    Attributes:
        levels: L, depth of the tree.
        leaf_size: s, the target leaf size.
        n_leaves: n_ℓ, leaves pooled per recall.
        k_cand: K_cand, cap of the candidate pool.
        max_select: most entries a recall may return (the re-ranker's cap).
        min_score: deterministic pick: candidates below this query similarity are not picked.
        seed: bisecting k-means seed.
    """

    levels: int = Field(default=2, ge=1, le=6)
    leaf_size: int = Field(default=20, ge=1, le=10_000)
    n_leaves: int = Field(default=5, ge=1, le=1000)
    k_cand: int = Field(default=300, ge=1, le=10_000)
    max_select: int = Field(default=4, ge=1, le=50)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    seed: int = 0


class ConceptTreeMemory(LessonMemory):
    """Lesson memory organised as a concept tree with leaf-level retrieval. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = ConceptTreeMemory.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> mem.recall(make_episode().task).details["leaves_covered"]
        1
    """

    name = "concept-tree"
    config_class: ClassVar[type[FlatConfig]] = ConceptTreeConfig
    config: ConceptTreeConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tree_key: tuple[str, ...] | None = None
        self._tree: ConceptTree | None = None
        self._tree_entries: list[Item] = []

    # -- learn -----------------------------------------------------------------------------
    def concept(self, task: str, structured: dict[str, Any], content: str) -> Concept:
        """The concept description of an entry (LLM or deterministic, by ``mode``).

        Raises :class:`ExtractionError` when the LLM output stays invalid.
        """
        if self.config.mode == "llm":
            prompt = load_prompt("concept", _CONCEPT_VARS).substitute(
                task_description=task, lesson=content)
            obj = ask_json(self._need_llm(), role="decocted_concept", purpose="extract",
                           prompt=prompt, schema=concept_schema(),
                           shape='{"topic": "...", "pattern": "...", "technique": "..."}',
                           max_tokens=300)
            return Concept(_clip(obj["topic"], TOPIC_MAX), _clip(obj["pattern"], FIELD_MAX),
                           _clip(obj["technique"], FIELD_MAX))
        return deterministic_concept(task, list(structured.get("strategy") or []))

    def _extra_items(self, entry: Item, episode: Episode) -> list[Item]:
        payload = entry.payload
        c = self.concept(str(payload["task"]), dict(payload.get("structured") or {}),
                         str(payload["content"]))
        vec = self._need_embedder().embed_passages([c.render()])[0]
        return [Item(system=self.name, kind=CONCEPT_KIND, key=entry.id, text=c.render(),
                     payload=c.to_dict(), embedding=vec, episode_id=episode.id)]

    # -- the tree --------------------------------------------------------------------------
    def tree(self) -> tuple[ConceptTree | None, list[Item]]:
        """The current tree and the entries its member indices refer to (rebuilt when the bank
        changed; ``None`` for an empty bank)."""
        items = self._items()
        concepts = {i.key: i for i in items if i.kind == CONCEPT_KIND and i.embedding is not None}
        entries = [i for i in items if i.kind == KIND and i.embedding is not None
                   and i.id in concepts]
        key = tuple(e.id for e in entries)
        if key != self._tree_key:
            self._tree = None
            if entries:
                vecs = np.stack([np.asarray(concepts[e.id].embedding) for e in entries])
                self._tree = build_tree(vecs, levels=self.config.levels,
                                        leaf_size=self.config.leaf_size, seed=self.config.seed)
            self._tree_entries = entries
            self._tree_key = key
        return self._tree, self._tree_entries

    def _entries(self) -> list[Item]:
        return self.tree()[1]

    def _select(self, task: Task, query: np.ndarray, entries: Sequence[Item]) -> Selection:
        tree, _ = self.tree()
        assert tree is not None  # entries is not empty
        vecs = np.stack([np.asarray(e.embedding, dtype=np.float64) for e in entries])
        cands, ranked = pool_candidates(tree, query, vecs, n_leaves=self.config.n_leaves,
                                        k_cand=self.config.k_cand)
        details: dict[str, Any] = {
            "tree": {k: v for k, v in tree.shape().items() if k != "leaf_sizes"},
            "selected_leaves": [{"leaf": lid, "affinity": a} for lid, a in ranked],
            "candidates": len(cands),
        }
        picked: list[Candidate]
        if self.config.mode == "llm":
            try:
                picked = self._rerank(task, cands, entries)
                details["rerank"] = "llm"
            except ExtractionError as e:
                log.warning("concept-tree re-ranking rejected, using the round-robin pick: %s", e)
                details["rerank"] = f"rejected ({e}); round-robin pick used"
                picked = select_round_robin(cands, self.config.max_select, self.config.min_score)
        else:
            picked = select_round_robin(cands, self.config.max_select, self.config.min_score)
            details["rerank"] = "round-robin"
        details["leaves_covered"] = len({c.leaf for c in picked})
        details["picked_leaves"] = [c.leaf for c in picked]
        return Selection(tuple(c.index for c in picked), tuple(c.score for c in picked), details)

    def _rerank(self, task: Task, cands: Sequence[Candidate],
                entries: Sequence[Item]) -> list[Candidate]:
        """Let the LLM pick 1..``max_select`` candidates by their task statements.

        Repeated indices in the answer are dropped (first occurrence kept).
        """
        cap = min(self.config.max_select, len(cands))
        listing = "\n".join(f"{n}: {_clip(str(entries[c.index].payload.get('task', '')), 200)}"
                            for n, c in enumerate(cands))
        prompt = load_prompt("rerank", _RERANK_VARS).substitute(
            query=task.goal.strip(), candidates=listing, max_select=str(cap))
        obj = ask_json(self._need_llm(), role="decocted_rerank", purpose="rerank", prompt=prompt,
                       schema=rerank_schema(len(cands), cap), shape='{"selected": [0, 3, ...]}',
                       max_tokens=16 + 6 * cap)
        order = list(dict.fromkeys(int(i) for i in obj["selected"]))
        return [cands[i] for i in order]

    # -- stats -----------------------------------------------------------------------------
    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        out = super()._stats_extra(items)
        tree, _ = self.tree()
        out["concepts"] = sum(1 for i in items if i.kind == CONCEPT_KIND)
        out["tree"] = None if tree is None else tree.shape()
        return out


make = make_factory(ConceptTreeMemory)
