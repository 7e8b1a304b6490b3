"""``HouseholdEnv``: an offline ALFWorld stand-in built from generated games.

Task ids read ``<split>/<task_type>/<seed>-<index>``; the id alone determines the game
(see :func:`~deltamem.envs.household.generator.generate_game`), so any id returned by
:meth:`HouseholdEnv.task_ids` can be reset later, on any machine. Games are written
under ``cache_dir`` (``<cache_dir>/v<GENERATOR_VERSION>/<task id>/game.tw-pddl``) on
first use and reused afterwards; the first play of a game also writes its parsed grammar
and planning translation beside it (``game.compiled.json.gz``, see
:mod:`~deltamem.envs.household.engine`), so later processes skip that work. Without
``cache_dir`` a temporary directory is used and removed by :meth:`close`.

Example (needs ``textworld`` and ``alfworld``)::

    with HouseholdEnv(cache_dir="~/.cache/deltamem/household") as env:
        for task_id in env.task_ids("unseen", seed=0):
            task = env.reset(task_id)          # task.goal: 'put a hot cup in countertop'
            t = env.step(env.admissible_actions()[0])
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from deltamem.envs.base import GUIDE_RULES
from deltamem.envs.household import catalog
from deltamem.envs.household.generator import (
    GENERATOR_VERSION,
    GameChecker,
    generate_game,
    write_game,
)
from deltamem.envs.household.play import AlfredGameEnv, GameRef
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.seeding import check_random_state, sub_seed
from deltamem.types import Task

__all__ = ["HouseholdEnv"]


class HouseholdEnv(AlfredGameEnv):
    """Generated ALFWorld-format household games, played with ALFWorld's engine.

    Args:
        cache_dir: where games are written and reused; ``None`` -> a temporary
            directory owned by this environment.
        n: tasks per ``task_ids`` stream (balanced over the six task types).
        max_steps: step cap per episode.
        drift_after: a drifting stream: the first ``drift_after`` tasks of every
            ``task_ids`` stream are drawn under placement regime ``a``, the rest under
            regime ``b`` (every object kind lies in one home receptacle type per regime,
            and the homes move at the drift: :func:`~deltamem.envs.household.generator.
            home_type`). ``None`` (default): the default world, objects anywhere they may
            lie. Ids of a drifting stream end in ``@a`` / ``@b``.
    """

    name = "household"
    domain = "alfworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits: tuple[str, ...] = catalog.SPLITS
    cache_files = True

    def __init__(self, cache_dir: str | Path | None = None, n: int = 60,
                 max_steps: int = 30, drift_after: int | None = None) -> None:
        super().__init__(max_steps=max_steps)
        self.cache_dir = cache_dir
        self.n = n
        self.drift_after = drift_after
        self._root: Path | None = None
        self._tmp: str | None = None
        self._checker: GameChecker | None = None

    def _games_root(self) -> Path:
        if self._root is None:
            if self.cache_dir is None:
                self._tmp = tempfile.mkdtemp(prefix="deltamem-household-")
                base = Path(self._tmp)
            else:
                base = Path(self.cache_dir).expanduser()
            self._root = base / f"v{GENERATOR_VERSION}"
        return self._root

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """``n`` ids of ``split``; task types cycle in a seed-shuffled order.

        Ids are ``<split>/<task_type>/<seed>-<index>``: a different seed gives other games.
        With ``drift_after`` they end in ``@a`` (index < ``drift_after``) or ``@b``.
        """
        if split not in self.splits:
            raise ConfigError(f"unknown split {split!r}; expected one of {self.splits}")
        if self.n < 1:
            raise ConfigError(f"n must be >= 1, got {self.n}")
        if self.drift_after is not None and self.drift_after < 0:
            raise ConfigError(f"drift_after must be >= 0, got {self.drift_after}")
        types = list(catalog.TASK_TYPES)
        check_random_state(sub_seed("household", split, seed)).shuffle(types)
        ids = [f"{split}/{types[i % len(types)]}/{seed}-{i}" for i in range(self.n)]
        if self.drift_after is None:
            return ids
        return [f"{t}@{'a' if i < self.drift_after else 'b'}" for i, t in enumerate(ids)]

    def locate(self, task_id: str) -> GameRef:
        """The game file of ``task_id``, generated (and cached) on first use."""
        split, task_type, key = _parse_id(task_id)
        directory = self._games_root() / split / task_type / key
        path = directory / "game.tw-pddl"
        if not _readable(path):
            self._checker = self._checker or GameChecker()
            write_game(generate_game(split, task_type, key, checker=self._checker), directory)
        return GameRef(path=path, split=split, task_type=task_type)

    def reset(self, task_id: str) -> Task:
        """Start the task; ``task.meta`` also carries ``room``, the room kind the game was
        generated for (``kitchen``, ``bathroom``, ``bedroom``, ``living room``)."""
        task = super().reset(task_id)
        assert self._ref is not None
        room = _room_kind(self._ref.path.parent / "traj_data.json")
        if room:
            task = replace(task, meta={**task.meta, "room": room})
            self._task = task
        return task

    def close(self) -> None:
        super().close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
            self._root = None


def _parse_id(task_id: str) -> tuple[str, str, str]:
    parts = task_id.split("/")
    if (len(parts) != 3 or parts[0] not in catalog.SPLITS
            or parts[1] not in catalog.TASK_TYPES or not parts[2]):
        raise InvalidInputError(
            f"not a household task id: {task_id!r} (expected <split>/<task_type>/<key>)")
    return parts[0], parts[1], parts[2]


def _room_kind(traj_path: Path) -> str | None:
    """``scene.room`` of a game's ``traj_data.json`` (``None`` when unreadable)."""
    try:
        data = json.loads(traj_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    room = data.get("scene", {}).get("room") if isinstance(data, dict) else None
    return str(room) if room else None


def _readable(path: Path) -> bool:
    """A complete game file is there (files are renamed into place, so no half files)."""
    if not path.is_file():
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(data.get("solvable")) and "pddl_problem" in data
