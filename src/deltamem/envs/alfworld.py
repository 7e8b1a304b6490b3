"""``ALFWorldEnv``: the real ALFWorld text games, for users who have downloaded the data.

The data folder is the one ALFWorld's ``alfworld-download`` fills: pass it as
``data_dir`` or set ``ALFWORLD_DATA``. Splits map to ALFWorld's folders::

    train   -> $ALFWORLD_DATA/json_2.1.1/train
    seen    -> $ALFWORLD_DATA/json_2.1.1/valid_seen     (eval_in_distribution, 140 games)
    unseen  -> $ALFWORLD_DATA/json_2.1.1/valid_unseen   (eval_out_of_distribution, 134)

Games are collected the way ALFWorld's ``AlfredTWEnv`` does: every folder holding a
``traj_data.json`` of one of the six task types and a ``game.tw-pddl`` marked
solvable, skipping ``movable`` and ``Sliced`` variants. Playing and the Task mapping are
shared with :class:`~deltamem.envs.household.HouseholdEnv` (:mod:`.household.play`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from deltamem.envs.base import GUIDE_RULES
from deltamem.envs.household.catalog import TASK_TYPES
from deltamem.envs.household.play import AlfredGameEnv, GameRef
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.seeding import check_random_state

__all__ = ["SPLIT_DIRS", "ALFWorldEnv"]

#: our split name -> ALFWorld's folder under ``json_2.1.1``
SPLIT_DIRS: dict[str, str] = {"train": "train", "seen": "valid_seen", "unseen": "valid_unseen"}


class ALFWorldEnv(AlfredGameEnv):
    """ALFWorld's text games from a local copy of the dataset.

    Args:
        data_dir: the ALFWorld data folder (holding ``json_2.1.1``); ``None`` reads the
            ``ALFWORLD_DATA`` environment variable.
        max_steps: step cap per episode (30 in the paper).

    Task ids are ``<split>/<task folder>/<trial folder>`` (e.g.
    ``seen/pick_and_place_simple-Mug-None-Desk-308/trial_T2019...``). ``task_ids(split, 0)``
    lists a split's games sorted by path; another seed gives a seeded shuffle of them.
    A missing folder raises :class:`ConfigError` on first use.
    """

    name = "alfworld"
    domain = "alfworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits: tuple[str, ...] = tuple(SPLIT_DIRS)

    def __init__(self, data_dir: str | Path | None = None, max_steps: int = 30) -> None:
        super().__init__(max_steps=max_steps)
        self.data_dir = data_dir
        self._games: dict[str, dict[str, GameRef]] = {}

    def _split_dir(self, split: str) -> Path:
        if split not in SPLIT_DIRS:
            raise ConfigError(f"unknown split {split!r}; expected one of {self.splits}")
        root = self.data_dir if self.data_dir is not None else os.environ.get("ALFWORLD_DATA")
        if not root:
            raise ConfigError(
                "ALFWorld data not found: pass data_dir= or set ALFWORLD_DATA to the folder "
                "that `alfworld-download` filled (it holds json_2.1.1/). Without the data, "
                "use the offline 'household' environment.")
        path = Path(root).expanduser() / "json_2.1.1" / SPLIT_DIRS[split]
        if not path.is_dir():
            raise ConfigError(
                f"ALFWorld split folder {path} does not exist; ALFWORLD_DATA (or data_dir) "
                "must point at the folder holding json_2.1.1/")
        return path

    def _collect(self, split: str) -> dict[str, GameRef]:
        if split not in self._games:
            base = self._split_dir(split)
            games: dict[str, GameRef] = {}
            for traj_path in sorted(base.rglob("traj_data.json")):
                folder = traj_path.parent
                rel = folder.relative_to(base).as_posix()
                game_path = folder / "game.tw-pddl"
                if "movable" in rel or "Sliced" in rel or not game_path.is_file():
                    continue
                task_type = json.loads(traj_path.read_text(encoding="utf-8")).get("task_type")
                if task_type not in TASK_TYPES:
                    continue
                if not json.loads(game_path.read_text(encoding="utf-8")).get("solvable"):
                    continue
                games[f"{split}/{rel}"] = GameRef(game_path, split, task_type)
            if not games:
                raise ConfigError(f"no solvable ALFWorld game found under {base}")
            self._games[split] = games
        return self._games[split]

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        ids = sorted(self._collect(split))
        if seed:
            check_random_state(seed).shuffle(ids)
        return ids

    def locate(self, task_id: str) -> GameRef:
        split = task_id.split("/", 1)[0]
        if split not in SPLIT_DIRS:
            raise InvalidInputError(f"not an ALFWorld task id: {task_id!r}")
        games = self._collect(split)
        if task_id not in games:
            raise InvalidInputError(f"unknown ALFWorld task id: {task_id!r}")
        return games[task_id]
