"""ALFWorldEnv against a tiny fake dataset laid out like ALFWorld's json_2.1.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.envs.base import Environment
from deltamem.errors import ConfigError, InvalidInputError

pytestmark = pytest.mark.envs

_GAMES = [  # (ALFWorld split folder, task folder, household split, task type, key)
    ("valid_seen", "pick_heat_then_place_in_recep-Egg-None-CounterTop-1", "seen",
     "pick_heat_then_place_in_recep", "0-0"),
    ("valid_seen", "look_at_obj_in_light-Book-None-DeskLamp-301", "seen",
     "look_at_obj_in_light", "0-1"),
    ("valid_unseen", "pick_two_obj_and_place-Cup-None-Shelf-10", "unseen",
     "pick_two_obj_and_place", "0-2"),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from deltamem.envs.household.generator import GameChecker, generate_game, write_game

    root = tmp_path_factory.mktemp("alfworld_data")
    base = root / "json_2.1.1"
    checker = GameChecker()
    for folder, task_dir, split, task_type, key in _GAMES:
        game = generate_game(split, task_type, key, checker=checker)
        write_game(game, base / folder / task_dir / "trial_T20190001_000001_000001")
    # what ALFWorld's loader skips: movable / sliced variants, unsolvable games, other types
    seen_game = base / "valid_seen" / _GAMES[0][1] / "trial_T20190001_000001_000001"
    for skipped in ("pick_and_place_with_movable_recep-Egg-Pan-Fridge-1",
                    "pick_heat_then_place_in_recep-EggSliced-None-Fridge-1"):
        (base / "valid_seen" / skipped / "trial_T1").mkdir(parents=True)
        for name in ("game.tw-pddl", "traj_data.json"):
            (base / "valid_seen" / skipped / "trial_T1" / name).write_bytes(
                (seen_game / name).read_bytes())
    unsolvable = base / "valid_seen" / "pick_and_place_simple-Mug-None-Desk-2" / "trial_T2"
    unsolvable.mkdir(parents=True)
    data = json.loads((seen_game / "game.tw-pddl").read_text())
    (unsolvable / "game.tw-pddl").write_text(json.dumps({**data, "solvable": False}))
    (unsolvable / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
    (base / "train").mkdir()
    return root


@pytest.fixture
def env(data_dir: Path):
    from deltamem.envs.alfworld import ALFWorldEnv

    env = ALFWorldEnv(data_dir=data_dir)
    yield env
    env.close()


def test_missing_data_raises_config_error_naming_the_variable(monkeypatch, tmp_path) -> None:
    from deltamem.envs.alfworld import ALFWorldEnv

    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(ConfigError, match="ALFWORLD_DATA"):
        ALFWorldEnv().task_ids("seen")
    with pytest.raises(ConfigError, match="ALFWORLD_DATA"):
        ALFWorldEnv(data_dir=tmp_path).task_ids("unseen")


def test_unknown_split_and_empty_split_raise(env) -> None:
    with pytest.raises(ConfigError):
        env.task_ids("valid_seen")
    with pytest.raises(ConfigError, match="no solvable"):
        env.task_ids("train")


def test_collects_games_like_alfworld(env) -> None:
    assert isinstance(env, Environment)
    assert (env.name, env.domain) == ("alfworld", "alfworld")
    assert env.splits == ("train", "seen", "unseen")
    seen = env.task_ids("seen")
    assert seen == sorted(seen) and len(seen) == 2
    assert all(i.startswith("seen/") and "movable" not in i and "Sliced" not in i for i in seen)
    assert env.task_ids("seen", seed=3) == env.task_ids("seen", seed=3)
    assert sorted(env.task_ids("seen", seed=3)) == seen
    assert env.task_ids("unseen") == [f"unseen/{_GAMES[2][1]}/trial_T20190001_000001_000001"]


def test_data_dir_can_come_from_the_environment_variable(monkeypatch, data_dir: Path) -> None:
    from deltamem.envs.alfworld import ALFWorldEnv

    monkeypatch.setenv("ALFWORLD_DATA", str(data_dir))
    assert len(ALFWorldEnv().task_ids("seen")) == 2


def test_unknown_task_id_is_rejected(env) -> None:
    with pytest.raises(InvalidInputError):
        env.reset("seen/no-such-task/trial_T0")
    with pytest.raises(InvalidInputError):
        env.reset("valid_seen/x")


def test_reset_and_walkthrough_match_the_household_mapping(env) -> None:
    task_id = env.task_ids("unseen")[0]
    task = env.reset(task_id)
    assert task.id == task_id and task.split == "unseen" and task.domain == "alfworld"
    assert task.meta == {"task_type": "pick_two_obj_and_place"} and task.max_steps == 30
    assert task.scene.startswith("You are in the middle of a room.")
    game = json.loads(env.locate(task_id).path.read_text())
    traj = json.loads((env.locate(task_id).path.parent / "traj_data.json").read_text())
    assert task.goal == traj["goal"]
    assert not env.step("jump").valid
    for command in game["walkthrough"]:
        t = env.step(command)
    assert t.success and t.done and t.score == 1.0
