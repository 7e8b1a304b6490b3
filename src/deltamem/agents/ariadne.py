"""The Ariadne agent (paper §3, Appendix B): working memory, a planner and a ReAct decision.

Each step:

1. **Working memory**: the goal, the current observation, the last
   ``history`` observations and actions, what the memory returned (the
   :class:`~deltamem.types.Recall` of ``memory.observe``: text, plus, for
   AriGraph, the location, spatial triplets and unexplored exits in
   ``details``) and the plan.
2. **Exploration check** (Appendix B): whether the first sub-goal needs
   finding something — by keywords (default, no LLM call) or by an LLM call
   (``explore_check="llm"``). In exploration mode the unexplored exits are
   added to the prompts.
3. **Planning** (purpose ``plan``): a JSON plan ``{"main_goal", "plan_steps":
   [{"sub_goal", "reason"}]}`` revised from the previous one. Output that stays
   invalid after one repair is logged and the previous plan is kept.
4. **Decision** (purpose ``act``): ReAct-style JSON ``{"reason_for_action",
   "action_to_take"}`` choosing among the admissible actions plus ``go to
   <place>`` for every known place with a known route (the schema lists the
   options as an enum). ``go to`` runs the moves of the route, one environment
   step (and one ``observe``) each.
   An action that is not an option (or invalid output) is recorded with
   ``valid=False`` and :data:`~deltamem.agents.react.INVALID_OBSERVATION`
   without stepping the environment, as the ReAct agent does.

**Output bounds.** Every JSON answer has tight ``maxLength``/``maxItems``
bounds (:func:`plan_schema`, :func:`decision_schema`): a small local model
under a JSON grammar tends to fill strings up to their limit, so the bounds
set the cost of a call, and they keep the worst case under ``max_tokens`` (a
JSON answer cut by the token cap is invalid and costs a repair call). Plan:
at most ``plan_steps`` (default 5) sub-goals of at most 100 characters with a
reason of at most 100, a main goal of at most 200; decision reason at most 200.

**Settings from the memory.** ``history``, ``explore_check`` and
``plan_steps`` left at ``None`` are taken from the memory's configuration
(``memory.config``, e.g. ``-o plan_steps=3 -o explore_check=llm`` on the
command line), else from the defaults (5, ``keywords``, 5). A value given to
the agent wins over the memory's.

**What the agent uses of a memory.** The :class:`~deltamem.memory.Memory` contract:
``recall(task)``, and ``observe(step)`` after every environment step (the opening
observation is sent as ``Step("", task.observation)``; a returned recall replaces the
working one). When the memory has them, three optional members, read with ``getattr``
(the agent knows no memory system by name):

* ``note_plan(text)``: the plan's sub-goals, after every planning call;
* ``routes(details)``: ``"go to <place>"`` → its moves, from a recall's details (a
  memory that knows places: AriGraph, whose recall carries the location and the
  spatial triplets); without it no ``go to`` action is offered;
* ``trials`` and ``reflect(episode)`` (Reflexion): with ``trials > 1``, after a failed
  attempt the agent calls ``memory.reflect(episode)``, resets the environment to the
  same task and plays again with ``memory.recall(task)``. The returned episode is the
  last attempt; its usage covers all attempts.

Its prompts are ``deltamem/prompts/ariadne/{plan,act,explore_check}.txt``, sent after
:data:`AGENT_SYSTEM`. **Prompt layout:** the plan and the decision prompt open with the same
working memory (goal, history, observation, memory), and each call's own part (the plan,
the exits, the actions and the instructions) comes after it, so the decision re-uses the
planner's evaluated prefix in a model's KV cache instead of evaluating it again (the paper
gives the components, not their order).

**Sampling.** ``temperature`` (0: greedy) applies to the planner and the decision; with
it above 0, a game's repeated attempts (the paper's five attempts per game) differ.

Step cap, rewards and outcome follow :class:`~deltamem.agents.react.ReActAgent`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Literal

from deltamem.agents.parsing import match_action
from deltamem.agents.react import INVALID_OBSERVATION, without_loops
from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.base import LLMClient
from deltamem.llm.structured import ask_json
from deltamem.memory import Memory
from deltamem.templates import render_prompt
from deltamem.types import Episode, Recall, Step, Task, Usage

__all__ = [
    "AGENT_SYSTEM",
    "DEFAULTS",
    "AriadneAgent",
    "Plan",
    "decision_schema",
    "needs_exploration",
    "plan_schema",
]

log = logging.getLogger(__name__)

GOAL_CHARS = 200
"""Longest ``main_goal`` of a plan (characters)."""
STEP_CHARS = 100
"""Longest ``sub_goal`` and longest ``reason`` of a plan step (characters)."""
REASON_CHARS = 200
"""Longest ``reason_for_action`` of a decision (characters)."""
AGENT_SYSTEM = ("You are an agent that plays a text-based game: you keep a plan and choose "
                "actions. Answer with one JSON object and nothing else.")
"""The system message of the planner, the decision and the exploration check."""
DEFAULTS: dict[str, Any] = {"history": 5, "explore_check": "keywords", "plan_steps": 5}
"""Agent settings used when neither the agent nor the memory's config sets them."""


