"""AriGraph as a step-level memory system (paper §2; registry name ``arigraph``).

Per observation (:meth:`AriGraphMemory._ingest`):

1. the current location is read from the observation (else kept from the
   previous step) and a move between two known places adds the spatial
   triplet ``(new place, is <dir> of, old place)``;
2. triplets are extracted (LLM or rules, by ``mode``);
3. the 1-hop neighbourhood of their vertices is checked for outdated
   triplets, which are removed; the new triplets and the episodic vertex are
   added (growth recorded per step).

Retrieval (:meth:`AriGraphMemory._retrieve`): queries are the entities of the
triplets just extracted, plus the agent's plan lines (else the goal);
Algorithm 1 returns triplets (BFS with depth ``d``, width ``w``) and the ``k``
best observations by Eq. 1. The :class:`~deltamem.types.Recall` carries the
text block for the prompt and, in ``details``, the location, every spatial
triplet and the unexplored exits (Algorithm 3); :meth:`AriGraphMemory.routes` turns the
spatial triplets into the ``go to <place>`` moves the Ariadne agent offers.

Extraction and replacement follow ``mode`` (``llm``: the paper's LLM calls;
``deterministic``: :class:`RuleTripletExtractor` / :class:`RuleOutdatedDetector`),
unless ``extraction`` or ``replacement`` picks one explicitly. The cheaper
configuration for small local models keeps the paper's LLM triplet extraction
but detects outdated triplets by rules (``replacement="rules"``: one LLM call
less per step; the rules cover what TextWorld changes -- where an item is and
open/closed/locked states); ``mode="deterministic"`` (the runner's default
with ``extractor = "structural"``) leaves only the agent's planner and
decision calls.

The bank holds one graph per scope key (task id, or ``global``) as an item of
kind ``graph`` whose payload is :meth:`AriGraph.to_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from deltamem.errors import ConfigError, ExtractionError, StoreError
from deltamem.memories.arigraph.base import Session, StepConfig, StepMemory
from deltamem.memories.arigraph.extract import (
    LLMOutdatedDetector,
    LLMTripletExtractor,
    OutdatedDetector,
    RuleOutdatedDetector,
    RuleTripletExtractor,
    TripletExtractor,
)
from deltamem.memories.arigraph.graph import AriGraph
from deltamem.memories.arigraph.navigation import (
    all_unexplored_exits,
    goto_routes,
    known_locations,
    locate,
    spatial_direction,
    spatial_triplet,
)
from deltamem.memories.arigraph.triplets import Triplet, unique
from deltamem.memories.factory import make_factory
from deltamem.memories.plan import Write
from deltamem.store.items import Item, ItemStore
from deltamem.types import Change, Episode, Recall, RecallItem

__all__ = ["AriGraphConfig", "AriGraphMemory", "load_graphs", "make"]

GRAPH_KIND = "graph"
_OBS_CHARS = 600


class AriGraphConfig(StepConfig):
    """AriGraph settings (on top of :class:`StepConfig`).

    Attributes:
        depth: semantic search depth ``d``.
        width: semantic search width ``w`` (edges kept per expansion).
        top_k: episodic vertices returned ``k``.
        max_queries: most retrieval queries per step.
        extraction: ``llm`` or ``rules`` triplet extraction; ``None``: by ``mode``.
        replacement: ``llm`` or ``rules`` outdated-triplet detection; ``None``: by ``mode``.
        max_triplets: most triplets the LLM extractor may answer per observation.
    """

    depth: int = Field(default=2, ge=0)
    width: int = Field(default=5, ge=0)
    top_k: int = Field(default=2, ge=0)
    max_queries: int = Field(default=12, ge=1)
    extraction: Literal["llm", "rules"] | None = None
    replacement: Literal["llm", "rules"] | None = None
    max_triplets: int = Field(default=12, ge=1, le=50)


@dataclass
class _State:
    graph: AriGraph
    location: str | None = None
    last_new: list[Triplet] = field(default_factory=list)
    added: int = 0
    replaced: int = 0
    observed: int = 0


class AriGraphMemory(StepMemory):
    """The AriGraph world model behind the step-level memory protocol (module docstring)."""

    name: ClassVar[str] = "arigraph"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = AriGraphConfig
    header: ClassVar[str] = "Information from the memory graph:"
    config: AriGraphConfig

    def __init__(self, *args: Any, extractor: TripletExtractor | None = None,
                 detector: OutdatedDetector | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        c = self.config
        default = "llm" if self.llm_mode else "rules"
        wants_llm = "llm" in ((c.extraction or default), (c.replacement or default))
        llm = self.llm if (wants_llm and not self.readonly) else None
        if wants_llm and not self.readonly and llm is None:
            raise ConfigError("arigraph: extraction/replacement 'llm' needs an llm (--llm on the "
                              "command line)")
        self.extractor: TripletExtractor | None = extractor
        if self.extractor is None:
            if (c.extraction or default) == "rules":
                self.extractor = RuleTripletExtractor()
            elif llm is not None:
                self.extractor = LLMTripletExtractor(llm, max_triplets=c.max_triplets)
        self.detector: OutdatedDetector | None = detector
        if self.detector is None:
            if (c.replacement or default) == "rules":
                self.detector = RuleOutdatedDetector()
            elif llm is not None:
                self.detector = LLMOutdatedDetector(llm)

    # -- graph access -------------------------------------------------------------------------
    def routes(self, details: Mapping[str, Any]) -> dict[str, list[str]]:
        """``"go to <place>"`` → its moves, from a recall's ``details``: the navigation the
        Ariadne agent offers (:func:`.navigation.goto_routes`)."""
        return goto_routes(details)

    def graphs(self) -> dict[str, AriGraph]:
        """Every stored graph by scope key."""
        return {it.key: AriGraph.from_dict(it.payload) for it in self.store.items(GRAPH_KIND)}

    def working_graph(self) -> AriGraph | None:
        """The graph of the open session (``None`` without one)."""
        return self.session.state.graph if self.session is not None else None

    # -- hooks --------------------------------------------------------------------------------
    def _begin(self, session: Session) -> None:
        stored = self.store.items(GRAPH_KIND, key=self.scope_key(session.task))
        graph = AriGraph.from_dict(stored[0].payload) if stored else AriGraph()
        session.state = _State(graph=graph)

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        st: _State = session.state
        before = st.location
        st.location = locate(observation) or before
        new: list[Triplet] = []
        if self.extractor is not None:
            try:
                new = self.extractor.extract(observation, action=action, location=st.location,
                                             known=st.graph.triplets())
            except ExtractionError as e:
                self._reject(session, e)
        move = spatial_triplet(action, before, st.location)
        if move is not None:
            new.append(move)
        new = unique(new)
        outdated: list[Triplet] = []
        if new and self.detector is not None:
            existing = st.graph.incident(v for t in new for v in t.vertices)
            try:
                outdated = self.detector.outdated(existing, new)
            except ExtractionError as e:
                self._reject(session, e)
        row = st.graph.update(len(st.graph.observations), observation, new, outdated,
                              action=action)
        st.last_new = new
        st.added += row.added
        st.replaced += row.replaced
        st.observed += 1

    def _queries(self, session: Session) -> list[str]:
        st: _State = session.state
        qs = [v for t in st.last_new for v in t.vertices]
        plan_lines = [ln.strip(" -*") for ln in session.plan.splitlines() if ln.strip(" -*")]
        qs += plan_lines or [session.task.goal]
        return list(dict.fromkeys(q for q in qs if q.strip()))[: self.config.max_queries]

    def _retrieve(self, session: Session) -> Recall:
        st: _State = session.state
        graph = st.graph
        if not len(graph):
            return Recall(details={"location": st.location, "spatial": [],
                                   "unexplored_exits": [], "locations": []})
        c = self.config
        triplets, episodes = graph.search(self._need_embedder(), self._queries(session),
                                          d=c.depth, w=c.width, k=c.top_k)
        every = graph.triplets()
        spatial = [t for t in every if spatial_direction(t.relation)]
        lines = [self.header, *(f"- {t.text}" for t in triplets)]
        if episodes:
            lines.append("Relevant past observations:")
            for obs, _ in episodes:
                text = " ".join(obs.text.split())[:_OBS_CHARS]
                lines.append(f"- [step {obs.step}] {text}")
        items = [RecallItem("semantic", t.text, t.text, None, "triplet") for t in triplets]
        items += [RecallItem("episodic", f"obs:{o.step}", o.text, float(s), "episode")
                  for o, s in episodes]
        return Recall(
            text="\n".join(lines),
            items=tuple(items),
            details={
                "location": st.location,
                "triplets": [t.to_list() for t in triplets],
                "episodes": [o.step for o, _ in episodes],
                "spatial": [t.to_list() for t in spatial],
                "unexplored_exits": [t.text for t in all_unexplored_exits(every)],
                "locations": known_locations(every),
                "graph": {"triplets": len(graph), "vertices": len(graph.vertices),
                          "observations": len(graph.observations)},
            },
        )

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:
        st: _State = session.state
        key = self.scope_key(session.task)
        g = st.graph
        text = (f"{len(g)} triplets, {len(g.vertices)} vertices, "
                f"{len(g.observations)} observations")
        change = Change("written", self.name,
                        f"{st.added} triplets added, {st.replaced} replaced over "
                        f"{st.observed} observations", key)
        return [change], [self._put(GRAPH_KIND, key, text, g.to_dict(), episode.id)]

    def _stats_extra(self, items: list[Item]) -> dict[str, Any]:
        graphs = [AriGraph.from_dict(it.payload) for it in items if it.kind == GRAPH_KIND]
        return {
            "graphs": len(graphs),
            "triplets": sum(len(g) for g in graphs),
            "observations": sum(len(g.observations) for g in graphs),
        }


make = make_factory(AriGraphMemory)


def load_graphs(path: str | Path) -> dict[str, AriGraph]:
    """The graphs stored in an AriGraph bank, by scope key; ``path`` is the bank file or a run
    directory (its ``bank.db``). :class:`StoreError` when there is no AriGraph bank there."""
    p = Path(path)
    if p.is_dir():
        p = p / "bank.db"
    if not p.is_file():
        raise StoreError(f"no memory bank at {p}")
    store = ItemStore(p, readonly=True)
    try:
        system = store.meta().get("system")
        if system != AriGraphMemory.name:
            raise StoreError(f"{p} is a {system!r} bank, not an AriGraph bank")
        return {it.key: AriGraph.from_dict(it.payload) for it in store.items(GRAPH_KIND)}
    finally:
        store.close()
