"""ReasoningBank baseline: distilled lessons from successes and failures (paper §4.1;
Ouyang et al., 2025).

Each episode, successful or not, is distilled into at most three lessons
(title, description, content, tag ``strategy`` | ``warning``):

* ``llm`` mode: prompt ``prompts/baselines/reasoningbank/distill_success.txt`` or
  ``distill_failure.txt`` (purpose ``extract``), answer validated against
  :func:`lessons_schema` (≤ ``max_items`` items, bounded strings);
* ``deterministic`` mode: a successful episode gives its abstracted success
  path as a strategy (plus a warning listing actions the environment rejected,
  if any); a failed one gives a warning with the failed actions and the
  admissible actions never tried (via
  :class:`~deltamem.extract.structural.StructuralExtractor`).

Retrieval (``retrieval``): ``query``, the paper's (Ouyang et al., 2025, §3.2: the
current task's query is embedded and the memory entries of the top-``k`` most similar past
queries are injected; ``k`` = 1 by default, the paper's best setting): every lesson of an
episode is keyed by that episode's goal, and the recall is the lesson sets of the ``k``
best-matching episodes, ties to the earliest. ``items`` is what banks written before
this setting did: each lesson keyed by its title + description, the top-``k`` lessons
(``k`` = 3). Lessons from failures are the paper's preventive strategies: they reach the
agent with role ``warning`` (things to avoid, never steps to follow). Memory unit
(Table 5): one episode's lesson set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from deltamem.errors import ConfigError, ExtractionError
from deltamem.extract.structural import StructuralExtractor, _is_invalid, abstract_text
from deltamem.llm.structured import ask_json
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import (
    FlatConfig,
    FlatMemory,
    cosine,
    episode_prompt_values,
    load_prompt,
)
from deltamem.memories.plan import InsertItem, Plan
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["Lesson", "ReasoningBank", "ReasoningBankConfig", "lessons_schema", "make"]

KIND = "lesson"
TITLE_MAX = 100
DESCRIPTION_MAX = 300
CONTENT_MAX = 800
MAX_ITEMS = 3
Tag = Literal["strategy", "warning"]
_VARS = frozenset({"task_description", "env_description", "trajectory", "steps", "reward",
                   "result", "max_items"})
_SHAPE = ('{"items": [{"title": "...", "description": "...", "content": "...", '
          '"tag": "strategy" or "warning"}, ...]}')


class ReasoningBankConfig(FlatConfig):
    """ReasoningBank settings.

    Attributes:
        retrieval: ``query`` (the paper's: lesson sets of the ``k`` past tasks whose goal
            is most like this one) or ``items`` (the ``k`` lessons whose title and
            description are most like the goal; banks written before this setting).
            Fixed when a bank is created (the keys are embedded so).
        k: past tasks (``query``) or lessons (``items``) recalled per task.
        min_score: lessons scoring below this are not recalled (``None``: no floor).
        max_items: most lessons distilled from one episode (at most 3).
        max_trajectory_chars: trajectory budget of the distillation prompt.
        max_tokens: completion cap of each LLM call.
    """

    retrieval: Literal["query", "items"] = "query"
    k: int = Field(default=1, ge=1, le=20)
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    max_items: int = Field(default=MAX_ITEMS, ge=1, le=MAX_ITEMS)
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=800, ge=16)


def lessons_schema(max_items: int = MAX_ITEMS) -> dict[str, Any]:
    """JSON schema of a distillation answer: ``{"items": [...]}`` with ≤ ``max_items`` lessons."""
    def text(limit: int) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "maxLength": limit}

    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "maxItems": max_items,
                "items": {
                    "type": "object",
                    "properties": {
                        "title": text(TITLE_MAX),
                        "description": text(DESCRIPTION_MAX),
                        "content": text(CONTENT_MAX),
                        "tag": {"enum": ["strategy", "warning"]},
                    },
                    "required": ["title", "description", "content", "tag"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["items"],
        "additionalProperties": False,
    }


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


class Lesson:
    """One memory item: title, description, content and tag."""

    def __init__(self, title: str, description: str, content: str, tag: Tag) -> None:
        self.title = _clip(" ".join(title.split()), TITLE_MAX)
        self.description = _clip(" ".join(description.split()), DESCRIPTION_MAX)
        self.content = _clip(content, CONTENT_MAX)
        self.tag: Tag = tag

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "description": self.description, "content": self.content,
                "tag": self.tag}

    @property
    def key_text(self) -> str:
        """What is embedded for ``retrieval="items"``: title + description."""
        return f"{self.title}\n{self.description}"

    def render(self) -> str:
        label = "Warning" if self.tag == "warning" else "Strategy"
        return f"[{label}] {self.title}\n{self.description}\n{self.content}"


class ReasoningBank(FlatMemory):
    """Memory of distilled strategy and warning lessons. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = ReasoningBank.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(success=False, episode_id="e1"))]
        ['written']
        >>> [i.role for i in mem.recall(make_episode().task).items]
        ['warning']
    """

    name = "reasoningbank"
    config_class: ClassVar[type[FlatConfig]] = ReasoningBankConfig
    source: ClassVar[str] = "lessons"
    header: ClassVar[str] = (
        "Lessons from earlier episodes, most relevant first. Apply a strategy when its "
        "situation matches your task; warnings record mistakes made before: do not repeat them."
    )
    config: ReasoningBankConfig
    #: banks written before ``retrieval`` existed keyed each lesson by its own text
    legacy_config: ClassVar[Mapping[str, Any]] = {"query_text": "goal", "retrieval": "items"}

    def _check_reopen(self, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        if ("retrieval" in options and "retrieval" in recorded
                and options["retrieval"] != recorded["retrieval"]):
            raise ConfigError(
                f"this ReasoningBank bank was built with retrieval={recorded['retrieval']!r}; "
                f"its keys cannot be read with {options['retrieval']!r} (build a new bank)")

    # -- recall ----------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        items = [i for i in self._items() if i.kind == KIND and i.embedding is not None]
        if not items:
            return Recall(details={"matches": []})
        q = emb.embed_queries([self.goal_text(task.goal)])[0]
        scores = cosine(np.stack([i.embedding for i in items]), q)  # type: ignore[misc]
        floor = self.config.min_score
        if self.config.retrieval == "items":
            order = np.argsort(-scores, kind="stable")[: self.config.k]
            picked = [(items[j], float(scores[j])) for j in order
                      if floor is None or scores[j] >= floor]
        else:  # lesson sets of the k best episodes, ties to the earliest
            best: dict[str, tuple[float, int]] = {}
            for j, item in enumerate(items):
                s, first = best.get(item.episode_id, (-np.inf, j))
                best[item.episode_id] = (max(s, float(scores[j])), first)
            ranked = sorted(best.items(), key=lambda e: (-e[1][0], e[1][1]))
            chosen = {ep for ep, (s, _) in ranked[: self.config.k]
                      if floor is None or s >= floor}
            picked = [(item, float(scores[j])) for j, item in enumerate(items)
                      if item.episode_id in chosen]
            rank = {ep: n for n, (ep, _) in enumerate(ranked)}
            picked.sort(key=lambda p: rank[p[0].episode_id])
        details = {"matches": [{"id": i.id, "score": s, "tag": i.key} for i, s in picked]}
        if not picked:
            return Recall(details=details)
        sections = []
        for tag, title in (("strategy", "## Strategies"),
                           ("warning", "## Warnings: mistakes to avoid")):
            texts = [i.text for i, _ in picked if i.key == tag]
            if texts:
                sections.append(title + "\n" + "\n\n".join(texts))
        return Recall(
            text=self.header + "\n\n" + "\n\n".join(sections),
            items=tuple(RecallItem(self.source, i.id, i.text, s, i.key) for i, s in picked),
            details=details,
        )

    # -- distillation --------------------------------------------------------------------
    def distill(self, episode: Episode) -> list[Lesson]:
        """The lessons of an episode (LLM or deterministic, by ``mode``).

        Raises :class:`ExtractionError` when the LLM output stays invalid.
        """
        cap = self.config.max_items
        if self.config.mode == "llm":
            name = "distill_success" if episode.success else "distill_failure"
            values = episode_prompt_values(episode, self.config.max_trajectory_chars)
            prompt = load_prompt("reasoningbank", name, _VARS).substitute(
                values, max_items=str(cap))
            obj = ask_json(self._need_llm(), role=f"reasoningbank_{name}", purpose="extract",
                           prompt=prompt, schema=lessons_schema(cap), shape=_SHAPE,
                           max_tokens=self.config.max_tokens)
            return [Lesson(x["title"], x["description"], x["content"], x["tag"])
                    for x in obj["items"]]
        return self._distill_deterministic(episode)[:cap]

    def _distill_deterministic(self, episode: Episode) -> list[Lesson]:
        extractor = StructuralExtractor()
        domain = self.config.domain
        goal = abstract_text(self.goal_text(episode.task.goal))  # the key's goal: query_text
        if not episode.success:
            p = extractor.extract("task_root_failure", episode, (), domain)
            assert p is not None  # root roles never skip
            return [Lesson(f"Failed attempt: {goal}", p.activation, p.procedure, "warning")]
        p = extractor.extract("task_root_success", episode, (), domain)
        assert p is not None
        content = p.procedure + (f"\nDone when: {p.termination}" if p.termination else "")
        lessons = [Lesson(f"Strategy for: {goal}", p.activation, content, "strategy")]
        rejected = list(dict.fromkeys(
            f"- {abstract_text(s.action)} -> {abstract_text(s.observation)[:120]}"
            for s in episode.steps if _is_invalid(s)
        ))
        if rejected:
            lessons.append(Lesson(
                f"Commands with no effect in: {goal}",
                "Commands the environment rejected while solving this kind of task; use the "
                "forms that worked instead.",
                "\n".join(rejected[:6]),
                "warning",
            ))
        return lessons

    # -- learn ---------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        outcome = "successful" if episode.success else "failed"
        try:
            lessons = self.distill(episode)
        except ExtractionError as e:
            plan.reject(self.source, e)
            return plan
        if not lessons:
            plan.changes.append(Change("skipped", self.source,
                                       f"no lesson distilled from this {outcome} episode"))
            return plan
        if self.config.retrieval == "query":  # every lesson keyed by its episode's goal
            key = emb.embed_passages([self.goal_text(episode.task.goal)])[0]
            vecs = [key] * len(lessons)
        else:
            vecs = emb.embed_passages([le.key_text for le in lessons])
        items = [
            Item(system=self.name, kind=KIND, key=le.tag, text=le.render(), payload=le.to_dict(),
                 embedding=vecs[n], episode_id=episode.id)
            for n, le in enumerate(lessons)
        ]
        for le, item in zip(lessons, items, strict=True):
            plan.changes.append(Change("written", self.source,
                                       f"{le.tag} from a {outcome} episode: {le.title}", item.id))
        plan.writes += [InsertItem(item) for item in items]
        return plan

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        sets: dict[str, list[str]] = {}
        for i in items:
            if i.kind == KIND:
                sets.setdefault(i.episode_id, []).append(i.text)
        return ["\n\n".join(texts) for texts in sets.values()]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        lessons = [i for i in items if i.kind == KIND]
        return {
            "lessons": {"strategy": sum(1 for i in lessons if i.key == "strategy"),
                        "warning": sum(1 for i in lessons if i.key == "warning")},
        }


make = make_factory(ReasoningBank)
