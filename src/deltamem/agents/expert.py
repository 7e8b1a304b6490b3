"""Demonstration policies: the environment's own solution, optionally with seeded noise.

:class:`ExpertAgent` plays :meth:`Environment.solution` (the household planner's
walkthrough, ScienceWorld's gold actions, a TextWorld game's walkthrough). It calls
no LLM and reads nothing from memory; it exists to *build* memory banks
(``--train-agent expert[:noise=p]``, the train-to-test protocol of paper §4.3 with
demonstrations in the build phase), never to be evaluated as an agent.

Contract of :meth:`ExpertAgent.play`:

* ``noise=0``: the solution's actions in order (the environment's own walkthrough,
  so a deterministic environment is won).
* ``budget=n`` (``expert:noise=p,budget=n``): the step cap of the demonstration, so a
  noisy one can run out of steps and lose (see :func:`expert_budget`).
* ``noise=p``: before each step, with probability ``p`` the planned action is
  replaced by a random admissible action other than it (uniform; nothing is
  replaced when there is no other admissible action). After such a step the agent
  gets back on track: where the environment offers a planner
  (:meth:`Environment.replan`, household games) it follows a new plan from the
  current state; otherwise it continues the remaining walkthrough at its first
  action that is admissible now (the next one when none is). On track, the planned
  action is sent as it is (the environment judges it).
  So a noisy stream holds successes, partial successes and failures.
* The random source is ``check_random_state(sub_seed(seed, task.id))``
  (:mod:`deltamem.seeding`) created per episode:
  the same seed and task give the same episode whatever ran before it.
* The step cap is ``max_steps`` when given, else ``env.max_steps(task)``; the
  episode ends when the environment says done, when the plan is used up, or at
  the cap. A task whose environment knows no solution raises :class:`ConfigError`.
* Steps carry the thought ``"demonstration"`` (or ``"demonstration: random
  action"`` for a noise step), so a trajectory shows where it came from.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass

from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError
from deltamem.seeding import check_random_state, sub_seed
from deltamem.text import fold
from deltamem.types import Episode, Recall, Step, Task, Usage

__all__ = ["ExpertAgent", "expert_budget", "parse_expert_spec"]

_SPEC = re.compile(r"^expert(?::noise=(?P<p>[0-9.]+)(?:,budget=(?P<b>[0-9]+))?)?$")


def parse_expert_spec(spec: str) -> float | None:
    """The noise of an ``expert`` / ``expert:noise=p`` / ``expert:noise=p,budget=n`` spec,
    or ``None`` when ``spec`` is not an expert spec. :class:`ConfigError` for an expert
    spec with a bad noise or budget."""
    s = spec.strip()
    if not s.startswith("expert"):
        return None
    m = _SPEC.match(s)
    if not m:
        raise ConfigError(f"bad expert spec {spec!r}; expected 'expert', 'expert:noise=P' "
                          "or 'expert:noise=P,budget=N'")
    if m.group("b") is not None and int(m.group("b")) < 1:
        raise ConfigError(f"budget must be a positive number of steps in {spec!r}")
    try:
        p = float(m.group("p") or 0.0)
    except ValueError:
        raise ConfigError(f"bad noise in {spec!r}; expected a number in [0, 1]") from None
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"noise must be in [0, 1], got {p} in {spec!r}")
    return p


def expert_budget(spec: str) -> int | None:
    """The step budget of an ``expert:noise=p,budget=n`` spec (``None``: none given).

    A noisy demonstration with a budget can lose: the random actions use up steps the
    plan needs, so the stream holds failures (the noise alone re-plans and wins)."""
    parse_expert_spec(spec)
    m = _SPEC.match(spec.strip())
    return int(m.group("b")) if m and m.group("b") else None


@dataclass
class ExpertAgent:
    """Plays the environment's solution, replacing actions at random with probability ``noise``.

    Args:
        noise: probability of replacing each planned action with a random admissible one.
        seed: seed of the per-episode random source (see module doc).
        max_steps: step cap overriding ``env.max_steps(task)``.
    """

    _: KW_ONLY
    noise: float = 0.0
    seed: int = 0
    max_steps: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise ConfigError(f"noise must be in [0, 1], got {self.noise}")

    @property
    def spec(self) -> str:
        """The spec this agent is built from (recorded with every episode)."""
        return "expert" if self.noise == 0 else f"expert:noise={self.noise:g}"

    def play(self, env: Environment, task: Task, recall: Recall | None = None) -> Episode:
        """Play ``task`` (already reset in ``env``); ``recall`` is ignored."""
        plan = env.solution()
        if plan is None:
            raise ConfigError(f"environment {env.name!r} knows no solution for task {task.id!r}; "
                              "the expert agent cannot play it")
        cap = self.max_steps if self.max_steps is not None else env.max_steps(task)
        if not isinstance(cap, int) or cap < 1:
            raise ConfigError(f"step cap must be a positive integer, got {cap!r}")
        rng = check_random_state(sub_seed(self.seed, task.id))
        todo = list(plan)
        off_track = False  # a random action was taken and no planner re-planned
        steps: list[Step] = []
        last: Transition | None = None
        score = 0.0
        while todo and len(steps) < cap:
            admissible = tuple(env.admissible_actions())
            planned = _resume(todo, admissible) if off_track else todo[0]
            others = [a for a in admissible if a != planned]
            noisy = self.noise > 0 and rng.random() < self.noise and bool(others)
            action = rng.choice(others) if noisy else planned
            t = env.step(action)
            steps.append(Step(action=action, observation=t.observation, reward=t.score - score,
                              done=t.done, thought="demonstration: random action" if noisy
                              else "demonstration", valid=t.valid, admissible=admissible))
            score, last = t.score, t
            if t.done:
                break
            if noisy:
                fresh = env.replan()
                off_track = fresh is None
                if fresh is not None:
                    todo = list(fresh)
                # else: keep the remaining walkthrough (the planned action is still to do)
            else:
                todo.pop(0)
        return Episode(
            task=task,
            steps=tuple(steps),
            success=bool(last is not None and last.success),
            reward=float(last.score) if last is not None else 0.0,
            max_steps=cap,
            usage=Usage(),
        )


def _resume(todo: list[str], admissible: tuple[str, ...]) -> str:
    """Back on the walkthrough after a random action: the first remaining action that is
    admissible now (the ones before it are dropped); the next one when none is (or when the
    environment lists no admissible actions)."""
    allowed = {fold(a): a for a in admissible}
    for i, action in enumerate(todo):
        hit = allowed.get(fold(action))
        if hit is not None:
            del todo[:i]
            todo[0] = hit
            return hit
    return todo[0]
