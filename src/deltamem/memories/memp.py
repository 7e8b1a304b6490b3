"""MemP: procedural memory built, retrieved and updated (Fang et al., 2025, "Memp: Exploring
Agent Procedural Memory"; issue 49).

* **Build**: each episode becomes a procedure, kept as its ``script`` (abstract steps), its
  ``trajectory`` (the ``> action`` / observation lines) or both (``proceduralization``,
  the paper's best); the script is written by the LLM (``llm`` mode, prompt
  ``prompts/baselines/memp/script.txt``, schema :class:`Script`) or by the structural
  extractor (model-free).
* **Retrieve**: the ``k`` procedures whose key (the goal, in the query text every memory
  embeds) is most similar to the task's goal (the paper's "query" key).
* **Update** (``update``): ``vanilla`` adds every episode; ``validation`` (default) adds
  only won ones; both keep, per procedure, how often it was used and how often the episode
  that used it was won (the procedure the guide followed first,
  :func:`deltamem.memories.procedural.followed_ids`). ``reflection`` adds, on a lost
  episode that used a procedure, the LLM's correction of that procedure (prompt
  ``correct.txt``, schema :class:`Script`; ``llm`` mode only: model-free it is validation).
  With ``deprecate_below`` set, a procedure used at least ``min_uses`` times whose success
  rate fell below the threshold is deprecated: kept in the bank for the record, never
  recalled again (the paper's discarding of low-utility memories).

Model-free, the row keeps build (structural script), retrieval, validation and
deprecation; it drops the LLM's script writing and the reflection's corrections. Memory
unit: one procedure (deprecated ones are not counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from deltamem.errors import ExtractionError
from deltamem.extract.llm import render_trajectory
from deltamem.llm.structured import ask_json, truncate_middle
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import (
    FlatConfig,
    FlatMemory,
    cosine,
    episode_prompt_values,
    load_prompt,
)
from deltamem.memories.plan import InsertItem, Plan, UpdateItem
from deltamem.memories.procedural import (
    followed_ids,
    schema_of,
    structural_procedure,
    validated,
)
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["MemP", "MemPConfig", "Script", "make"]

KIND = "procedure"
_SCRIPT_VARS = frozenset({"task_description", "env_description", "trajectory", "steps",
                          "reward", "result", "max_steps"})
_CORRECT_VARS = _SCRIPT_VARS | {"procedure"}
_SHAPE = '{"title": "...", "steps": ["...", ...]}'


class Script(BaseModel):
    """A procedure script: what kind of task it serves and its abstract steps."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=160)
    steps: list[str] = Field(min_length=1, max_length=30)


class MemPConfig(FlatConfig):
    """MemP settings.

    Attributes:
        build: ``script``, ``trajectory`` or ``proceduralization`` (both).
        update: ``vanilla`` (add every episode), ``validation`` (add won episodes only)
            or ``reflection`` (validation, and correct a used procedure after a loss;
            ``llm`` mode).
        k: procedures recalled per task.
        deprecate_below: success rate under which a procedure used ``min_uses`` times
            is deprecated (``None``: never).
        min_uses: uses before a procedure may be deprecated.
        max_steps: most steps of a script.
        max_chars: character budget of a stored trajectory.
        max_trajectory_chars: trajectory budget of the prompts.
        max_tokens: completion cap of each LLM call.
    """

    build: Literal["script", "trajectory", "proceduralization"] = "proceduralization"
    update: Literal["vanilla", "validation", "reflection"] = "validation"
    k: int = Field(default=3, ge=1, le=20)
    deprecate_below: float | None = Field(default=0.5, ge=0.0, le=1.0)
    min_uses: int = Field(default=3, ge=1)
    max_steps: int = Field(default=15, ge=1, le=30)
    max_chars: int = Field(default=3000, ge=200)
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=700, ge=16)


