"""TextWorld adapter: ids and splits (pure) and generated games (marked envs + slow)."""

from __future__ import annotations

import re

import pytest

from deltamem.envs.base import Environment
from deltamem.envs.textworld_games import (
    SPLIT_SEED_BASE,
    GameSpec,
    TextWorldEnv,
    _step_text,
    _strip_banner,
)
from deltamem.errors import ConfigError
from deltamem.types import Task

# -- pure -----------------------------------------------------------------------------------


def test_splits_use_disjoint_seed_ranges_and_are_deterministic():
    env = TextWorldEnv("treasure", 3, n_games=20)
    ids = {split: env.task_ids(split) for split in ("train", "seen", "unseen")}
    assert all(len(v) == 20 for v in ids.values())
    assert not set(ids["train"]) & set(ids["seen"])
    assert not set(ids["seen"]) & set(ids["unseen"])
    assert ids["seen"][0] == f"treasure-L3-s{SPLIT_SEED_BASE['seen']}"
    assert env.task_ids("seen") == ids["seen"]
    shuffled = env.task_ids("seen", seed=5)
    assert shuffled != ids["seen"] and sorted(shuffled) == sorted(ids["seen"])
    assert [GameSpec.parse(t).split for t in ids["unseen"]] == ["unseen"] * 20


def test_cooking_unseen_games_use_the_test_food_split():
    assert GameSpec("cooking", 2, SPLIT_SEED_BASE["unseen"]).settings()["split"] == "test"
    assert GameSpec("cooking", 2, SPLIT_SEED_BASE["seen"] + 3).settings()["split"] == "train"
    assert GameSpec("treasure", 7, SPLIT_SEED_BASE["train"]).settings() == {"level": 7}


@pytest.mark.parametrize("bad", ["treasure-L3", "maze-L1-s2000000", "coin-L1-s5",
                                 "treasure-L31-s2000000", "cooking-L0-s2000000"])
def test_bad_task_ids_raise(bad):
    with pytest.raises(ConfigError):
        GameSpec.parse(bad)


def test_bad_configuration_raises_on_use():
    with pytest.raises(ConfigError, match="unknown TextWorld game"):
        TextWorldEnv("maze").task_ids("seen")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="difficulty"):
        TextWorldEnv("cooking", 9).task_ids("seen")
    with pytest.raises(ConfigError, match="100 rooms"):
        TextWorldEnv("coin", 290).task_ids("seen")
    with pytest.raises(ConfigError, match="split"):
        TextWorldEnv().task_ids("test")


def test_banner_is_stripped():
    text = "\n\n   ___  __\n  |   \\|  $$\n  \\$$$ /\n\nWelcome! Go east.\n-= Room =-\nA room."
    assert _strip_banner(text) == "Welcome! Go east.\n-= Room =-\nA room."


def test_calls_before_reset_raise():
    env = TextWorldEnv()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")
    with pytest.raises(RuntimeError, match="reset"):
        env.admissible_actions()


# -- generated games --------------------------------------------------------------------------

GAMES = {
    "treasure": f"treasure-L2-s{SPLIT_SEED_BASE['seen']}",
    "coin": f"coin-L3-s{SPLIT_SEED_BASE['seen']}",
    "cooking": f"cooking-L1-s{SPLIT_SEED_BASE['unseen']}",
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    pytest.importorskip("textworld")
    root = tmp_path_factory.mktemp("twcache")
    TextWorldEnv(cache_dir=root).prepare(list(GAMES.values()))  # one child process
    return root


@pytest.mark.envs
@pytest.mark.slow
def test_same_seed_gives_the_same_game(cache, tmp_path):
    spec = GameSpec.parse(GAMES["treasure"])
    first = TextWorldEnv(cache_dir=cache).game_path(spec)
    (again,) = TextWorldEnv(cache_dir=tmp_path).prepare([GAMES["treasure"]])
    assert again != first
    assert again.read_bytes() == first.read_bytes()
    assert again.with_suffix(".json").read_bytes() == first.with_suffix(".json").read_bytes()
    other = GameSpec("treasure", 2, spec.seed + 1)
    (different,) = TextWorldEnv(cache_dir=tmp_path).prepare([other.task_id])
    assert different.read_bytes() != first.read_bytes()


@pytest.mark.envs
@pytest.mark.slow
@pytest.mark.parametrize("game", sorted(GAMES))
def test_walkthrough_wins(cache, game):
    env = TextWorldEnv(game, cache_dir=cache)
    task = env.reset(GAMES[game])
    assert isinstance(env, Environment) and isinstance(task, Task)
    assert task.domain == "textworld" and task.id == GAMES[game]
    assert task.goal and task.scene.startswith("-=")
    assert "$$" not in task.observation
    status = re.compile(r"(^>|=-\s*-?\d+/\d+)\s*\Z", re.MULTILINE)  # prompt / status bar
    assert not status.search(task.observation)
    assert env.admissible_actions()
    t = None
    for action in env.walkthrough():
        t = env.step(action)
        assert not status.search(t.observation)
        assert 0.0 <= t.score <= 1.0
        if t.done:
            break
    assert t is not None and t.done and t.success and t.score == 1.0
    with pytest.raises(RuntimeError, match="over"):
        env.step("look")
    env.close()


@pytest.mark.envs
@pytest.mark.slow
def test_idling_loses_and_invalid_commands_are_flagged(cache):
    env = TextWorldEnv("cooking", cache_dir=cache, max_steps=3)
    task = env.reset(GAMES["cooking"])
    assert task.max_steps == 3 and task.split == "unseen"
    t = env.step("dance wildly")
    assert not t.valid and not t.done
    assert env.step("inventory").valid
    t = env.step("look")
    assert t.done and not t.success and 0.0 <= t.score < 1.0
    env.close()


def test_step_text_drops_the_prompt_and_status_bar() -> None:
    # TextWorld ends each step's output with the prompt and a status bar whose move counter
    # changes every step; left in, no two observations are equal (and the model reads noise)
    raw = "You drop the plate on the ground.\n\n\n>" + " " * 40 + "-= Dining Room =-0/4"
    assert _step_text(raw) == "You drop the plate on the ground."
    assert _step_text("You are in a hall.\n>  -= Hall =- -1/12  ") == "You are in a hall."
    quoted = "A list:\n> not a prompt line\nEnd."
    assert _step_text(quoted + "\n>") == quoted
    assert _step_text("Nothing to strip.") == "Nothing to strip."
