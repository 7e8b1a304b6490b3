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

    def close(self) -> None:  # noqa: B027 - optional
        """Release the underlying engine (JVM, game files, ...)."""

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