class MemP(FlatMemory):
    """MemP's procedural memory. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = MemP.open(embedder=HashingEmbedder(), mode="deterministic", min_uses=1)
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> r = mem.recall(make_episode().task)
        >>> [i.role for i in r.items]
        ['procedure']
        >>> [c.kind for c in mem.learn(make_episode(success=False, episode_id="e2"), r)]
        ['failed', 'superseded', 'skipped']
        >>> mem.recall(make_episode().task).empty, mem.stats()["deprecated"]
        (True, 1)
    """

    name = "memp"
    config_class: ClassVar[type[FlatConfig]] = MemPConfig
    source: ClassVar[str] = "procedures"
    header: ClassVar[str] = (
        "Procedural memory: how tasks like yours were done before, most similar first. Follow "
        "the steps with the objects and places of YOUR task."
    )
    config: MemPConfig

    def _active(self) -> list[Item]:
        return [i for i in self._items()
                if i.kind == KIND and not i.payload.get("deprecated")]

    # -- recall ----------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        items = [i for i in self._active() if i.embedding is not None]
        if not items:
            return Recall(details={"matches": []})
        q = emb.embed_queries([self.goal_text(task.goal)])[0]
        scores = cosine(np.stack([i.embedding for i in items]), q)  # type: ignore[misc]
        order = np.argsort(-scores, kind="stable")[: self.config.k]
        picked = [(items[j], float(scores[j])) for j in order]
        return Recall(
            text=self.header + "\n\n" + "\n\n".join(
                f"## Procedure {n} (similarity {s:.2f})\n{i.text}"
                for n, (i, s) in enumerate(picked, 1)),
            items=tuple(RecallItem(self.source, i.id, i.text, s, "procedure")
                        for i, s in picked),
            details={"matches": [{"id": i.id, "score": s} for i, s in picked]},
        )

    # -- build -------------------------------------------------------------------------
    def script(self, episode: Episode, current: str | None = None) -> Script:
        """The script of ``episode`` (``current``: the procedure to correct after a loss)."""
        cap = self.config.max_steps
        if self.config.mode == "llm":
            values = episode_prompt_values(episode, self.config.max_trajectory_chars)
            name = "script" if current is None else "correct"
            extra = {} if current is None else {"procedure": current}
            prompt = load_prompt("memp", name, _CORRECT_VARS if current else _SCRIPT_VARS
                                 ).substitute(values, max_steps=str(cap), **extra)
            obj = ask_json(self._need_llm(), role=f"memp_{name}", purpose="extract",
                           prompt=prompt, schema=schema_of(Script), shape=_SHAPE,
                           max_tokens=self.config.max_tokens)
            s = validated(Script, obj, f"memp_{name}")
            return Script(title=s.title, steps=s.steps[:cap])
        emb_name = self.embedder.name if self.embedder is not None else None
        proc = structural_procedure(episode, self.config.domain,
                                    self.config.text_mode(emb_name))
        return Script(title=proc.situation, steps=list(proc.steps[:cap]) or ["(no steps)"])

    def render(self, script: Script, episode: Episode) -> str:
        """The stored text by ``build``."""
        steps = "\n".join(f"{n}. {s}" for n, s in enumerate(script.steps, 1))
        head = f"Task kind: {script.title}"
        if self.config.build == "script":
            return f"{head}\n{steps}"
        task = episode.task
        traj = truncate_middle(f"Task: {task.goal.strip()}\n" + render_trajectory(
            episode.steps, task.observation.strip() or task.scene.strip()),
            self.config.max_chars)
        if self.config.build == "trajectory":
            return traj
        return f"{head}\n{steps}\n\nTrajectory it came from:\n{traj}"

    # -- update ------------------------------------------------------------------------
    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: object) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        by_id = {i.id: i for i in self._active()}
        used = [by_id[i] for i in followed_ids(recall, self.source, 1) if i in by_id]
        for item in used:
            self._validate(plan, item, episode)
        add = episode.success or self.config.update == "vanilla"
        correct = (not episode.success and self.config.update == "reflection"
                   and self.config.mode == "llm" and used)
        if not add and not correct:
            plan.changes.append(Change(
                "skipped", self.source,
                f"lost episode: update {self.config.update!r} adds won episodes only"))
            return plan
        try:
            script = self.script(episode, used[0].text if correct else None)
        except ExtractionError as e:
            plan.reject(self.source, e)
            return plan
        text = self.render(script, episode)
        vec = emb.embed_passages([self.goal_text(episode.task.goal)])[0]
        if correct:
            item = used[0]
            change = Change("superseded", self.source,
                            f"corrected by reflection on a lost episode: {script.title}",
                            item.id)
            plan.changes.append(change)
            payload = {**item.payload, "title": script.title, "steps": script.steps,
                       "corrections": int(item.payload.get("corrections", 0)) + 1}
            plan.writes.append(UpdateItem(item.id, text=text, payload=payload,
                                          embedding=item.embedding, episode_id=episode.id))
            return plan
        item = Item(system=self.name, kind=KIND, key=episode.task.id, text=text,
                    payload={"title": script.title, "steps": script.steps, "uses": 0,
                             "successes": 0, "won": bool(episode.success),
                             "deprecated": False},
                    embedding=vec, episode_id=episode.id)
        plan.changes.append(Change("written", self.source,
                                   f"procedure of {len(script.steps)} steps from a "
                                   f"{'won' if episode.success else 'lost'} episode", item.id))
        plan.writes.append(InsertItem(item))
        return plan

    def _validate(self, plan: Plan, item: Item, episode: Episode) -> None:
        """The used procedure's counts move with the outcome; deprecated below the rate."""
        uses = int(item.payload.get("uses", 0)) + 1
        wins = int(item.payload.get("successes", 0)) + int(bool(episode.success))
        rate = wins / uses
        floor = self.config.deprecate_below
        deprecated = floor is not None and uses >= self.config.min_uses and rate < floor
        change = Change("hit" if episode.success else "failed", self.source,
                        f"used by a {'won' if episode.success else 'lost'} episode: "
                        f"{wins}/{uses} won", item.id)
        plan.changes.append(change)
        if deprecated:
            plan.changes.append(Change(
                "superseded", self.source,
                f"success rate {rate:.2f} < {floor:g} after {uses} uses: no longer recalled",
                item.id))
        plan.writes.append(UpdateItem(
            item.id, text=item.text,
            payload={**item.payload, "uses": uses, "successes": wins,
                     "deprecated": deprecated},
            embedding=item.embedding, episode_id=episode.id, unchanged_since=item.updated_at,
            stale=(change, Change("skipped", self.source,
                                  "changed in another process; this use was not counted",
                                  item.id))))

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND and not i.payload.get("deprecated")]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        procs = [i for i in items if i.kind == KIND]
        return {"procedures": sum(1 for i in procs if not i.payload.get("deprecated")),
                "deprecated": sum(1 for i in procs if i.payload.get("deprecated")),
                "uses": sum(int(i.payload.get("uses", 0)) for i in procs)}


make = make_factory(MemP)
