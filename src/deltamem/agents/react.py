"""The ReAct agent (Yao et al., 2022) every memory system is evaluated with (paper §4.1).

One LLM call per step, counted under the purpose ``act``. The prompt layout is
described in :mod:`deltamem.agents.prompts`.

Contract of :meth:`ReActAgent.play`:

* **Step cap.** ``max_steps`` when given, else ``env.max_steps(task)`` (the
  adapters set ALFWorld 30, WebShop 15, ScienceWorld per task). Every turn
  counts, invalid ones included, so a model that keeps answering garbage
  still stops.
* **Free mode** (default). The model answers ``Thought: …`` / ``Action: …``;
  the action is parsed by :func:`~deltamem.agents.parsing.parse_reply` and
  mapped onto the admissible list by
  :func:`~deltamem.agents.parsing.match_action` (case and spacing do not
  matter; the admissible spelling is sent).
* **Invalid actions.** When the environment lists admissible actions and the
  parsed action is not among them (or the reply had no action), the
  environment is **not** stepped: its state stays as it was, the step is
  recorded with ``valid=False`` and the observation :data:`INVALID_OBSERVATION`,
  which the model sees in its history. Not stepping keeps adapters free of
  garbage input and makes the count of invalid actions exact. When the
  environment lists no admissible actions, every non-empty action is sent
  and ``valid`` comes from the environment's :class:`Transition`.
* **Constrained mode.** The model picks one admissible action through
  ``llm.complete(..., choices=admissible, purpose="act")``; only admissible
  actions ever reach the environment. It needs admissible lists without
  placeholders (:class:`ConfigError` otherwise), and a backend that returns
  anything but one of the choices raises :class:`LLMError`. A choice among one
  action is taken without calling the model (its answer could only be that one).
* **Repeat limit** (constrained mode, off by default). With
  ``repeat_limit=k``, an action already taken ``k`` times in this episode from
  the same observation as the current one is left out of the next choice list
  (unless nothing would remain): small models otherwise loop on ``inventory``
  or ``look``, or walk a fixed cycle of places, for the whole episode. The
  prompt is unchanged; only the choices shrink.
* **Outcome.** ``Step.reward`` is the increase of the environment's
  normalised score; ``Episode.reward`` and ``Episode.success`` come from the
  last transition (0 and failure when the environment was never stepped).
  ``Episode.usage`` is the LLM usage spent during the episode.
* **Guide** (``guide``, off by default: the paper's agent). ``hint``: the next
  step of the recalled procedure, filled from the current goal and made concrete
  against the admissible actions (:mod:`deltamem.agents.guide`), is shown as one
  line right before the action list. ``prior`` (constrained mode): the hint, and
  the choice is made among the admissible actions that realise that step (an
  unbounded bonus for them over the rest; among all admissible actions when none
  does, or when the repeat limit leaves none of them). The guide reads only the
  recall (its items one by one, best first), the goal, the admissible actions and the
  episode so far — the same for every memory system; with an empty recall it does
  nothing. It follows the environment's rule set
  (:attr:`~deltamem.envs.base.Environment.guide_rules`).
* Deterministic whenever the LLM and the environment are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal

from deltamem.agents.guide import Guide
from deltamem.agents.parsing import has_placeholder, match_action, parse_reply
from deltamem.agents.prompts import CUE_PLACES, build_messages, load_agent_prompts
from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError, LLMError
from deltamem.llm.base import LLMClient
from deltamem.types import Episode, Recall, Step, Task

__all__ = ["INVALID_OBSERVATION", "ReActAgent", "without_loops"]

INVALID_OBSERVATION = "Nothing happens. That action is not available now; choose another one."
"""Observation recorded (and shown to the model) for an action that was not admissible."""


def without_loops(admissible: tuple[str, ...], first_observation: str, steps: Sequence[Step],
                  limit: int | None) -> tuple[str, ...]:
    """``admissible`` minus each action already taken ``limit`` times from an observation
    equal to the current one (the module's *Repeat limit*); all of ``admissible`` when
    nothing would remain or ``limit`` is ``None``. Shared by the ReAct and Ariadne agents."""
    if limit is None or not steps:
        return admissible
    observations = [first_observation, *(s.observation for s in steps)]
    now = observations[-1]
    taken: dict[str, int] = {}
    for before, step in zip(observations, steps, strict=False):
        if before == now:
            taken[step.action] = taken.get(step.action, 0) + 1
    kept = tuple(a for a in admissible if taken.get(a, 0) < limit)
    return kept or admissible


@dataclass
class ReActAgent:
    """A ReAct agent playing one task per :meth:`play` call.

    Args:
        llm: the model (any :class:`~deltamem.llm.LLMClient`).
        domain: prompt domain (``alfworld``, ``scienceworld``, ``webshop``,
            ``textworld``, ``generic``).
        constrained: pick actions from the admissible list (see module docstring).
        max_steps: step cap overriding ``env.max_steps(task)``.
        history_chars: the running history is trimmed from the front to this
            many characters, in blocks (down to half of it, then kept until it is full
            again: :func:`~deltamem.agents.prompts.history_start`), so the prompt before
            the newest step stays a prefix the model can reuse; the task itself is
            always kept.
        max_listed_actions: the admissible actions are listed in the prompt when
            there are at most this many (0: never).
        max_tokens: completion budget of each call.
        temperature: sampling temperature (0 in the paper).
        repeat_limit: constrained mode: leave out an action already taken this many
            times from the current observation (None: off; see module doc).
        guide: how recalled steps reach the choice: ``off``, ``hint``, ``prior``
            (see module doc).
        cue_at: where the prompt asks for the answer: ``start`` (before the task, so
            each step's prompt extends the previous one) or ``end`` (after the
            history: the layout before 2026-11-27); see :mod:`deltamem.agents.prompts`.
    """

    llm: LLMClient
    _: KW_ONLY
    domain: str
    constrained: bool = False
    max_steps: int | None = None
    history_chars: int = 6000
    max_listed_actions: int = 50
    max_tokens: int = 256
    temperature: float = 0.0
    repeat_limit: int | None = None
    guide: Literal["off", "hint", "prior"] = "off"
    cue_at: Literal["start", "end"] = "start"
    #: the guide's rule set by names (``None``: the environment's own)
    guide_rules: tuple[str, ...] | None = None

    def play(self, env: Environment, task: Task, recall: Recall) -> Episode:
        """Play ``task`` (already reset in ``env``) with ``recall`` shown; see the module doc."""
        prompts = load_agent_prompts(self.domain)
        cap = self.max_steps if self.max_steps is not None else env.max_steps(task)
        if not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"step cap must be a positive integer, got {cap!r}")
        if self.history_chars < 0:
            raise ConfigError(f"history_chars must be >= 0, got {self.history_chars}")
        if self.repeat_limit is not None and self.repeat_limit < 1:
            raise ConfigError(f"repeat_limit must be >= 1 or None, got {self.repeat_limit}")
        if self.guide not in ("off", "hint", "prior"):
            raise ConfigError(f"guide must be off, hint or prior, got {self.guide!r}")
        if self.cue_at not in CUE_PLACES:
            raise ConfigError(f"cue_at must be start or end, got {self.cue_at!r}")
        rules = (self.guide_rules if self.guide_rules is not None
                 else getattr(env, "guide_rules", None))  # the domain's rule set by default
        guide = (Guide(recall, task.goal, rules=rules)
                 if self.guide != "off" and recall.text else None)
        offered: dict[str, None] = {}
        before = self.llm.usage.snapshot()
        steps: list[Step] = []
        last: Transition | None = None
        score = 0.0
        for _ in range(cap):
            admissible = tuple(env.admissible_actions())
            advice = None
            if guide is not None:
                offered.update(dict.fromkeys(admissible))
                advice = guide.advise(admissible, [s.action for s in steps if s.valid], offered,
                                      [s.action for s in steps if not s.valid])
            messages = build_messages(
                prompts, task, recall, steps, admissible,
                constrained=self.constrained, history_chars=self.history_chars,
                max_listed_actions=self.max_listed_actions,
                hint=advice.hint if advice is not None else None, cue_at=self.cue_at,
            )
            if self.constrained:
                options = self._without_loops(admissible, task, steps)
                if advice is not None and self.guide == "prior":
                    favoured = tuple(a for a in options if a in advice.actions)
                    options = favoured or options
                thought, action, to_send = "", *self._choose(messages, options, env)
            else:
                thought, action, to_send = self._think_act(messages, admissible)
            if to_send is None:
                step = Step(action=action, observation=INVALID_OBSERVATION, reward=0.0,
                            done=False, thought=thought, valid=False, admissible=admissible)
            else:
                t = env.step(to_send)
                step = Step(action=to_send, observation=t.observation, reward=t.score - score,
                            done=t.done, thought=thought, valid=t.valid, admissible=admissible)
                score, last = t.score, t
            steps.append(step)
            if step.done:
                break
        return Episode(
            task=task,
            steps=tuple(steps),
            success=bool(last is not None and last.success),
            reward=float(last.score) if last is not None else 0.0,
            max_steps=cap,
            usage=self.llm.usage.since(before),
        )

    def _think_act(
        self, messages: list, admissible: tuple[str, ...]
    ) -> tuple[str, str, str | None]:
        out = self.llm.complete(messages, purpose="act", max_tokens=self.max_tokens,
                                temperature=self.temperature)
        reply = parse_reply(out.text)
        return reply.thought, reply.action, match_action(reply.action, admissible)

    def _without_loops(
        self, admissible: tuple[str, ...], task: Task, steps: list[Step]
    ) -> tuple[str, ...]:
        """``admissible`` minus the actions worn out from this observation (*Repeat limit*)."""
        return without_loops(admissible, task.observation, steps, self.repeat_limit)

    def _choose(
        self, messages: list, admissible: tuple[str, ...], env: Environment
    ) -> tuple[str, str]:
        if not admissible:
            raise ConfigError(
                f"constrained mode needs admissible actions, but environment {env.name!r} "
                "listed none; use free mode for it"
            )
        templated = [a for a in admissible if has_placeholder(a)]
        if templated:
            raise ConfigError(
                f"constrained mode cannot fill placeholders in admissible actions such as "
                f"{templated[0]!r}; use free mode for environment {env.name!r}"
            )
        if len(admissible) == 1:  # a choice among one: the model's answer is known
            return admissible[0], admissible[0]
        out = self.llm.complete(messages, purpose="act", choices=list(admissible),
                                max_tokens=self.max_tokens, temperature=self.temperature)
        if out.text not in admissible:
            raise LLMError(
                f"LLM {getattr(self.llm, 'name', '?')!r} returned {out.text[:80]!r}, "
                "which is not one of the offered choices"
            )
        return out.text, out.text
