"""BabyAI levels (``minigrid``) as a text environment (MCMA paper, Appendix A.1).

The agent's 7×7 egocentric symbolic view is translated into text deterministically:
the agent is anchored at the bottom-centre cell (3, 6) of the view; every visible
object at (x, y) other than the static background (unseen, empty, wall, floor) is
described by its colour, type (and a door's state) and its offsets
``d_fwd = 6 − y`` steps forward and ``d_lat = x − 3`` steps right (negative: left),
e.g. "a red ball 3 steps forward and 1 step to the left". Two additions the agent
needs to act and the paper's translator leaves implicit: what the agent carries, and
what blocks the cell right in front of it (a wall or an object).

Actions are text: ``turn left``, ``turn right``, ``move forward``, ``pick up``,
``drop``, ``toggle`` (minigrid's ``done`` does nothing in BabyAI and is not offered).
An action that changes nothing (moving into a wall, picking up with nothing in front,
toggling a wall, ...) still costs a step and is reported with ``valid=False``; text
outside the vocabulary is invalid, costs a step and leaves the grid unchanged.

Task ids are ``<level>:<seed>`` (``GoToObj:3`` is ``BabyAI-GoToObj-v0`` reset with
seed 3). Splits: ``train`` draws seeds from 0, ``test`` from 1 000 000, so the two never
share a layout. ``score`` is BabyAI's own reward (``1 − 0.9·steps/max_steps`` on
success, 0 otherwise). Needs ``pip install minigrid``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.errors import ConfigError
from deltamem.seeding import check_random_state
from deltamem.types import Task

__all__ = [
    "ACTIONS",
    "DEFAULT_LEVELS",
    "BabyAIEnv",
    "bot_plan",
    "describe_view",
    "expert_actions",
    "relative_position",
]

ACTIONS: tuple[str, ...] = ("turn left", "turn right", "move forward", "pick up", "drop",
                            "toggle")
"""The admissible action texts, in minigrid's action order (0 … 5)."""

DEFAULT_LEVELS: tuple[str, ...] = (
    "GoToRedBall", "GoToObj", "GoToLocal", "PickupLoc", "PutNextLocal", "OpenDoor",
)
"""Single-room levels of increasing difficulty (the ones a small model can play)."""