def _text(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def plan_schema(plan_steps: int = DEFAULTS["plan_steps"]) -> dict[str, Any]:
    """The planner's JSON schema: a main goal and 1..``plan_steps`` sub-goals with reasons."""
    if not isinstance(plan_steps, int) or plan_steps < 1:
        raise ConfigError(f"plan_steps must be a positive int, got {plan_steps!r}")
    return {
        "type": "object",
        "properties": {
            "main_goal": _text(GOAL_CHARS),
            "plan_steps": {"type": "array", "minItems": 1, "maxItems": plan_steps, "items": {
                "type": "object",
                "properties": {"sub_goal": _text(STEP_CHARS), "reason": _text(STEP_CHARS)},
                "required": ["sub_goal", "reason"],
                "additionalProperties": False,
            }},
        },
        "required": ["main_goal", "plan_steps"],
        "additionalProperties": False,
    }


def decision_schema(options: Sequence[str], max_listed: int = 80) -> dict[str, Any]:
    """The decision's JSON schema; the action is an enum of ``options`` when there are
    1..``max_listed`` of them, else a string of at most 200 characters."""
    action: dict[str, Any] = _text(200)
    if options and len(options) <= max_listed:
        action = {"type": "string", "enum": list(options)}
    return {
        "type": "object",
        "properties": {"reason_for_action": _text(REASON_CHARS), "action_to_take": action},
        "required": ["reason_for_action", "action_to_take"],
        "additionalProperties": False,
    }


PLAN_SCHEMA: dict[str, Any] = plan_schema()
_EXPLORE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"explore": {"type": "boolean"}},
    "required": ["explore"], "additionalProperties": False,
}
_EXPLORE_WORDS = re.compile(r"\b(?:find|locate|explore|search|look for|discover|where)\b",
                            re.IGNORECASE)
_OBS_CHARS = 1500


@dataclass
class Plan:
    """The planner's current plan."""

    main_goal: str
    steps: list[tuple[str, str]] = field(default_factory=list)

    def render(self) -> str:
        if not self.steps:
            return "(no plan yet)"
        return "\n".join(f"{i}. {g} (reason: {r})" for i, (g, r) in enumerate(self.steps, 1))

    def sub_goals(self) -> str:
        return "\n".join(g for g, _ in self.steps)


def needs_exploration(plan: Plan) -> bool:
    """Keyword exploration check: the first sub-goal asks to find, locate or explore."""
    return bool(plan.steps) and bool(_EXPLORE_WORDS.search(plan.steps[0][0]))


