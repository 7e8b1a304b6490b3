"""The MCMA paper's baselines (§4.1, Appendix A.2), behind the Memory interface.

* ``raw-trajectory`` (:class:`RawTrajectory`): successful trajectories stored whole;
  the Top-N by character-level similarity of task descriptions (the retrieval MCMA
  itself uses) are shown verbatim.
* ``trad`` (:class:`TRAD`, Zhou et al. 2024): *thought retrieval* over the steps of
  successful trajectories (each step embedded by the thought that led to it, else its
  action and the observation before it) and *aligned decision*: every retrieved step is
  shown with its temporal neighbours (``expand`` before and after: temporal expansion),
  each line marked by its position relative to the retrieved step (``[Step -1]``,
  ``[Step 0]``, ``[Step +1]``: relative order marks). :meth:`TRAD.recall` queries with
  the task and its first observation; :meth:`TRAD.observe` queries again after every
  step with that step's thought/observation, for agents that call it (step-level
  agents do; the ReAct agent of this project recalls once per episode).
* ``expel`` (:class:`ExpeL`, Zhao et al. 2024): a list of natural-language *insights*
  with importance votes, updated after every episode, plus the top-k most similar
  successful trajectories as in-context examples. ``llm`` mode follows ExpeL's insight
  operations (``ADD``, ``EDIT``, ``UPVOTE``, ``DOWNVOTE``; prompt
  ``prompts/mcma/expel_insights.txt``, schema-validated); ``deterministic`` mode derives
  one insight per episode (the rejected command forms of a failure, the sub-goal order
  of a success, at α = 1) and upvotes an identical existing one instead of adding it.
  Insights voted down to 0 are dropped; at most ``max_insights`` are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from deltamem.errors import ExtractionError
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig, FlatMemory, cosine
from deltamem.memories.mcma.grammar import grammar_for
from deltamem.memories.mcma.hierarchy import top_n
from deltamem.memories.mcma.preprocess import preprocess
from deltamem.memories.plan import InsertItem, Plan, UpdateItem
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Step, Task

__all__ = ["TRAD", "ExpeL", "RawTrajectory", "make_expel", "make_raw", "make_trad"]


def _render_steps(steps: Sequence[dict[str, Any]], limit: int = 300) -> str:
    return "\n".join(f"> {s['action']}\n{s['observation'][:limit]}" for s in steps)


def _steps(episode: Episode) -> list[dict[str, Any]]:
    return [{"action": s.action, "observation": s.observation, "thought": s.thought}
            for s in episode.steps]


# -- raw trajectory -------------------------------------------------------------------------


class RawConfig(FlatConfig):
    top_n: int = Field(default=2, ge=1, le=10)


class RawTrajectory(FlatMemory):
    """Raw successful trajectories, Top-N by character-level task similarity."""

    name = "raw-trajectory"
    config_class: ClassVar[type[FlatConfig]] = RawConfig
    source: ClassVar[str] = "trajectories"
    uses_llm: ClassVar[bool] = False
    header: ClassVar[str] = "Trajectories of similar tasks solved before:"
    config: RawConfig

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        items = [i for i in self._items() if i.kind == "trajectory"]
        if not items:
            return Recall(details={"matches": []})
        best = top_n(task.goal, [i.payload["goal"] for i in items], self.config.top_n)
        shown = [RecallItem(self.source, items[j].id, items[j].text, s, "exemplar")
                 for j, s in best]
        return Recall(text=self.header + "\n\n" + "\n\n".join(r.text for r in shown),
                      items=tuple(shown),
                      details={"matches": [{"id": r.id, "score": r.score} for r in shown]})

    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        if not episode.success:
            plan.changes.append(Change("skipped", self.source, "failed episodes are not kept"))
            return plan
        goal = episode.task.goal.strip()
        item = Item(system=self.name, kind="trajectory", text=f"Task: {goal}\n"
                    + _render_steps(_steps(episode)), payload={"goal": goal},
                    episode_id=episode.id)
        plan.changes.append(Change("written", self.source, f"trajectory of {goal}", item.id))
        plan.writes.append(InsertItem(item))
        return plan

    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == "trajectory"]


# -- TRAD -----------------------------------------------------------------------------------


class TRADConfig(FlatConfig):
    k: int = Field(default=3, ge=1, le=20)
    expand: int = Field(default=2, ge=0, le=10)


class TRAD(FlatMemory):
    """Thought retrieval with temporal expansion and relative order marks."""

    name = "trad"
    config_class: ClassVar[type[FlatConfig]] = TRADConfig
    source: ClassVar[str] = "steps"
    uses_llm: ClassVar[bool] = False
    header: ClassVar[str] = ("Expert steps retrieved for your situation, each with its "
                             "neighbouring steps; [Step 0] is the retrieved one.")
    config: TRADConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._task: Task | None = None

    @staticmethod
    def _key(goal: str, before: str, step: dict[str, Any]) -> str:
        return step["thought"].strip() or f"{goal}\n{before[:300]}\n{step['action']}"

    def _retrieve(self, query: str) -> Recall:
        items = [i for i in self._items() if i.kind == "step" and i.embedding is not None]
        if not items:
            return Recall(details={"matches": []})
        q = self._need_embedder().embed_queries([query])[0]
        scores = cosine(np.stack([i.embedding for i in items]), q)  # type: ignore[misc]
        order = np.argsort(-scores, kind="stable")[: self.config.k]
        trajs = {i.episode_id: i for i in self._items() if i.kind == "trajectory"}
        blocks, shown = [], []
        for j in order:
            it = items[int(j)]
            traj = trajs.get(it.episode_id)
            if traj is None:
                continue
            steps = traj.payload["steps"]
            at = int(it.payload["index"])
            lo, hi = max(0, at - self.config.expand), min(len(steps), at + self.config.expand + 1)
            lines = [f"Task: {traj.payload['goal']}"]
            for n in range(lo, hi):
                mark = f"[Step {n - at:+d}]" if n != at else "[Step 0]"
                lines.append(f"{mark} > {steps[n]['action']}\n{steps[n]['observation'][:200]}")
            text = "\n".join(lines)
            blocks.append(text)
            shown.append(RecallItem(self.source, it.id, text, float(scores[j]), "exemplar"))
        if not shown:
            return Recall(details={"matches": []})
        return Recall(text=self.header + "\n\n" + "\n\n".join(blocks), items=tuple(shown),
                      details={"matches": [{"id": r.id, "score": r.score} for r in shown]})

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        self._task = task
        return self._retrieve(f"{task.goal}\n{task.observation[:300]}")

    def observe(self, step: Step) -> Recall | None:
        if self._task is None:
            return None
        return self._retrieve(step.thought.strip() or
                              f"{self._task.goal}\n{step.observation[:300]}")

    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        if not episode.success:
            plan.changes.append(Change("skipped", self.source, "failed episodes are not kept"))
            return plan
        goal = episode.task.goal.strip()
        steps = _steps(episode)
        befores = [episode.task.observation] + [s["observation"] for s in steps[:-1]]
        keys = [self._key(goal, b, s) for b, s in zip(befores, steps, strict=True)]
        vecs = self._need_embedder().embed_passages(keys)
        traj = Item(system=self.name, kind="trajectory", text=_render_steps(steps),
                    payload={"goal": goal, "steps": steps}, episode_id=episode.id)
        items = [traj] + [Item(system=self.name, kind="step", text=s["action"],
                               payload={"index": n}, embedding=vecs[n], episode_id=episode.id)
                          for n, s in enumerate(steps)]
        plan.changes.append(Change("written", self.source, f"{len(steps)} expert steps of "
                                   f"{goal}", traj.id))
        plan.writes += [InsertItem(it) for it in items]
        return plan

    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == "trajectory"]


# -- ExpeL ----------------------------------------------------------------------------------

INSIGHT_MAX = 300


class ExpeLConfig(FlatConfig):
    k: int = Field(default=2, ge=0, le=10)
    max_insights: int = Field(default=20, ge=1, le=100)
    max_tokens: int = Field(default=500, ge=32)


def insight_ops_schema(n_insights: int) -> dict[str, Any]:
    """JSON schema of ExpeL's insight operations answer."""
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "maxItems": 4, "items": {
            "type": "object",
            "properties": {
                "op": {"enum": ["ADD", "EDIT", "UPVOTE", "DOWNVOTE"]},
                "index": {"type": "integer", "minimum": 1, "maximum": max(1, n_insights)},
                "text": {"type": "string", "minLength": 1, "maxLength": INSIGHT_MAX},
            },
            "required": ["op"], "additionalProperties": False}}},
        "required": ["operations"], "additionalProperties": False,
    }


