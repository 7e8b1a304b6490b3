"""Playing ALFWorld-format games (``game.tw-pddl``) through TextWorld.

Shared by :class:`~deltamem.envs.household.env.HouseholdEnv` (generated games) and
:class:`~deltamem.envs.alfworld.ALFWorldEnv` (the real dataset): both only say where a
task's game file is; this module plays it and maps the text to :class:`Task` /
:class:`Transition`.

The engine is the stack ``textworld.gym`` builds for a game (TextWorld's PDDL
environment -> ``Limit`` -> ALFWorld's ``AlfredDemangler`` and ``AlfredInfos`` ->
``Filter``), kept for the adapter's lifetime and re-loaded per task: a fresh gym
environment per reset would load a new copy of Fast Downward's library each time. The
PDDL environment is :class:`~deltamem.envs.household.engine.CachedPddlEnv`, TextWorld's
``PddlEnv`` with grammars parsed and problems translated once (byte-identical
observations; ``tests/envs/test_household_replay.py`` replays recorded episodes).
ALFWorld's ``AlfredTWEnv`` is not used (it needs a config file the wheel does not ship).
"""

from __future__ import annotations

import json
import re
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.types import Task

__all__ = ["AlfredGameEnv", "GameRef", "task_from_observation"]

_GOAL_MARK = "Your task is to:"
_BANNER = re.compile(r"^\s*-=.*?=-\s*", re.DOTALL)
#: what ALFWorld answers to an action it did not apply
_NOTHING = ("Nothing happens.", "Nothing happened.")


@dataclass(frozen=True)
class GameRef:
    """Where a task's game is and what it is."""

    path: Path
    split: str
    task_type: str


def task_from_observation(task_id: str, observation: str, *, split: str, task_type: str,
                          max_steps: int) -> Task:
    """Build the :class:`Task` of an ALFWorld first observation.

    The first observation reads ``-= Welcome to TextWorld, ALFRED! =-`` then the room
    (``You are in the middle of a room. Looking quickly around you, you see ...``) then
    ``Your task is to: <goal>.``. ``goal`` is the sentence after the mark without its
    final period, ``scene`` the room paragraph, ``observation`` the whole text.

    Raises:
        InvalidInputError: the text has no ``Your task is to:`` sentence.
    """
    head, mark, tail = observation.partition(_GOAL_MARK)
    if not mark:
        raise InvalidInputError(f"task {task_id!r}: first observation has no goal sentence")
    goal = tail.strip().splitlines()[0].strip().rstrip(".").strip() if tail.strip() else ""
    if not goal:
        raise InvalidInputError(f"task {task_id!r}: empty goal sentence")
    scene = _BANNER.sub("", head).strip()
    return Task(id=task_id, goal=goal, scene=scene, domain="alfworld", split=split,
                observation=observation.strip(), max_steps=max_steps,
                meta={"task_type": task_type})


def _engine(max_steps: int, *, cache_files: bool = False) -> Any:
    """The TextWorld stack that plays ``.tw-pddl`` files with ALFWorld's wrappers.

    The innermost environment is :class:`~deltamem.envs.household.engine.CachedPddlEnv`
    (TextWorld's ``PddlEnv`` with its pure work done once; the same observations).
    """
    try:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs.wrappers import Filter, Limit

        from deltamem.envs.household.engine import CachedPddlEnv
    except ImportError as exc:
        raise ConfigError(
            "ALFWorld-format games need the `textworld` and `alfworld` packages "
            "(pip install 'deltamem[envs]')") from exc
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env: Any = Limit(CachedPddlEnv(infos, cache_files=cache_files),
                     max_episode_steps=max_steps)
    for wrapper in (AlfredDemangler(shuffle=False), AlfredInfos, Filter):
        env = wrapper(env)
    return env


class AlfredGameEnv(Environment):
    """Base of the adapters that play ALFWorld-format games.

    Subclasses implement :meth:`task_ids` and :meth:`locate` (task id -> :class:`GameRef`).
    Episodes are capped at ``max_steps`` actions (30, as in the paper). A step is
    ``valid`` when the action was admissible and the game did not answer "Nothing
    happens."; ``score`` is 1.0 once the goal is reached, else 0.0; ``success`` is the
    game's ``won``.
    """

    domain = "alfworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits: tuple[str, ...] = ("train", "seen", "unseen")
    #: keep each game's compiled grammar and planning translation in a file beside the
    #: game (only where the adapter owns the directory; see
    #: :mod:`~deltamem.envs.household.engine`)
    cache_files = False

    def __init__(self, max_steps: int = 30) -> None:
        self.max_steps_per_task = max_steps
        self._env: Any = None
        self._task: Task | None = None
        self._ref: GameRef | None = None
        self._admissible: list[str] = []
        self._steps = 0
        self._done = True

    @abstractmethod
    def locate(self, task_id: str) -> GameRef:
        """The game of ``task_id`` (generating it first when needed)."""

    def reset(self, task_id: str) -> Task:
        ref = self.locate(task_id)
        if self.max_steps_per_task < 1:
            raise ConfigError(f"max_steps must be >= 1, got {self.max_steps_per_task}")
        if self._env is None:
            self._env = _engine(self.max_steps_per_task,
                                cache_files=self.cache_files)
        self._env.load(str(ref.path))
        self._ref = ref
        observation, infos = self._env.reset()
        self._task = task_from_observation(task_id, observation, split=ref.split,
                                           task_type=ref.task_type,
                                           max_steps=self.max_steps_per_task)
        self._admissible = list(infos["admissible_commands"])
        self._steps = 0
        self._done = False
        return self._task

    def admissible_actions(self) -> list[str]:
        return list(self._admissible)

    def step(self, action: str) -> Transition:
        if self._task is None:
            raise RuntimeError("step() before reset()")
        if self._done:
            raise RuntimeError(f"episode of task {self._task.id!r} is over; call reset()")
        command = action.strip()
        admissible = command in self._admissible
        observation, _, done, infos = self._env.step(command)
        self._steps += 1
        won = bool(infos["won"])
        self._admissible = list(infos["admissible_commands"])
        self._done = bool(done or won or self._steps >= self.max_steps_per_task)
        valid = admissible and observation.strip() not in _NOTHING
        return Transition(observation=observation, score=1.0 if won else 0.0,
                          done=self._done, success=won, valid=valid)

    def max_steps(self, task: Task) -> int:
        return task.max_steps or self.max_steps_per_task

    def solution(self) -> list[str] | None:
        """The ``walkthrough`` stored in the current game file (the planner's plan from the
        start), or ``None`` when the file has none."""
        if self._ref is None:
            raise RuntimeError("solution() before reset()")
        try:
            data = json.loads(self._ref.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        walk = data.get("walkthrough") if isinstance(data, dict) else None
        if not isinstance(walk, list) or not walk:
            return None
        return [str(a) for a in walk]

    def replan(self) -> list[str] | None:
        """A plan from the current state by TextWorld's PDDL planner (Fast Downward), in the
        agent's (demangled) names; ``None`` when the planner finds none. ~0.1 s."""
        if self._env is None or self._task is None or self._done:
            return None
        inner = self._env
        while inner is not None and not hasattr(inner, "_pddl_state"):
            inner = getattr(inner, "_wrapped_env", None)
        if inner is None:
            return None
        try:
            plan = inner._pddl_state.replan(inner._entity_infos)
        except Exception:  # the planner failing means: no plan
            return None
        return [str(a) for a in plan] or None

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
        self._env = None
        self._task = None
        self._done = True
