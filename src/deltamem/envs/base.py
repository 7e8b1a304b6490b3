"""The environment adapter contract.

An adapter turns one benchmark into a deterministic stream of :class:`Task`
instances and plays them one step at a time::

    env = SomeEnv(...)
    for task_id in env.task_ids("seen", seed=0):
        task = env.reset(task_id)          # Task with goal, scene, first observation
        while True:
            actions = env.admissible_actions()
            t = env.step(actions[0])       # Transition(observation, score, done, success, valid)
            if t.done:
                break
    env.close()

A new adapter is "in" when :func:`deltamem.testing.check_environment` passes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from deltamem.types import Task


@dataclass(frozen=True)
class Transition:
    """What one action did.

    Attributes:
        observation: the environment's text answer.
        score: normalised progress of the whole episode so far, in [0, 1].
        done: the episode is over (won, lost or out of steps).
        success: the task was completed (implies ``done``).
        valid: the action was understood and admissible.
    """

    observation: str
    score: float
    done: bool
    success: bool
    valid: bool = True


#: the agent's guide rules (:mod:`deltamem.agents.guide`) by name, in the order the guide asks
#: them: the rule set every built-in domain runs. A name, not the rule: the rules live in the
#: agents layer, above this one, and are resolved from their names there
GUIDE_RULES: tuple[str, ...] = ("put-away", "follow", "look-ahead", "return-to-place",
                                "open-closed", "backtrack", "search-unvisited",
                                "heed-warnings")


class Environment(ABC):
    """Base class of environment adapters.

    Implementers must provide every abstract method. ``task_ids`` must be
    deterministic for a given ``(split, seed)``; ``reset`` must accept every id
    it returned; ``step`` after ``done`` raises ``RuntimeError``.
    """

    #: registry name (``alfworld``, ``household``, ``scienceworld``, ...)
    name: str = "env"
    #: DeltaMem domain preset the tasks belong to
    domain: str = "generic"
    #: the split names ``task_ids`` accepts
    splits: tuple[str, ...] = ()
    #: the rule set the agent's guide follows the recall with in this domain: rule names in
    #: the order asked (:func:`deltamem.agents.guide.resolve_rules`); replace it to change
    #: how recalled experience becomes advice here
    guide_rules: tuple[str, ...] = GUIDE_RULES

    @abstractmethod
    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """The ordered task stream of ``split`` (same seed, same order)."""

    @abstractmethod
    def reset(self, task_id: str) -> Task:
        """Start the task; return it with its goal, scene and first observation."""

    @abstractmethod
    def admissible_actions(self) -> list[str]:
        """Actions admissible in the current state (may be empty where unknown)."""

    @abstractmethod
    def step(self, action: str) -> Transition:
        """Take one action."""

    def max_steps(self, task: Task) -> int:
        """Step cap for ``task`` (the task's own cap, else 30)."""
        return task.max_steps or 30

    def solution(self) -> list[str] | None:
        """A winning action sequence from the start of the current task, or ``None``.

        The environment's own oracle: the household/ALFWorld game's stored walkthrough,
        ScienceWorld's gold action sequence, a TextWorld game's walkthrough. ``None``
        where the environment knows none (the default). Call it right after
        :meth:`reset`, before any :meth:`step`: an adapter may have to restart the task
        to compute it (ScienceWorld does). Only demonstration policies
        (:class:`deltamem.agents.expert.ExpertAgent`) and tests may read it; an agent
        under evaluation never does.
        """
        return None

    def replan(self) -> list[str] | None:
        """A winning action sequence from the *current* state, where the environment has a
        planner (household games do); ``None`` otherwise (the default) or when no plan is
        found. Used by noisy demonstrations to get back on track after a random action."""
        return None

    def close(self) -> None:  # noqa: B027 - optional
        """Release the underlying engine (JVM, game files, ...)."""

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
