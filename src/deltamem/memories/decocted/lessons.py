"""Lesson memory and its raw-experience and k-means-consolidated variants (paper §2.1, §3.1–3.2).

Entries are (task, content) pairs stored in an :class:`~deltamem.store.items.ItemStore`
(kind ``lesson``), indexed by the embedding of the task statement (the goal):

* ``lessons`` (:class:`LessonMemory`): content = one lesson distilled from the
  episode (or from several attempts at one task, :meth:`LessonMemory.distill`):
  the kind of task, the strategy of the successful attempts and the pitfalls of
  the failed ones. ``llm`` mode asks the LLM (prompt
  ``prompts/decocted/distill_lesson.txt``, purpose ``extract``, answer validated
  against :func:`lesson_schema`, one repair, then rejected and logged);
  ``deterministic`` mode builds it from the trajectory text with the structural
  extractor's helpers.
* ``lessons-raw`` (:class:`RawExperienceMemory`): content = the trajectory itself
  (by default only successful episodes are stored, as in the paper's minimal
  instantiation).
* ``lessons-kmeans`` (:class:`KMeansLessonMemory`): the lesson bank keeps every
  entry, and recall searches its consolidated view of ``target_size`` entries
  (:mod:`~deltamem.memories.decocted.kmeans`); the view is recomputed when the
  bank changes.

Recall = top-K entries by inner product of normalised task embeddings; the
context is the concatenation of (task, content) pairs under a header. Every
recall logs Rel, Div and Q of the retrieved set under ``details["quality"]``
(:mod:`~deltamem.memories.decocted.quality`; entry vectors = their task
embeddings), and the matches under ``details["matches"]``.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from deltamem.errors import ExtractionError, InvalidInputError
from deltamem.extract.llm import render_trajectory
from deltamem.extract.structural import StructuralExtractor, _is_invalid, abstract_text
from deltamem.llm.structured import ask_json, truncate_middle
from deltamem.memories.decocted.kmeans import DEFAULT_ALPHA, consolidate, mix_embeddings
from deltamem.memories.decocted.quality import DEFAULT_LAMBDA, context_quality
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig, FlatMemory, episode_prompt_values
from deltamem.memories.plan import InsertItem, Plan
from deltamem.store.items import Item
from deltamem.templates import read_template
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = [
    "KMeansLessonConfig",
    "KMeansLessonMemory",
    "Lesson",
    "LessonConfig",
    "LessonMemory",
    "RawExperienceConfig",
    "RawExperienceMemory",
    "Selection",
    "lesson_schema",
    "load_prompt",
    "make_kmeans",
    "make_lessons",
    "make_raw",
]

KIND = "lesson"
TASK_TYPE_MAX = 200
ITEM_MAX = 200
MAX_STEPS = 8
MAX_PITFALLS = 5
_DISTILL_VARS = frozenset({"task_description", "env_description", "attempts", "max_steps",
                           "max_pitfalls"})
_SHAPE = '{"task_type": "...", "strategy": ["...", ...], "pitfalls": ["...", ...]}'


def load_prompt(name: str, variables: frozenset[str]) -> string.Template:
    """The template ``deltamem/prompts/decocted/<name>.txt``.

    Raises :class:`ConfigError` when it is missing, has a malformed ``$``
    placeholder, or uses a variable outside ``variables``.
    """
    path = resources.files("deltamem").joinpath("prompts", "decocted", f"{name}.txt")
    return read_template(path, variables, "decocted prompt")


def lesson_schema(max_steps: int = MAX_STEPS, max_pitfalls: int = MAX_PITFALLS) -> dict[str, Any]:
    """JSON schema of a distillation answer: task type, 1..``max_steps`` strategy steps and
    0..``max_pitfalls`` pitfalls, every string 1..200 characters."""
    def text(limit: int) -> dict[str, Any]:
        return {"type": "string", "minLength": 1, "maxLength": limit}

    return {
        "type": "object",
        "properties": {
            "task_type": text(TASK_TYPE_MAX),
            "strategy": {"type": "array", "items": text(ITEM_MAX), "minItems": 1,
                         "maxItems": max_steps},
            "pitfalls": {"type": "array", "items": text(ITEM_MAX), "maxItems": max_pitfalls},
        },
        "required": ["task_type", "strategy", "pitfalls"],
        "additionalProperties": False,
    }


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


@dataclass(frozen=True)
class Lesson:
    """A distilled lesson: what kind of task, the strategy that worked, the pitfalls met."""

    task_type: str
    strategy: tuple[str, ...]
    pitfalls: tuple[str, ...] = ()

    def render(self) -> str:
        """The lesson as shown to the agent."""
        lines = [f"Task type: {self.task_type}", "Strategy:"]
        if self.strategy:
            lines += [f"{i}. {s}" for i, s in enumerate(self.strategy, 1)]
        else:
            lines.append("(no successful attempt yet)")
        if self.pitfalls:
            lines += ["Pitfalls:", *(f"- {p}" for p in self.pitfalls)]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"task_type": self.task_type, "strategy": list(self.strategy),
                "pitfalls": list(self.pitfalls)}


class LessonConfig(FlatConfig):
    """Lesson memory settings.

    Attributes:
        k: entries recalled per task (top-K by task similarity; paper: 4 on WebShop).
        lam: λ of the logged quality Q = Rel + λ·Div.
        successes_only: store entries from successful episodes only.
        max_trajectory_chars: trajectory budget of the distillation prompt.
        max_tokens: completion cap of each LLM call.
    """

    k: int = Field(default=4, ge=1, le=50)
    lam: float = Field(default=DEFAULT_LAMBDA, ge=0.0, le=10.0)
    successes_only: bool = False
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=700, ge=16)


class RawExperienceConfig(LessonConfig):
    """Raw-experience settings: as :class:`LessonConfig`; ``max_chars`` bounds a stored
    trajectory (middle-cut), and only successful episodes are stored by default."""

    successes_only: bool = True
    max_chars: int = Field(default=3000, ge=200, le=100_000)


class KMeansLessonConfig(LessonConfig):
    """k-means consolidation settings (§3.2).

    Attributes:
        target_size: N', the size of the consolidated memory recall searches.
        alpha: weight of the lesson embedding in the clustering embedding.
        seed: k-means seed.
    """

    target_size: int = Field(default=50, ge=1, le=100_000)
    alpha: float = Field(default=DEFAULT_ALPHA, ge=0.0, le=1.0)
    seed: int = 0


@dataclass(frozen=True)
class Selection:
    """Which entries a recall picked (indices into the searched entries), their scores, and
    system-specific facts for ``Recall.details``."""

    indices: tuple[int, ...]
    scores: tuple[float, ...]
    details: dict[str, Any]


class LessonMemory(FlatMemory):
    """(task, lesson) memory with top-K task-similarity recall. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = LessonMemory.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> r = mem.recall(make_episode().task)
        >>> r.details["quality"]["k"], round(r.details["quality"]["rel"], 3)
        (1, 1.0)
    """

    name = "lessons"
    config_class: ClassVar[type[FlatConfig]] = LessonConfig
    source: ClassVar[str] = "lessons"
    role: ClassVar[str] = "lesson"
    header: ClassVar[str] = (
        "Lessons distilled from earlier tasks like yours, most similar first. Each names the "
        "past task it came from. Reuse a strategy when it fits YOUR task (with your objects and "
        "places) and avoid the pitfalls."
    )
    config: LessonConfig

    # -- content ---------------------------------------------------------------------------
    def distill(self, attempts: Sequence[Episode]) -> Lesson:
        """One lesson from one or more attempts at the same task (LLM or deterministic).

        Raises :class:`InvalidInputError` for no attempt, a malformed one or attempts
        at different goals, and :class:`ExtractionError` when the LLM output stays
        invalid after its repair.
        """
        if not attempts:
            raise InvalidInputError("distill needs at least one attempt")
        for ep in attempts:
            ep.validate()
        if len({ep.task.goal.strip() for ep in attempts}) > 1:
            raise InvalidInputError("all attempts given to distill must share one task goal")
        if self.config.mode == "llm":
            return self._distill_llm(attempts)
        return self._distill_deterministic(attempts)

    def _distill_llm(self, attempts: Sequence[Episode]) -> Lesson:
        budget = max(200, self.config.max_trajectory_chars // len(attempts))
        blocks = []
        for n, ep in enumerate(attempts, 1):
            first = ep.task.observation if ep.task.observation.strip() != \
                ep.task.scene_text.strip() else ""
            traj = truncate_middle(render_trajectory(ep.steps, first), budget)
            blocks.append(f"Attempt {n}: {'SUCCESS' if ep.success else 'FAILURE'}, reward "
                          f"{ep.reward:g}, {len(ep.steps)} steps\n{traj}")
        values = episode_prompt_values(attempts[0], self.config.max_trajectory_chars)
        prompt = load_prompt("distill_lesson", _DISTILL_VARS).substitute(
            task_description=values["task_description"],
            env_description=values["env_description"],
            attempts="\n\n".join(blocks),
            max_steps=str(MAX_STEPS),
            max_pitfalls=str(MAX_PITFALLS),
        )
        obj = ask_json(self._need_llm(), role="decocted_distill_lesson", purpose="extract",
                       prompt=prompt, schema=lesson_schema(), shape=_SHAPE,
                       max_tokens=self.config.max_tokens)
        return Lesson(_clip(obj["task_type"], TASK_TYPE_MAX),
                      tuple(_clip(s, ITEM_MAX) for s in obj["strategy"]),
                      tuple(_clip(p, ITEM_MAX) for p in obj["pitfalls"]))

    def _distill_deterministic(self, attempts: Sequence[Episode]) -> Lesson:
        extractor = StructuralExtractor()
        domain = self.config.domain
        goal = abstract_text(attempts[0].task.goal)
        strategy: tuple[str, ...] = ()
        task_type = f"Tasks of the form: {goal}"
        pitfalls: list[str] = []
        for ep in attempts:
            if ep.success and not strategy:
                p = extractor.extract("task_root_success", ep, (), domain)
                assert p is not None  # root roles never skip
                task_type = p.activation
                strategy = tuple(_clip(line.split(". ", 1)[-1], ITEM_MAX)
                                 for line in p.procedure.splitlines() if line.strip())
            for s in ep.steps:
                if _is_invalid(s):
                    pitfalls.append(f"'{abstract_text(s.action)}' had no effect: "
                                    f"{abstract_text(s.observation)[:100]}")
            if not ep.success:
                tail = " > ".join(abstract_text(s.action) for s in ep.steps[-3:])
                pitfalls.append(f"An attempt failed after {len(ep.steps)} steps "
                                f"(reward {ep.reward:g}), ending with: {tail}")
        unique = tuple(_clip(p, ITEM_MAX) for p in dict.fromkeys(pitfalls))[:MAX_PITFALLS]
        return Lesson(_clip(task_type, TASK_TYPE_MAX), strategy[:MAX_STEPS * 3], unique)

    def entry_content(self, episode: Episode) -> tuple[str, dict[str, Any]]:
        """The text stored for an episode and its structured form (here: its lesson)."""
        lesson = self.distill([episode])
        return lesson.render(), lesson.to_dict()

    @staticmethod
    def render_entry(task: str, content: str) -> str:
        return f"### Past task: {task}\n{content}"

    # -- learn -----------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        outcome = "success" if episode.success else "failure"
        if self.config.successes_only and not episode.success:
            plan.changes.append(Change("skipped", self.source,
                                       "failed episode: this memory stores successes only"))
            return plan
        goal = episode.task.goal.strip()
        try:
            content, structured = self.entry_content(episode)
            item = Item(
                system=self.name, kind=KIND, key=outcome,
                text=self.render_entry(goal, content),
                payload={"task": goal, "content": content, "structured": structured,
                         "success": bool(episode.success), "reward": float(episode.reward),
                         "task_id": episode.task.id},
                embedding=emb.embed_passages([self.goal_text(goal)])[0],
                episode_id=episode.id,
            )
            extra = self._extra_items(item, episode)
        except ExtractionError as e:
            plan.reject(self.source, e)
            return plan
        plan.changes.append(Change("written", self.source,
                                   f"{self.role} from a {outcome} episode: {_clip(goal, 80)}",
                                   item.id))
        plan.writes += [InsertItem(it) for it in (item, *extra)]
        return plan

    def _extra_items(self, entry: Item, episode: Episode) -> list[Item]:
        """Hook: more items written with an entry, in the same transaction."""
        return []

    # -- recall ----------------------------------------------------------------------------
    def entries(self) -> list[Item]:
        """The entries recall searches, in storage order."""
        return self._entries()

    def _entries(self) -> list[Item]:
        """The entries recall searches (here: every stored entry)."""
        return [i for i in self._items() if i.kind == KIND and i.embedding is not None]

    def _select(self, task: Task, query: np.ndarray, entries: Sequence[Item]) -> Selection:
        """Top-K entries by inner product of the (normalised) task embeddings."""
        mat = np.stack([np.asarray(e.embedding, dtype=np.float64) for e in entries])
        scores = mat @ np.asarray(query, dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[: self.config.k]
        return Selection(tuple(int(i) for i in order), tuple(float(scores[i]) for i in order),
                         {})

    def _base_details(self, entries: Sequence[Item]) -> dict[str, Any]:
        return {"entries": len(entries)}

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        entries = self._entries()
        details: dict[str, Any] = self._base_details(entries)
        if not entries:
            return Recall(details={**details, "matches": [], "quality": None})
        query = emb.embed_queries([self.goal_text(task.goal)])[0]
        sel = self._select(task, query, entries)
        details.update(sel.details)
        picked = [entries[i] for i in sel.indices]
        if not picked:
            return Recall(details={**details, "matches": [], "quality": None})
        quality = context_quality(query, np.stack([np.asarray(e.embedding) for e in picked]),
                                  self.config.lam)
        details["matches"] = [{"id": e.id, "score": s, "task": e.payload.get("task", "")}
                              for e, s in zip(picked, sel.scores, strict=True)]
        details["quality"] = quality.to_dict()
        text = self.header + "\n\n" + "\n\n".join(e.text for e in picked)
        items = tuple(RecallItem(self.source, e.id, e.text, s,  # a failure's: a warning
                                 "warning" if e.key == "failure" else self.role)
                      for e, s in zip(picked, sel.scores, strict=True))
        return Recall(text=text, items=items, details=details)

    # -- stats -----------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        entries = [i for i in items if i.kind == KIND]
        return {"entries": {"success": sum(1 for i in entries if i.key == "success"),
                            "failure": sum(1 for i in entries if i.key == "failure")}}


class RawExperienceMemory(LessonMemory):
    """(task, trajectory) memory: the raw-experience side of the paper's raw-vs-lesson
    comparison (§3.1). No LLM is involved; ``mode`` is only recorded."""

    name = "lessons-raw"
    config_class: ClassVar[type[FlatConfig]] = RawExperienceConfig
    source: ClassVar[str] = "experiences"
    role: ClassVar[str] = "experience"
    uses_llm: ClassVar[bool] = False
    header: ClassVar[str] = (
        "Earlier episodes of tasks like yours, most similar first: what was done and what the "
        "environment answered. Follow what worked, with YOUR task's objects and places."
    )
    config: RawExperienceConfig

    def entry_content(self, episode: Episode) -> tuple[str, dict[str, Any]]:
        task = episode.task
        first = task.observation.strip() or task.scene_text.strip()
        outcome = "SUCCESS" if episode.success else "FAILURE"
        body = truncate_middle(render_trajectory(episode.steps, first), self.config.max_chars)
        text = f"Result: {outcome} (reward {episode.reward:g}, {len(episode.steps)} steps)\n{body}"
        return text, {"steps": len(episode.steps)}


class KMeansLessonMemory(LessonMemory):
    """Lesson memory whose recall searches a k-means-consolidated view of ``target_size``
    entries (§3.2). The bank keeps every entry; the view is recomputed (deterministically,
    fixed seed) whenever the bank changed. Lesson embeddings are cached per entry."""

    name = "lessons-kmeans"
    config_class: ClassVar[type[FlatConfig]] = KMeansLessonConfig
    config: KMeansLessonConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._content_vecs: dict[str, np.ndarray] = {}
        self._view_key: tuple[str, ...] | None = None
        self._view: list[Item] = []

    def content_vectors(self, entries: Sequence[Item]) -> np.ndarray:
        """Embeddings of the entries' contents (lessons), computed once per entry."""
        emb = self._need_embedder()
        missing = [e for e in entries if e.id not in self._content_vecs]
        if missing:
            vecs = emb.embed_passages([str(e.payload.get("content", e.text)) for e in missing])
            for e, v in zip(missing, vecs, strict=True):
                self._content_vecs[e.id] = np.asarray(v, dtype=np.float64)
        return np.stack([self._content_vecs[e.id] for e in entries])

    def consolidated(self) -> list[Item]:
        """The consolidated view: at most ``target_size`` entries, one per k-means cluster."""
        entries = super()._entries()
        key = tuple(e.id for e in entries)
        if key != self._view_key:
            if len(entries) <= self.config.target_size:
                self._view = list(entries)
            else:
                tasks = np.stack([np.asarray(e.embedding, dtype=np.float64) for e in entries])
                mixed = mix_embeddings(tasks, self.content_vectors(entries), self.config.alpha)
                result = consolidate(mixed, self.config.target_size, seed=self.config.seed)
                self._view = [entries[i] for i in sorted(result.kept)]
            self._view_key = key
        return self._view

    def _entries(self) -> list[Item]:
        return self.consolidated()

    def _base_details(self, entries: Sequence[Item]) -> dict[str, Any]:
        return {"entries": len(entries), "bank_entries": len(super()._entries()),
                "target_size": self.config.target_size}

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        out = super()._stats_extra(items)
        n = sum(1 for i in items if i.kind == KIND)
        out["consolidated_entries"] = min(n, self.config.target_size)
        return out


make_lessons = make_factory(LessonMemory)
make_raw = make_factory(RawExperienceMemory)
make_kmeans = make_factory(KMeansLessonMemory)