VIEW = 7
AGENT_X, AGENT_Y = 3, 6
_BACKGROUND = frozenset({"unseen", "empty", "wall", "floor"})
_SPLIT_SEED = {"train": 0, "test": 1_000_000}
_STATES = {0: "open", 1: "closed", 2: "locked"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def relative_position(x: int, y: int) -> str:
    """Where view cell (x, y) is relative to the agent at (3, 6), in words.

    >>> relative_position(2, 3)
    '3 steps forward and 1 step to the left'
    >>> relative_position(3, 5)
    '1 step forward'
    >>> relative_position(5, 6)
    '2 steps to the right'
    """
    fwd, lat = AGENT_Y - y, x - AGENT_X
    parts = []
    if fwd:
        parts.append(_plural(fwd, "step") + " forward")
    if lat:
        parts.append(_plural(abs(lat), "step") + (" to the right" if lat > 0 else " to the left"))
    return " and ".join(parts) if parts else "where you stand"


def _object_name(type_idx: int, color_idx: int, state: int) -> str | None:
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT

    kind = IDX_TO_OBJECT.get(int(type_idx), "unseen")
    if kind in _BACKGROUND or kind == "agent":
        return None
    color = IDX_TO_COLOR.get(int(color_idx), "")
    if kind == "door":
        return f"a {_STATES.get(int(state), 'closed')} {color} door"
    if kind in ("goal", "lava"):
        return f"a {kind}"
    return f"a {color} {kind}"


def describe_view(image: Any, carrying: str | None = None) -> str:
    """The text of one 7×7 egocentric view (``image[x, y] = (type, colour, state)``).

    Objects are listed nearest first (Manhattan distance, then left to right), so the
    text is a deterministic function of the view.
    """
    from minigrid.core.constants import IDX_TO_OBJECT

    seen: list[tuple[int, int, str]] = []
    for x in range(VIEW):
        for y in range(VIEW):
            if (x, y) == (AGENT_X, AGENT_Y):
                continue  # the agent's own cell shows what it carries
            name = _object_name(*image[x][y])
            if name is not None:
                seen.append((abs(AGENT_Y - y) + abs(x - AGENT_X), x, f"{name} "
                             f"{relative_position(x, y)}"))
    seen.sort()
    lines = [f"You see {text}." for _, _, text in seen] or ["You see no objects."]
    front = IDX_TO_OBJECT.get(int(image[AGENT_X][AGENT_Y - 1][0]), "unseen")
    if front == "wall":
        lines.append("A wall blocks the cell in front of you.")
    if carrying:
        lines.append(f"You are carrying {carrying}.")
    return "\n".join(lines)


def _level_id(level: str) -> str:
    return level if level.startswith("BabyAI-") else f"BabyAI-{level}-v0"


def _parse_id(task_id: str) -> tuple[str, int]:
    level, sep, seed = task_id.rpartition(":")
    if not sep or not level or not seed.isdigit():
        raise ConfigError(f"BabyAI task ids look like '<level>:<seed>', got {task_id!r}")
    return level, int(seed)


class BabyAIEnv(Environment):
    """BabyAI levels as text tasks (see the module docstring).

    Args:
        levels: level names (``GoToObj`` or ``BabyAI-GoToObj-v0``).
        tasks_per_level: tasks drawn from each level per split.
        max_steps: step cap of a task (BabyAI's own limit applies when smaller).
    """

    name = "babyai"
    domain = "generic"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits = ("train", "test")

    def __init__(self, levels: Sequence[str] | str = DEFAULT_LEVELS, tasks_per_level: int = 5,
                 max_steps: int = 40) -> None:
        try:
            import gymnasium
            import minigrid
        except ImportError as e:
            raise ConfigError(f"the BabyAI environment needs minigrid: pip install minigrid ({e})"
                              ) from e
        del minigrid  # importing it registers the BabyAI levels with gymnasium
        self._gym = gymnasium
        if isinstance(levels, str):
            levels = [x for x in levels.split(",") if x.strip()]
        self.levels = tuple(x.strip() for x in levels)
        if not self.levels:
            raise ConfigError("BabyAI needs at least one level")
        known = set(gymnasium.registry)
        for lv in self.levels:
            if _level_id(lv) not in known:
                raise ConfigError(f"unknown BabyAI level {lv!r}")
        if tasks_per_level < 1 or max_steps < 1:
            raise ConfigError("tasks_per_level and max_steps must be positive")
        self.tasks_per_level = int(tasks_per_level)
        self.cap = int(max_steps)
        self._env: Any = None
        self._level = ""
        self._steps = 0
        self._done = True
        self._task: Task | None = None

    # -- contract ----------------------------------------------------------------------
    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        if split not in _SPLIT_SEED:
            raise ConfigError(f"BabyAI splits are {', '.join(self.splits)}; got {split!r}")
        base = _SPLIT_SEED[split]
        ids = [f"{lv}:{base + i}" for lv in self.levels for i in range(self.tasks_per_level)]
        check_random_state(seed).shuffle(ids)
        return ids

    def reset(self, task_id: str) -> Task:
        level, seed = _parse_id(task_id)
        if _level_id(level) not in self._gym.registry:
            raise ConfigError(f"unknown BabyAI level {level!r}")
        if self._env is None or self._level != level:
            self.close()
            self._env = self._gym.make(_level_id(level))
            self._level = level
        obs, _ = self._env.reset(seed=seed)
        self._steps = 0
        self._done = False
        inner = self._env.unwrapped
        observation = self._view(obs)
        split = "test" if seed >= _SPLIT_SEED["test"] else "train"
        self._task = Task(
            id=task_id, goal=str(obs["mission"]), scene=observation, domain=self.domain,
            split=split, observation=observation,
            max_steps=min(self.cap, int(inner.max_steps)), meta={"level": level, "seed": seed},
        )
        return self._task

    def admissible_actions(self) -> list[str]:
        return [] if self._done else list(ACTIONS)

    def step(self, action: str) -> Transition:
        if self._env is None or self._task is None:
            raise RuntimeError("reset() must be called before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset()")
        self._steps += 1
        text = " ".join(action.lower().replace("_", " ").split())
        if text not in ACTIONS:
            done = self._steps >= (self._task.max_steps or self.cap)
            self._done = done
            return Transition(f"Unknown action {action!r}. Choose one of: {', '.join(ACTIONS)}.",
                              0.0, done, False, valid=False)
        idx = ACTIONS.index(text)
        effective = self._has_effect(idx)
        obs, reward, terminated, truncated, _ = self._env.step(idx)
        success = bool(terminated and reward > 0)
        done = bool(terminated or truncated or self._steps >= (self._task.max_steps or self.cap))
        self._done = done
        observation = self._view(obs)
        if not effective:
            observation = f"Nothing happens. {observation}"
        if success:
            observation += "\nYou completed the mission."
        score = min(1.0, max(0.0, float(reward))) if success else 0.0
        return Transition(observation, score, done, success, valid=effective)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
            self._level = ""

    # -- helpers -----------------------------------------------------------------------
    def _carrying(self) -> str | None:
        c = self._env.unwrapped.carrying
        return None if c is None else f"a {c.color} {c.type}"

    def _view(self, obs: Any) -> str:
        return describe_view(obs["image"], self._carrying())

    def _has_effect(self, idx: int) -> bool:
        """Whether minigrid action ``idx`` changes anything in the current state."""
        inner = self._env.unwrapped
        if idx in (0, 1):
            return True
        front = inner.grid.get(*inner.front_pos)
        if idx == 2:
            return front is None or front.can_overlap()
        if idx == 3:
            return inner.carrying is None and front is not None and front.can_pickup()
        if idx == 4:
            return inner.carrying is not None and front is None
        return front is not None and front.type in ("door", "box")

    def solution(self) -> list[str] | None:
        """The BabyAI bot's plan from the current state (see :func:`bot_plan`)."""
        return self.replan()

    def replan(self) -> list[str] | None:
        if self._env is None or self._done:
            return None
        return bot_plan(self._env, limit=max(1, (self._task.max_steps if self._task else 64)
                                             - self._steps)) or None


def bot_plan(gym_env: Any, limit: int = 200) -> list[str]:
    """The BabyAI bot's actions from ``gym_env``'s current state, planned on a copy.

    The bot (``minigrid.utils.baby_ai_bot``) reads the hidden full state: its plan is an
    expert demonstration, never something the text agent sees. Empty when the bot finds
    no winning plan within ``limit`` actions.
    """
    import copy

    from minigrid.utils.baby_ai_bot import BabyAIBot

    sim = copy.deepcopy(gym_env.unwrapped)
    out: list[str] = []
    try:
        bot = BabyAIBot(sim)
        return _run_bot(bot, sim, limit, out)
    except (AssertionError, ValueError, KeyError, IndexError):
        return []  # the bot cannot plan from some mid-episode states (e.g. after a drop)


def _run_bot(bot: Any, sim: Any, limit: int, out: list[str]) -> list[str]:
    for _ in range(limit):
        idx = int(bot.replan())
        if idx >= len(ACTIONS):  # 'done': the bot thinks the mission is accomplished
            return []
        out.append(ACTIONS[idx])
        _, reward, terminated, truncated, _ = sim.step(idx)
        if terminated:
            return out if reward > 0 else []
        if truncated:
            return []
    return []


def expert_actions(env: BabyAIEnv, task_id: str, limit: int = 200) -> list[str]:
    """The bot's winning actions for ``task_id`` from its start (resets ``env``)."""
    env.reset(task_id)
    return bot_plan(env._env, limit)
