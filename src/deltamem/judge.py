"""Outcome judges: whether an episode reached its goal, read from its trajectory.

Benchmarks know each episode's outcome; an agent at work usually does not. A judge reads
the goal, the steps (action and observation) and the last observation and returns a
:class:`~deltamem.types.Verdict`: ``success`` or ``failure`` with a reason, ``uncertain``
when it cannot tell, ``refused`` when it gave no valid answer. Only a decided verdict is
learned from (:class:`~deltamem.recorder.EpisodeRecorder` with ``judge=``): a guess would
write a failed trajectory as a SUCCESS skill, which later recalls follow (a FAILURE node
would have been penalised by ε, Eq. 6, and shown as a warning).

Two judges ship:

* :class:`LLMJudge`: one schema-validated JSON answer ``{"verdict", "reason"}`` from any
  :class:`~deltamem.llm.base.LLMClient` (prompt ``prompts/judge/outcome.txt``), through the
  repair loop of :mod:`deltamem.llm.structured`; an answer still invalid after one repair is
  ``refused``. Calls are counted under the purpose ``judge``.
* :class:`ScriptedJudge` (spec ``scripted``): no model. An outcome the last observation
  states ("you won", "task completed", "you lost", ...) decides; else, for the household /
  ALFWorld goal forms ("put a hot apple in fridge", "examine the cd with the desklamp"),
  it replays the trajectory's confirmed effects (picked up, heated, moved to, turned on)
  and checks the goal's condition; anything else is ``uncertain``.

:func:`make_judge` builds either from a spec: ``scripted``, or an LLM spec
(``local``, ``openai:MODEL``, ...; see :func:`deltamem.llm.factory.make_llm`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from deltamem.errors import ConfigError, ExtractionError
from deltamem.extract.llm import render_trajectory
from deltamem.llm.base import LLMClient
from deltamem.llm.structured import ask_json, truncate_middle
from deltamem.templates import render_prompt
from deltamem.types import Step, Task, Verdict

__all__ = [
    "JUDGE_SCHEMA",
    "Judge",
    "LLMJudge",
    "ScriptedJudge",
    "make_judge",
]

JUDGE_SCHEMA: dict[str, Any] = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["success", "failure", "uncertain"]},
        "reason": {"type": "string", "minLength": 1, "maxLength": 300},
    },
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
"""What an LLM judge must answer: a verdict and a one-sentence reason."""

JUDGE_SYSTEM = (
    "You check whether an agent's episode reached its goal. Judge only from the steps "
    "shown. Answer with one JSON object and nothing else."
)


@runtime_checkable
class Judge(Protocol):
    """Decides an episode's outcome from its task and steps.

    ``judge(task, steps)`` returns a :class:`~deltamem.types.Verdict` whose ``judge``
    field names this judge (``name``). It must not raise for an answer it cannot read
    (that is a ``refused`` verdict); errors of the model's backend propagate.
    """

    name: str

    def judge(self, task: Task, steps: Sequence[Step]) -> Verdict: ...


class LLMJudge:
    """An LLM reads the goal, the trajectory and the final state (see the module doc).

    Args:
        llm: any :class:`~deltamem.llm.base.LLMClient` (purpose ``judge``).
        max_trajectory_chars: the rendered trajectory keeps its beginning and end within
            this budget (:func:`~deltamem.llm.structured.truncate_middle`).
        name: who the verdict names; default ``llm:<llm.name>``.
    """

    def __init__(self, llm: LLMClient, *, max_trajectory_chars: int = 4000,
                 name: str | None = None) -> None:
        self.llm = llm
        self.max_trajectory_chars = max_trajectory_chars
        self.name = name or f"llm:{getattr(llm, 'name', 'llm')}"

    def prompt(self, task: Task, steps: Sequence[Step]) -> str:
        """The judge prompt of an episode."""
        final = steps[-1].observation.strip() if steps else ""
        return render_prompt(
            "judge", "outcome",
            goal=task.goal.strip(),
            scene=truncate_middle(task.scene_text.strip() or "(not described)", 800),
            trajectory=truncate_middle(render_trajectory(steps) or "(no step)",
                                       self.max_trajectory_chars),
            final=truncate_middle(final or "(nothing)", 600),
        )

    def judge(self, task: Task, steps: Sequence[Step]) -> Verdict:
        try:
            obj = ask_json(self.llm, role="judge", purpose="judge",
                           prompt=self.prompt(task, steps), schema=JUDGE_SCHEMA,
                           shape='{"verdict": "success"|"failure"|"uncertain", "reason": "..."}',
                           max_tokens=160, system=JUDGE_SYSTEM)
        except ExtractionError as e:
            return Verdict("refused", f"no valid verdict: {e}", self.name)
        return Verdict(obj["verdict"], obj["reason"].strip(), self.name)


# -- the scripted judge ------------------------------------------------------------------------

_WON = ("you won", "you win", "task completed", "task is completed", "goal achieved",
        "congratulations")
_LOST = ("you lost", "you lose", "game over", "you died", "task failed")

_W = r"[a-z][a-z0-9]*"
#: household / ALFWorld goal forms: (pattern, what must happen to the object before placing)
_GOAL_FORMS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), kind) for p, kind in (
        (rf"^(?:put a clean (?P<obj>{_W}) in|clean some (?P<obj2>{_W}) and put it in) "
         rf"(?P<recep>{_W})$", "clean"),
        (rf"^(?:put a hot (?P<obj>{_W}) in|heat some (?P<obj2>{_W}) and put it in) "
         rf"(?P<recep>{_W})$", "heat"),
        (rf"^(?:put a cool (?P<obj>{_W}) in|cool some (?P<obj2>{_W}) and put it in) "
         rf"(?P<recep>{_W})$", "cool"),
        (rf"^(?:put two (?P<obj>{_W}) in|find two (?P<obj2>{_W}) and put them in) "
         rf"(?P<recep>{_W})$", "two"),
        (rf"^(?:look at (?P<obj>{_W}) under the|examine the (?P<obj2>{_W}) with the) "
         rf"(?P<recep>{_W})$", "look"),
        (rf"^put (?:a|an|some) (?P<obj>{_W}) (?:in|on|in/on) (?P<recep>{_W})$", "place"),
    )
)

_TAKE = re.compile(rf"^take ({_W} \d+) from ({_W}(?: {_W})?)")
_MOVE = re.compile(rf"^(?:move|put) ({_W} \d+) (?:to|in|on|in/on) ({_W}(?: \d+)?)")
_CHANGE = re.compile(rf"^(clean|heat|cool) ({_W} \d+) with ")
_GOTO = re.compile(rf"^go to ({_W}(?: \d+)?)")
_USE = re.compile(rf"^use ({_W} \d+)")


def _kind(instance: str) -> str:
    """``apple 2`` → ``apple``."""
    return instance.rsplit(" ", 1)[0] if instance[-1:].isdigit() else instance


@dataclass
class _World:
    """What a household trajectory's confirmed effects say about the final state."""

    holding: str | None = None
    where: str | None = None
    placed: dict[str, str] = field(default_factory=dict)  # instance -> receptacle kind
    changed: dict[str, set[str]] = field(default_factory=dict)  # instance -> clean/heat/cool
    lamps_on: dict[str, str | None] = field(default_factory=dict)  # lamp -> where it is

    def apply(self, action: str, observation: str) -> None:
        a, o = action.strip().lower(), observation.strip().lower()
        if (m := _TAKE.match(a)) and o.startswith("you pick up"):
            self.holding = m.group(1)
            self.placed.pop(m.group(1), None)
        elif (m := _MOVE.match(a)) and o.startswith(("you move", "you put")):
            self.placed[m.group(1)] = _kind(m.group(2))
            if self.holding == m.group(1):
                self.holding = None
        elif (m := _CHANGE.match(a)) and o.startswith(f"you {m.group(1)}"):
            self.changed.setdefault(m.group(2), set()).add(m.group(1))
        elif (m := _GOTO.match(a)) and o.startswith("you arrive"):
            self.where = m.group(1)
        elif m := _USE.match(a):
            if o.startswith("you turn on"):
                self.lamps_on[m.group(1)] = self.where
            elif o.startswith("you turn off"):
                self.lamps_on.pop(m.group(1), None)

    def reached(self, kind: str, obj: str, recep: str) -> str | None:
        """Why the goal holds now, or ``None``."""
        if kind == "look":
            held = self.holding if self.holding and _kind(self.holding) == obj else None
            lamps = [lamp for lamp, at in self.lamps_on.items()
                     if _kind(lamp) == recep and at == self.where]
            if held and lamps:
                return f"holds {held} where {lamps[0]} is turned on"
            return None
        inside = [i for i, r in self.placed.items() if _kind(i) == obj and r == recep]
        if kind == "two":
            return f"{inside[0]} and {inside[1]} are in/on a {recep}" if len(inside) >= 2 else None
        if kind in ("clean", "heat", "cool"):
            inside = [i for i in inside if kind in self.changed.get(i, set())]
            done = {"clean": "cleaned", "heat": "heated", "cool": "cooled"}[kind]
            return f"{inside[0]} was {done} and is in/on a {recep}" if inside else None
        return f"{inside[0]} is in/on a {recep}" if inside else None