class ExpeL(FlatMemory):
    """Insights with votes + retrieved successful trajectories (see the module docstring)."""

    name = "expel"
    config_class: ClassVar[type[FlatConfig]] = ExpeLConfig
    source: ClassVar[str] = "insights"
    header: ClassVar[str] = "Insights learned from earlier episodes, then similar solved tasks:"
    config: ExpeLConfig

    def _insights(self) -> tuple[Item | None, list[dict[str, Any]]]:
        for i in self._items():
            if i.kind == "insights":
                return i, list(i.payload.get("insights") or [])
        return None, []

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        _, insights = self._insights()
        trajs = [i for i in self._items() if i.kind == "trajectory" and i.embedding is not None]
        parts, shown = [], []
        if insights:
            ranked = sorted(insights, key=lambda x: -x["votes"])
            text = "\n".join(f"{n}. {x['text']}" for n, x in enumerate(ranked, 1))
            parts.append("## Insights\n" + text)
            shown.append(RecallItem(self.source, "insights", text, None, "insight"))
        if trajs and self.config.k:
            q = self._need_embedder().embed_queries([self.goal_text(task.goal)])[0]
            scores = cosine(np.stack([i.embedding for i in trajs]), q)  # type: ignore[misc]
            for j in np.argsort(-scores, kind="stable")[: self.config.k]:
                it = trajs[int(j)]
                parts.append("## Example\n" + it.text)
                shown.append(RecallItem("trajectories", it.id, it.text, float(scores[j]),
                                        "exemplar"))
        if not parts:
            return Recall(details={"insights": 0})
        return Recall(text=self.header + "\n\n" + "\n\n".join(parts), items=tuple(shown),
                      details={"insights": len(insights)})

    def _derive(self, episode: Episode) -> str:
        g = grammar_for(episode.task.domain, tuple(s.action for s in episode.steps))
        goal = g.abstract(episode.task.goal.strip())
        if not episode.success:
            bad = list(dict.fromkeys(g.abstract(s.action) for s in episode.steps
                                     if not s.valid or g.rejected(s.observation)))
            if bad:
                return (f"In tasks like '{goal}', commands such as "
                        f"{', '.join(repr(b) for b in bad[:3])} have no effect: use the "
                        "admissible command forms.")[:INSIGHT_MAX]
            return (f"Tasks like '{goal}' can fail by running out of steps: reach each "
                    "sub-goal directly, without wandering.")[:INSIGHT_MAX]
        tree = preprocess(episode)
        order = " -> ".join(g.abstract(c.name) for c in tree.children) or "act directly"
        return f"To {goal}: {order}."[:INSIGHT_MAX]

    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        item, insights = self._insights()
        insights = [dict(x) for x in insights]
        if self.config.mode == "llm":
            from deltamem.memories.mcma.prompts import ask_validated, load

            listing = "\n".join(f"{n}. {x['text']}" for n, x in enumerate(insights, 1)) or \
                "(none yet)"
            steps = _render_steps(_steps(episode), 150)[-3000:]
            prompt = load("expel_insights").substitute(
                insights=listing, task=episode.task.goal.strip(),
                result="SUCCESS" if episode.success else "FAILURE", trajectory=steps)
            try:
                obj = ask_validated(self._need_llm(), role="expel_insights", purpose="extract",
                                    prompt=prompt, schema=insight_ops_schema(len(insights)),
                                    shape='{"operations": [{"op": "ADD", "text": "..."}]}',
                                    max_tokens=self.config.max_tokens)
                ops = obj["operations"]
            except ExtractionError as e:
                plan.reject(self.source, e)
                ops = []
        else:
            text = self._derive(episode)
            same = next((n for n, x in enumerate(insights, 1) if x["text"] == text), None)
            ops = [{"op": "UPVOTE", "index": same}] if same else [{"op": "ADD", "text": text}]
        for op in ops:
            kind = op["op"]
            idx = op.get("index")
            if kind == "ADD" and op.get("text"):
                insights.append({"text": op["text"], "votes": 2})
            elif idx is not None and 1 <= idx <= len(insights):
                x = insights[idx - 1]
                if kind == "UPVOTE":
                    x["votes"] += 1
                elif kind == "DOWNVOTE":
                    x["votes"] -= 1
                elif kind == "EDIT" and op.get("text"):
                    x["text"], x["votes"] = op["text"], x["votes"] + 1
            plan.changes.append(Change("written" if kind == "ADD" else "consolidated",
                                       self.source, f"{kind} insight"))
        insights = [x for x in insights if x["votes"] > 0]
        insights.sort(key=lambda x: -x["votes"])
        insights = insights[: self.config.max_insights]
        writes: list[Item] = []
        if episode.success:
            goal = episode.task.goal.strip()
            vec = self._need_embedder().embed_passages([self.goal_text(goal)])[0]
            writes.append(Item(system=self.name, kind="trajectory", text=f"Task: {goal}\n"
                               + _render_steps(_steps(episode), 200), payload={"goal": goal},
                               embedding=vec, episode_id=episode.id))
            plan.changes.append(Change("written", "trajectories", f"example: {goal}",
                                       writes[0].id))
        text = "\n".join(x["text"] for x in insights)
        plan.writes += [InsertItem(it) for it in writes]
        if item is None:
            plan.writes.append(InsertItem(Item(system=self.name, kind="insights", key="current",
                                               text=text, payload={"insights": insights},
                                               episode_id=episode.id)))
        else:
            plan.writes.append(UpdateItem(item.id, text=text, payload={"insights": insights},
                                          embedding=None, episode_id=episode.id))
        return plan

    def _token_units(self, items: Sequence[Item]) -> list[str]:
        out = [i.text for i in items if i.kind == "trajectory"]
        _, ins = self._insights()
        return out + [x["text"] for x in ins]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        _, ins = self._insights()
        return {"insights": len(ins), "examples": sum(1 for i in items
                                                      if i.kind == "trajectory")}


Kind = Literal["raw", "trad", "expel"]
make_raw = make_factory(RawTrajectory)
make_trad = make_factory(TRAD)
make_expel = make_factory(ExpeL)
