"""Long-context baseline: every past trajectory in the prompt, newest first, up to a token
budget (EvoMemBench's "long context" method; issue 49).

Every episode, won or lost, is stored whole (goal, outcome, first observation and the
``> action`` / observation list, middle-cut to ``max_chars``). Recall puts the stored
trajectories into the prompt newest first until the next one would pass ``budget_tokens``
(whitespace tokens, what ``stats()`` counts); nothing is selected by similarity. A memory
that cannot beat this baseline has to say so.

Items (the guide reads a recall as items, ``docs/design-notes.md``): a won trajectory is an
``exemplar``, a lost one a ``warning`` (shown, never followed). An LLM reading the long
prompt attends to the trajectories that resemble its task; the model-free guide has no
attention, so each item carries a *reader score* (``item_scores="similarity"``, default):
the cosine of its goal with the task's goal, in the same query text every memory uses. The
score orders what the guide tries, not what reaches the prompt (that is newest first within
the budget). ``item_scores="none"`` leaves the scores out and the guide follows the prompt
order (the newest trajectory first). The guide follows at most ``reader_top`` (3) won
trajectories, the best by that score: handed all 30 of a household bank, it hopped from one
procedure's step to another's and won none of the first 33 reported games (design notes).
Lost trajectories stay items (``warning``: shown, never followed). No LLM is involved;
``mode`` is only recorded. Memory unit: one trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from deltamem.extract.llm import render_trajectory
from deltamem.llm.structured import truncate_middle
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig, FlatMemory, cosine
from deltamem.memories.plan import InsertItem, Plan
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["LongContext", "LongContextConfig", "make"]

KIND = "trajectory"


class LongContextConfig(FlatConfig):
    """Long-context settings.

    Attributes:
        budget_tokens: most whitespace tokens of trajectories in one recall (the
            newest that fit; a trajectory that does not fit stops the filling).
        max_chars: character budget of one stored trajectory (middle cut).
        with_failures: also store lost episodes (EvoMemBench keeps every trajectory).
        item_scores: ``similarity`` (the guide tries the items by goal similarity) or
            ``none`` (prompt order, newest first).
        reader_top: how many of the shown trajectories are items the guide follows (the
            best by reader score, or the newest with ``item_scores="none"``); the prompt
            holds them all. ``None``: every shown trajectory is an item.
    """

    budget_tokens: int = Field(default=8000, ge=50, le=1_000_000)
    max_chars: int = Field(default=4000, ge=200, le=100_000)
    with_failures: bool = True
    item_scores: Literal["similarity", "none"] = "similarity"
    reader_top: int | None = Field(default=3, ge=1, le=1000)


class LongContext(FlatMemory):
    """Every past trajectory, newest first, up to a token budget. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = LongContext.open(embedder=HashingEmbedder())
        >>> [c.kind for c in mem.learn(make_episode(success=False, episode_id="e0"))]
        ['written']
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> [i.role for i in mem.recall(make_episode().task).items]
        ['exemplar', 'warning']
    """

    name = "long-context"
    config_class: ClassVar[type[FlatConfig]] = LongContextConfig
    source: ClassVar[str] = "trajectories"
    uses_llm: ClassVar[bool] = False
    header: ClassVar[str] = (
        "Memory: your earlier episodes, newest first, won and lost. Use the ones whose task "
        "resembles yours as worked examples with the objects, places and values of YOUR task; "
        "do not repeat what failed."
    )
    config: LongContextConfig

    @staticmethod
    def full_text(episode: Episode) -> str:
        """Goal, outcome, first observation and the ``> action`` / observation lines."""
        task = episode.task
        first = task.observation.strip() or task.scene.strip()
        outcome = "SUCCESS" if episode.success else "FAILURE"
        return (f"Task: {task.goal.strip()}\nOutcome: {outcome} after {len(episode.steps)} "
                f"steps\n" + render_trajectory(episode.steps, first))

    # -- recall ----------------------------------------------------------------------
    def window(self) -> list[Item]:
        """The trajectories a recall shows: newest first while they fit ``budget_tokens``."""
        items = sorted((i for i in self._items() if i.kind == KIND), key=lambda i: -i.seq)
        out: list[Item] = []
        used = 0
        for item in items:
            n = len(item.text.split())
            if used + n > self.config.budget_tokens:
                break
            out.append(item)
            used += n
        return out

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        shown = self.window()
        total = sum(1 for i in self._items() if i.kind == KIND)
        details: dict[str, Any] = {"shown": len(shown), "stored": total,
                                   "tokens": sum(len(i.text.split()) for i in shown)}
        if not shown:
            return Recall(details=details)
        scores: list[float | None] = [None] * len(shown)
        if self.config.item_scores == "similarity" and all(
                i.embedding is not None for i in shown):
            q = emb.embed_queries([self.goal_text(task.goal)])[0]
            sims = cosine(np.stack([i.embedding for i in shown]), q)  # type: ignore[misc]
            scores = [float(s) for s in sims]
        sections = [f"## Episode {n} ({'won' if i.payload.get('success') else 'lost'})\n"
                    f"{i.text}" for n, i in enumerate(shown, 1)]
        items = [RecallItem(self.source, i.id, i.text, s,
                            "exemplar" if i.payload.get("success") else "warning")
                 for i, s in zip(shown, scores, strict=True)]
        top = self.config.reader_top
        if top is not None:  # the reader follows its best few; the prompt holds them all
            ranked = sorted(range(len(items)), key=lambda n: (
                -(items[n].score if items[n].score is not None else 0.0), n))
            keep = set([n for n in ranked if items[n].role == "exemplar"][:top])
            items = [it for n, it in enumerate(items) if n in keep or it.role == "warning"]
        details["followed"] = [it.id for it in items if it.role == "exemplar"]
        return Recall(
            text=self.header + "\n\n" + "\n\n".join(sections),
            items=tuple(items),
            details=details,
        )

    # -- learn -------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        if not episode.success and not self.config.with_failures:
            plan.changes.append(Change("skipped", self.source,
                                       "failed episode: with_failures is off"))
            return plan
        emb = self._need_embedder()
        full = self.full_text(episode)
        text = truncate_middle(full, self.config.max_chars)
        item = Item(
            system=self.name, kind=KIND, key=episode.task.id, text=text,
            payload={"goal": episode.task.goal, "task_id": episode.task.id,
                     "success": bool(episode.success), "steps": len(episode.steps),
                     "reward": episode.reward},
            embedding=emb.embed_passages([self.goal_text(episode.task.goal)])[0],
            episode_id=episode.id,
        )
        outcome = "won" if episode.success else "lost"
        plan.changes.append(Change("written", self.source,
                                   f"{outcome} trajectory of {len(episode.steps)} steps, "
                                   f"{len(text.split())} tokens", item.id))
        plan.writes.append(InsertItem(item))
        return plan

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        trajectories = [i for i in items if i.kind == KIND]
        return {"trajectories": len(trajectories),
                "won": sum(1 for i in trajectories if i.payload.get("success")),
                "budget_tokens": self.config.budget_tokens}


make = make_factory(LongContext)
