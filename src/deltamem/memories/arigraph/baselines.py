"""The paper's baselines for AriGraph (§4.1), played by the same Ariadne planner and decision.

Registry names and what each keeps (all step-level, see
:mod:`deltamem.memories.arigraph.base`):

* ``fullhistory`` — every observation and action of the episode, shown whole
  (``max_chars`` caps it from the front when set). Stores each episode's
  history as an item for inspection.
* ``summary`` — an iterative summary rewritten after each observation (LLM;
  ``deterministic`` mode appends the observation's first sentences and keeps
  the newest ``max_chars``). The last summary is stored per scope key.
* ``rag`` — observations embedded; the ``top_k`` most similar to the current
  observation plus plan are shown. Stored per scope key.
* ``reflexion`` — ``rag`` plus ``trials`` attempts per task with a reflection
  written after each failed one (LLM; ``deterministic``: a factual template);
  reflections are stored per task id and shown on later attempts and episodes.
* ``simulacra`` — a memory stream ranked by recency + importance + relevance
  (each min-max normalised, Park et al. 2023); importance rated by the LLM
  (``deterministic``: 1 + facts the rule extractor finds, at most 10); when the
  importance gathered since the last reflection reaches ``reflect_threshold``
  the LLM writes insights that join the stream (no insights in
  ``deterministic`` mode).

Every LLM answer has a tight length bound (a small local model under a JSON
grammar tends to write up to the bound, so it sets the call's cost, and an
answer cut by the token cap costs a repair call): the summary at most
``max_chars`` (default 1200) characters with a token budget that fits it, a
reflection 600 characters, at most 3 insights of 200 characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from deltamem.errors import ExtractionError
from deltamem.llm.structured import ask_json, truncate_middle
from deltamem.memories.arigraph.base import Session, StepConfig, StepMemory
from deltamem.memories.arigraph.extract import RuleTripletExtractor, strip_status
from deltamem.memories.arigraph.prompts import render
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import cosine
from deltamem.memories.plan import InsertItem, Write
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem

__all__ = [
    "FullHistoryMemory",
    "RAGMemory",
    "ReflexionMemory",
    "SimulacraMemory",
    "SummaryMemory",
]

_OBS_CHARS = 600


def _entry_text(action: str, observation: str) -> str:
    obs = " ".join(strip_status(observation).split())
    return f"> {action}\n{obs}" if action else obs


def _history(session: Session, n: int) -> str:
    steps = session.steps[-n:] if n > 0 else []
    return "\n".join(_entry_text(s.action, s.observation)[:_OBS_CHARS] for s in steps) or "(none)"


# -- full history -------------------------------------------------------------------------------

class FullHistoryConfig(StepConfig):
    """``max_chars``: keep only the newest characters of the history (0: everything)."""

    max_chars: int = Field(default=0, ge=0)


class FullHistoryMemory(StepMemory):
    """Every observation and action of the episode (module docstring)."""

    name: ClassVar[str] = "fullhistory"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = FullHistoryConfig
    config: FullHistoryConfig

    def _begin(self, session: Session) -> None:
        session.state = []

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        session.state.append(_entry_text(action, observation))

    def _retrieve(self, session: Session) -> Recall:
        if not session.state:
            return Recall()
        text = "\n".join(session.state)
        if self.config.max_chars and len(text) > self.config.max_chars:
            text = "[...]\n" + text[-self.config.max_chars:]
        return Recall(text="Full history of this episode:\n" + text,
                      details={"entries": len(session.state)})

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:
        text = "\n".join(session.state)
        item = Item(system=self.name, kind="history", key=episode.task.id, text=text,
                    payload={"entries": len(session.state)}, episode_id=episode.id)
        return ([Change("written", self.name, f"history of {len(session.state)} observations",
                        item.id)], [InsertItem(item)])


# -- summary --------------------------------------------------------------------------------------

class SummaryConfig(StepConfig):
    """``max_chars``: longest summary (the LLM's answer is bounded by it; the deterministic
    summary keeps the newest part)."""

    max_chars: int = Field(default=1200, ge=100, le=8000)


def _summary_schema(max_chars: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": max_chars}},
        "required": ["summary"], "additionalProperties": False,
    }


class SummaryMemory(StepMemory):
    """An iteratively rewritten summary (module docstring)."""

    name: ClassVar[str] = "summary"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = SummaryConfig
    config: SummaryConfig

    def _begin(self, session: Session) -> None:
        stored = self.store.items("summary", key=self.scope_key(session.task))
        session.state = stored[0].text if stored else ""

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        if self.llm_mode:
            prompt = render("summary", goal=session.task.goal, n_prev=self.config.history,
                            history=_history(session, self.config.history),
                            observation=_entry_text(action, observation)[:1500],
                            summary=session.state or "(empty)")
            try:
                obj = ask_json(self._need_llm(), role="summary", purpose="summarize",
                               prompt=prompt, schema=_summary_schema(self.config.max_chars),
                               shape='{"summary": str}',
                               max_tokens=self.config.max_chars // 2 + 50)
            except ExtractionError as e:
                self._reject(session, e)
                return
            session.state = obj["summary"].strip()[: self.config.max_chars]
            return
        sentences = " ".join(strip_status(observation).split()).split(". ")
        gist = ". ".join(sentences[:3])
        line = f"After '{action}': {gist}" if action else gist
        text = f"{session.state}\n{line}".strip()
        session.state = text[-self.config.max_chars:]

    def _retrieve(self, session: Session) -> Recall:
        if not session.state:
            return Recall()
        return Recall(text="Summary of what happened so far:\n" + session.state,
                      details={"chars": len(session.state)})

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:
        key = self.scope_key(session.task)
        return ([Change("written", self.name, f"summary of {len(session.state)} characters",
                        key)],
                [self._put("summary", key, session.state or "(empty)", {}, episode.id)])


# -- RAG ---------------------------------------------------------------------------------------

@dataclass
class _Entry:
    text: str
    embedding: np.ndarray
    step: int
    importance: float = 0.0
    kind: str = "observation"
    stored: bool = False


@dataclass
class _Stream:
    entries: list[_Entry] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)
    since_insight: float = 0.0

    @property
    def clock(self) -> int:
        return (self.entries[-1].step + 1) if self.entries else 0


class RAGConfig(StepConfig):
    """``top_k``: observations retrieved per step."""

    top_k: int = Field(default=3, ge=1)


class RAGMemory(StepMemory):
    """Top-k observations by similarity to the current observation plus plan."""

    name: ClassVar[str] = "rag"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = RAGConfig
    config: RAGConfig
    kind: ClassVar[str] = "observation"

    def _begin(self, session: Session) -> None:
        stream = _Stream()
        for it in self.store.items(self.kind, key=self.scope_key(session.task)):
            emb = it.embedding if it.embedding is not None else np.zeros(1, np.float32)
            stream.entries.append(_Entry(it.text, emb, int(it.payload.get("step", 0)),
                                         float(it.payload.get("importance", 0.0)),
                                         str(it.payload.get("type", "observation")), True))
        session.state = stream

    def _embed(self, text: str) -> np.ndarray:
        return np.asarray(self._need_embedder().embed_passages([text]),
                          dtype=np.float32).reshape(-1)

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        stream: _Stream = session.state
        text = _entry_text(action, observation)
        stream.entries.append(_Entry(text, self._embed(text), stream.clock))

    def _query(self, session: Session) -> str:
        stream: _Stream = session.state
        current = stream.entries[-1].text if stream.entries else session.task.observation
        return f"{current}\n{session.plan}".strip()

    def _scores(self, session: Session, pool: list[_Entry]) -> np.ndarray:
        q = np.asarray(self._need_embedder().embed_queries([self._query(session)]),
                       dtype=np.float32).reshape(-1)
        return cosine(np.stack([e.embedding for e in pool]), q)

    def _ranked(self, session: Session) -> list[tuple[_Entry, float]]:
        stream: _Stream = session.state
        pool = stream.entries[:-1]
        if not pool:
            return []
        scores = self._scores(session, pool)
        order = sorted(range(len(pool)), key=lambda i: (-float(scores[i]), -i))
        return [(pool[i], float(scores[i])) for i in order[: self.config.top_k]]

    def _retrieve(self, session: Session) -> Recall:
        ranked = self._ranked(session)
        lines: list[str] = []
        if ranked:
            lines.append("Relevant past observations:")
            lines += [f"- [{e.step}] {e.text[:_OBS_CHARS]}" for e, _ in ranked]
        return Recall(text="\n".join(lines),
                      items=tuple(RecallItem(self.kind, str(e.step), e.text, s, "observation")
                                  for e, s in ranked))

    def _new_items(self, session: Session, episode: Episode) -> list[Item]:
        stream: _Stream = session.state
        key = self.scope_key(session.task)
        return [Item(system=self.name, kind=self.kind, key=key, text=e.text,
                     payload={"step": e.step, "importance": e.importance, "type": e.kind},
                     embedding=e.embedding, episode_id=episode.id)
                for e in stream.entries if not e.stored]

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:
        items = self._new_items(session, episode)
        return [Change("written", self.name, f"{len(items)} observations stored",
                       self.scope_key(session.task))], [InsertItem(it) for it in items]


# -- Reflexion -------------------------------------------------------------------------------

class ReflexionConfig(RAGConfig):
    """``trials``: attempts per task (the agent reflects between failed ones)."""

    trials: int = Field(default=3, ge=1)


_REFLECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reflection": {"type": "string", "minLength": 1, "maxLength": 600}},
    "required": ["reflection"], "additionalProperties": False,
}


class ReflexionMemory(RAGMemory):
    """RAG plus reflections between attempts (module docstring)."""

    name: ClassVar[str] = "reflexion"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = ReflexionConfig
    config: ReflexionConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, list[str]] = {}

    @property
    def trials(self) -> int:
        return self.config.trials

    def _begin(self, session: Session) -> None:
        super()._begin(session)
        stored = [it.text for it in self.store.items("reflection", key=session.task.id)]
        session.state.reflections = stored + self._pending.get(session.task.id, [])

    def reflect(self, episode: Episode) -> str | None:
        """Write a reflection on the failed attempt ``episode``; kept until ``learn``."""
        steps = episode.steps[-15:]
        if self.llm_mode:
            trajectory = "\n".join(_entry_text(s.action, s.observation)[:300] for s in steps)
            prompt = render("reflect", goal=episode.task.goal, score=f"{episode.reward:.2f}",
                            trajectory=truncate_middle(trajectory, 5000))
            try:
                text = ask_json(self._need_llm(), role="reflexion", purpose="reflect",
                                prompt=prompt, schema=_REFLECT_SCHEMA,
                                shape='{"reflection": str}')["reflection"].strip()
            except ExtractionError:
                return None  # logged by ask_json; the next attempt goes without it
        else:
            tried = list(dict.fromkeys(s.action for s in episode.steps))[-10:]
            text = (f"An attempt reached score {episode.reward:.2f} in {len(episode.steps)} "
                    f"steps without finishing. Actions tried: {', '.join(tried)}.")
        self._pending.setdefault(episode.task.id, []).append(text)
        return text

    def _retrieve(self, session: Session) -> Recall:
        base = super()._retrieve(session)
        refl = session.state.reflections
        if not refl:
            return base
        text = "Reflections on earlier attempts:\n" + "\n".join(f"- {r}" for r in refl)
        if base.text:
            text += "\n" + base.text
        items = tuple(RecallItem("reflection", str(i), r, None, "reflection")
                      for i, r in enumerate(refl))
        return Recall(text=text, items=items + base.items)

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:
        changes, writes = super()._writes(session, episode)
        pending = self._pending.pop(episode.task.id, [])
        items = [Item(system=self.name, kind="reflection", key=episode.task.id, text=r,
                      episode_id=episode.id) for r in pending]
        changes.append(Change("written", self.name, f"{len(items)} reflections stored",
                              episode.task.id))
        return changes, [*writes, *(InsertItem(it) for it in items)]


# -- Simulacra ---------------------------------------------------------------------------------

class SimulacraConfig(RAGConfig):
    """Retrieval weights and reflection settings of the generative-agents memory stream.

    Attributes:
        decay: recency factor per step (recency = decay ** age).
        reflect_threshold: importance gathered before insights are written.
        insight_window: most recent memories shown when writing insights.
    """

    top_k: int = Field(default=4, ge=1)
    decay: float = Field(default=0.99, gt=0, le=1)
    reflect_threshold: float = Field(default=40.0, gt=0)
    insight_window: int = Field(default=10, ge=1)


_IMPORTANCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"importance": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["importance"], "additionalProperties": False,
}
_INSIGHT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"insights": {"type": "array", "maxItems": 3, "items": {
        "type": "string", "minLength": 1, "maxLength": 200}}},
    "required": ["insights"], "additionalProperties": False,
}


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(np.min(x)), float(np.max(x))
    return np.zeros_like(x) if hi - lo <= 1e-12 else (x - lo) / (hi - lo)


class SimulacraMemory(RAGMemory):
    """Recency + importance + relevance retrieval with insights (module docstring)."""

    name: ClassVar[str] = "simulacra"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = SimulacraConfig
    config: SimulacraConfig
    kind: ClassVar[str] = "memory"

    def _importance(self, session: Session, text: str) -> float:
        if not self.llm_mode:
            return float(min(10, 1 + len(RuleTripletExtractor().extract(text))))
        try:
            obj = ask_json(self._need_llm(), role="simulacra_importance", purpose="importance",
                           prompt=render("importance", goal=session.task.goal,
                                         memory=text[:1200]),
                           schema=_IMPORTANCE_SCHEMA, shape='{"importance": int}',
                           max_tokens=20)
        except ExtractionError as e:
            self._reject(session, e)
            return 1.0
        return float(obj["importance"])

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        stream: _Stream = session.state
        text = _entry_text(action, observation)
        imp = self._importance(session, text)
        stream.entries.append(_Entry(text, self._embed(text), stream.clock, imp))
        stream.since_insight += imp
        if self.llm_mode and stream.since_insight >= self.config.reflect_threshold:
            stream.since_insight = 0.0
            recent = [e.text[:300] for e in stream.entries[-self.config.insight_window:]]
            try:
                obj = ask_json(self._need_llm(), role="simulacra_insight", purpose="reflect",
                               prompt=render("insight", goal=session.task.goal,
                                             memories="\n".join(f"- {r}" for r in recent)),
                               schema=_INSIGHT_SCHEMA, shape='{"insights": [str]}')
            except ExtractionError as e:
                self._reject(session, e)
                return
            clock = stream.clock
            for ins in obj["insights"]:
                stream.entries.insert(len(stream.entries) - 1, _Entry(
                    ins, self._embed(ins), clock, 8.0, "insight"))

    def _ranked(self, session: Session) -> list[tuple[_Entry, float]]:
        stream: _Stream = session.state
        pool = stream.entries[:-1]
        if not pool:
            return []
        now = stream.clock
        recency = np.array([self.config.decay ** (now - e.step) for e in pool])
        importance = np.array([e.importance / 10.0 for e in pool])
        relevance = self._scores(session, pool).astype(np.float64)
        total = _minmax(recency) + _minmax(importance) + _minmax(relevance)
        order = sorted(range(len(pool)), key=lambda i: (-float(total[i]), -i))
        return [(pool[i], float(total[i])) for i in order[: self.config.top_k]]


make_fullhistory = make_factory(FullHistoryMemory)
make_summary = make_factory(SummaryMemory)
make_rag = make_factory(RAGMemory)
make_reflexion = make_factory(ReflexionMemory)
make_simulacra = make_factory(SimulacraMemory)
