"""Synapse baseline: successful trajectories as exemplars (paper §4.1; Zheng et al., 2024).

Every successful episode is stored whole — goal, first observation and the
``> action`` / observation list, middle-cut to a character budget — and
indexed by the embedding of its goal plus scene. Recall returns the most
similar stored trajectory (cosine with the query goal + scene) as an extra
exemplar; an empty bank recalls nothing. Failed episodes are not stored.
No LLM is involved; ``mode`` is only recorded. Memory unit (Table 5): one
trajectory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from deltamem.extract.llm import render_trajectory
from deltamem.llm.structured import truncate_middle
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig, FlatMemory, cosine
from deltamem.memories.plan import InsertItem, Plan
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["Synapse", "SynapseConfig", "make"]

KIND = "trajectory"


class SynapseConfig(FlatConfig):
    """Synapse settings.

    Attributes:
        max_chars: character budget of one stored trajectory (longer ones keep
            their beginning and end).
        k: how many of the most similar trajectories to recall (the paper uses 1).
        with_scene: the key and the query are the goal text (``query_text``) followed by
            the scene; ``False`` (default): the goal text alone, as the paper's
            baselines retrieve by task similarity. With a small embedder the scene's
            room words decide the similarity and the goal's kind of task is lost
            (``docs/design-notes.md``, "One query text for every memory").
    """

    max_chars: int = Field(default=4000, ge=200, le=100_000)
    k: int = Field(default=1, ge=1, le=10)
    with_scene: bool = False


class Synapse(FlatMemory):
    """Trajectory-as-exemplar memory. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = Synapse.open(embedder=HashingEmbedder())
        >>> mem.recall(make_episode().task).empty
        True
        >>> [c.kind for c in mem.learn(make_episode(success=False, episode_id="e0"))]
        ['skipped']
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> mem.recall(make_episode().task).items[0].role
        'exemplar'
    """

    name = "synapse"
    config_class: ClassVar[type[FlatConfig]] = SynapseConfig
    source: ClassVar[str] = "trajectories"
    uses_llm: ClassVar[bool] = False
    header: ClassVar[str] = (
        "Memory: solved episodes whose tasks resemble yours. Treat them as worked examples: "
        "follow the pattern of their actions, but use the objects, places and values of YOUR "
        "task, not theirs."
    )
    config: SynapseConfig
    #: banks written before ``query_text`` / ``with_scene``: raw goal + scene keys
    legacy_config: ClassVar[Mapping[str, Any]] = {"query_text": "goal", "with_scene": True}

    def query_text(self, task: Task) -> str:
        """What is embedded to index and to look up a trajectory: the goal text
        (``query_text``), followed by the scene when ``with_scene``."""
        goal = self.goal_text(task.goal)
        scene = task.scene_text.strip() if self.config.with_scene else ""
        return f"{goal}\n{scene}" if scene else goal

    @staticmethod
    def full_text(episode: Episode) -> str:
        """A trajectory as text: goal, first observation, ``> action`` + observation lines."""
        task = episode.task
        first = task.observation.strip() or task.scene.strip()
        return f"Task: {task.goal.strip()}\n" + render_trajectory(episode.steps, first)

    def render(self, episode: Episode) -> str:
        """The stored text of a trajectory: :meth:`full_text` middle-cut to ``max_chars``."""
        return truncate_middle(self.full_text(episode), self.config.max_chars)

    # -- recall ----------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        items = [i for i in self._items() if i.kind == KIND and i.embedding is not None]
        if not items:
            return Recall(details={"matches": []})
        q = emb.embed_queries([self.query_text(task)])[0]
        scores = cosine(np.stack([i.embedding for i in items]), q)  # type: ignore[misc]
        order = np.argsort(-scores, kind="stable")[: self.config.k]
        picked = [(items[j], float(scores[j])) for j in order]
        sections = [
            f"## Solved example {n} (similarity {s:.2f})\n{item.text}"
            for n, (item, s) in enumerate(picked, 1)
        ]
        return Recall(
            text=self.header + "\n\n" + "\n\n".join(sections),
            items=tuple(RecallItem(self.source, item.id, item.text, s, "exemplar")
                        for item, s in picked),
            details={"matches": [{"id": item.id, "score": s} for item, s in picked]},
        )

    # -- learn -------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        if not episode.success:
            plan.changes.append(Change(
                "skipped", self.source,
                f"failed episode (reward {episode.reward:g}): Synapse stores successful "
                "trajectories only",
            ))
            return plan
        emb = self._need_embedder()
        full = self.full_text(episode)
        text = truncate_middle(full, self.config.max_chars)
        vec = emb.embed_passages([self.query_text(episode.task)])[0]
        item = Item(
            system=self.name,
            kind=KIND,
            key=episode.task.id,
            text=text,
            payload={"goal": episode.task.goal, "task_id": episode.task.id,
                     "steps": len(episode.steps), "reward": episode.reward},
            embedding=vec,
            episode_id=episode.id,
        )
        cut = f" (middle cut from {len(full)})" if text != full else ""
        plan.changes.append(Change(
            "written", self.source,
            f"successful trajectory of {len(episode.steps)} steps, {len(text)} characters{cut}",
            item.id,
        ))
        plan.writes.append(InsertItem(item))
        return plan

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        return {"trajectories": sum(1 for i in items if i.kind == KIND)}


make = make_factory(Synapse)