@dataclass
class AriadneAgent:
    """The Ariadne agent (see the module docstring).

    Args:
        llm: the model.
        domain: prompt domain (recorded; Ariadne's prompts are domain-free).
        max_steps: step cap overriding ``env.max_steps(task)``.
        history: recent observations/actions in working memory (``n_prev``);
            ``None``: the memory's setting (module docstring).
        explore_check: ``keywords`` or ``llm``; ``None``: the memory's setting.
        plan_steps: most sub-goals in a plan; ``None``: the memory's setting.
        navigation: offer ``go to <place>`` actions.
        max_listed_actions: options beyond this many are not put in the schema enum.
        max_tokens: completion budget of planner and decision calls.
        temperature: sampling temperature.
        repeat_limit: leave out of the decision an action already taken this many times
            from the current observation, as :class:`~deltamem.agents.react.ReActAgent`
            does (``None``: off).
    """

    llm: LLMClient
    _: KW_ONLY
    domain: str = "textworld"
    max_steps: int | None = None
    history: int | None = None
    explore_check: Literal["keywords", "llm"] | None = None
    plan_steps: int | None = None
    navigation: bool = True
    max_listed_actions: int = 80
    max_tokens: int = 500
    temperature: float = 0.0
    repeat_limit: int | None = None

    def play(self, env: Environment, task: Task, recall: Recall,
             memory: Memory | None = None) -> Episode:
        """Play ``task`` (already reset in ``env``); see the module docstring."""
        if self.repeat_limit is not None and (
                not isinstance(self.repeat_limit, int) or self.repeat_limit < 1):
            raise ConfigError(
                f"repeat_limit must be an int >= 1 or None, got {self.repeat_limit!r}")
        cap = self.max_steps if self.max_steps is not None else env.max_steps(task)
        if not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"step cap must be a positive integer, got {cap!r}")
        resolved = self.settings(memory)
        if resolved != {k: getattr(self, k) for k in DEFAULTS}:
            return replace(self, **resolved).play(env, task, recall, memory)
        before = self.llm.usage.snapshot()
        trials = max(1, int(getattr(memory, "trials", 1) or 1))
        episode = self._trial(env, task, recall, memory, cap, before)
        for _ in range(trials - 1):
            if episode.success:
                break
            reflect = getattr(memory, "reflect", None)
            if callable(reflect):
                reflect(episode)
            task = env.reset(task.id)
            recall = memory.recall(task) if memory is not None else Recall()
            episode = self._trial(env, task, recall, memory, cap, before)
        return episode

    def settings(self, memory: Memory | None = None) -> dict[str, Any]:
        """``history``, ``explore_check`` and ``plan_steps`` in effect with ``memory``: the
        agent's own value, else the memory config's, else :data:`DEFAULTS`. Validated
        (:class:`ConfigError`)."""
        config = getattr(memory, "config", None)
        out: dict[str, Any] = {}
        for key, default in DEFAULTS.items():
            value = getattr(self, key)
            if value is None:
                value = getattr(config, key, None)
            out[key] = default if value is None else value
        if out["explore_check"] not in ("keywords", "llm"):
            raise ConfigError(f"explore_check must be 'keywords' or 'llm', "
                              f"got {out['explore_check']!r}")
        for key, low in (("history", 0), ("plan_steps", 1)):
            v = out[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ConfigError(f"{key} must be an int >= {low}, got {v!r}")
        return out

    # -- one attempt ------------------------------------------------------------------------
    def _trial(self, env: Environment, task: Task, recall: Recall, memory: Memory | None,
               cap: int, before: Usage) -> Episode:
        wm = _WorkingMemory(task=task, recall=recall, plan=Plan(task.goal))
        self._observe(memory, Step(action="", observation=task.observation), wm)
        steps: list[Step] = []
        last: Transition | None = None
        score = 0.0
        while len(steps) < cap:
            self._plan(wm, memory)
            admissible = tuple(env.admissible_actions())
            options = without_loops(admissible, task.observation, steps, self.repeat_limit)
            routes = self._routes(memory, wm.recall) if self.navigation else {}
            reason, choice = self._decide(wm, options, routes)
            moves = routes.get(choice) if choice is not None else None
            if choice is None:
                steps.append(Step(action=wm.last_answer, observation=INVALID_OBSERVATION,
                                  thought=reason, valid=False, admissible=admissible))
                wm.push(steps[-1])
                continue
            for action in moves or [choice]:
                if len(steps) >= cap:
                    break
                t = env.step(action)
                step = Step(action=action, observation=t.observation, reward=t.score - score,
                            done=t.done, thought=reason if moves is None else
                            f"{reason} [{choice}]", valid=t.valid, admissible=admissible)
                score, last = t.score, t
                steps.append(step)
                wm.push(step)
                self._observe(memory, step, wm)
                admissible = tuple(env.admissible_actions()) if not t.done else ()
                if t.done:
                    break
            if steps and steps[-1].done:
                break
        return Episode(task=task, steps=tuple(steps),
                       success=bool(last is not None and last.success),
                       reward=float(last.score) if last is not None else 0.0,
                       max_steps=cap, usage=self.llm.usage.since(before))

    @staticmethod
    def _routes(memory: Memory | None, recall: Recall) -> Mapping[str, list[str]]:
        """``go to <place>`` → moves, from a memory that knows places (``routes``), else none."""
        routes = getattr(memory, "routes", None)
        return routes(recall.details) if callable(routes) else {}

    @staticmethod
    def _observe(memory: Memory | None, step: Step, wm: _WorkingMemory) -> None:
        if memory is None:
            return
        r = memory.observe(step)
        if r is not None:
            wm.recall = r

    def _values(self, wm: _WorkingMemory) -> dict[str, object]:
        exits = wm.recall.details.get("unexplored_exits") or []
        block = ""
        if wm.explore and exits:
            block = "6. Yet unexplored exits: " + "; ".join(exits) + "\n"
        return {
            "goal": wm.task.goal,
            "n_prev": self.history,
            "history": wm.history(int(self.history or 0)),
            "observation": wm.observation[:_OBS_CHARS],
            "memory": wm.recall.text.strip() or "(nothing)",
            "plan": wm.plan.render(),
            "exits": block,
        }

    def _plan(self, wm: _WorkingMemory, memory: Memory | None) -> None:
        try:
            obj = ask_json(self.llm, role="ariadne_plan", purpose="plan",
                           prompt=render_prompt("ariadne", "plan", **self._values(wm)),
                           schema=plan_schema(int(self.plan_steps or DEFAULTS["plan_steps"])),
                           shape='{"main_goal": str, "plan_steps": [{"sub_goal", "reason"}]}',
                           max_tokens=self.max_tokens, system=AGENT_SYSTEM,
                           temperature=self.temperature)
        except ExtractionError:
            wm.plan_rejections += 1  # ask_json logged it; the previous plan stays
        else:
            wm.plan = Plan(obj["main_goal"],
                           [(s["sub_goal"], s["reason"]) for s in obj["plan_steps"]])
        note = getattr(memory, "note_plan", None)
        if callable(note):
            note(wm.plan.sub_goals())
        if self.explore_check == "llm":
            try:
                wm.explore = bool(ask_json(
                    self.llm, role="ariadne_explore", purpose="plan",
                    prompt=render_prompt("ariadne", "explore_check", plan=wm.plan.render()),
                    schema=_EXPLORE_SCHEMA, shape='{"explore": bool}', max_tokens=20,
                    system=AGENT_SYSTEM, temperature=self.temperature,
                )["explore"])
            except ExtractionError:
                wm.explore = needs_exploration(wm.plan)
        else:
            wm.explore = needs_exploration(wm.plan)

    def _decide(self, wm: _WorkingMemory, admissible: Sequence[str],
                routes: Mapping[str, list[str]]) -> tuple[str, str | None]:
        options = list(dict.fromkeys([*admissible, *routes]))
        schema = decision_schema(options, self.max_listed_actions)
        values = self._values(wm)
        values["actions"] = "; ".join(options) if options else "(any command)"
        try:
            obj = ask_json(self.llm, role="ariadne_act", purpose="act",
                           prompt=render_prompt("ariadne", "act", **values), schema=schema,
                           shape='{"reason_for_action": str, "action_to_take": str}',
                           max_tokens=self.max_tokens, system=AGENT_SYSTEM,
                           temperature=self.temperature)
        except ExtractionError as e:
            wm.last_answer = e.raw[:200]
            return "", None
        wm.last_answer = obj["action_to_take"]
        return obj["reason_for_action"], match_action(obj["action_to_take"], options)


@dataclass
class _WorkingMemory:
    task: Task
    recall: Recall
    plan: Plan
    steps: list[Step] = field(default_factory=list)
    explore: bool = False
    plan_rejections: int = 0
    last_answer: str = ""

    @property
    def observation(self) -> str:
        return self.steps[-1].observation if self.steps else self.task.observation

    def push(self, step: Step) -> None:
        self.steps.append(step)

    def history(self, n: int) -> str:
        if n <= 0 or len(self.steps) <= 1:
            return "(none)"
        lines = []
        for s in self.steps[-n - 1:-1]:
            lines.append(f"> {s.action}\n{' '.join(s.observation.split())[:400]}")
        return "\n".join(lines)