class ScriptedJudge:
    """The model-free judge (spec ``scripted``; see the module doc for its rules).

    Deterministic. What it cannot read is ``uncertain``: goals outside the household
    forms whose last observation states no outcome (ScienceWorld's, a user's own).
    """

    name = "scripted"

    def judge(self, task: Task, steps: Sequence[Step]) -> Verdict:
        last = steps[-1].observation.lower() if steps else ""
        for cue in _WON:
            if cue in last:
                return Verdict("success", f"the last observation says {cue!r}", self.name)
        for cue in _LOST:
            if cue in last:
                return Verdict("failure", f"the last observation says {cue!r}", self.name)
        goal = " ".join(task.goal.lower().replace(".", " ").split())
        for pattern, kind in _GOAL_FORMS:
            m = pattern.match(goal)
            if m is None:
                continue
            obj = m.group("obj") or m.groupdict().get("obj2") or ""
            recep = m.group("recep")
            world = _World()
            for i, s in enumerate(steps):
                world.apply(s.action, s.observation)
                why = world.reached(kind, obj, recep)
                if why is not None:
                    return Verdict("success", f"after step {i + 1}: {why}", self.name)
            return Verdict("failure", f"no step makes '{goal}' true", self.name)
        return Verdict("uncertain", "no rule reads this goal and the last observation "
                       "states no outcome", self.name)


def make_judge(spec: str, **llm_options: Any) -> Judge:
    """The judge named by ``spec``: ``scripted`` (:class:`ScriptedJudge`), else an LLM spec
    for an :class:`LLMJudge` (``llm_options`` go to :func:`~deltamem.llm.factory.make_llm`,
    e.g. ``cache_path``).

    >>> make_judge("scripted").name
    'scripted'
    """
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty judge spec; use 'scripted' or an LLM spec such as 'local'")
    if spec == "scripted":
        return ScriptedJudge()
    from deltamem.llm.factory import make_llm

    return LLMJudge(make_llm(spec, **llm_options))
