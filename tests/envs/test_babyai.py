"""BabyAI adapter: the text translator (pure) and the environment contract (needs minigrid)."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.envs.registry import list_envs
from deltamem.errors import ConfigError

minigrid = pytest.importorskip("minigrid")

from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX  # noqa: E402

from deltamem.envs.babyai import (  # noqa: E402
    ACTIONS,
    BabyAIEnv,
    describe_view,
    expert_actions,
    relative_position,
)
from deltamem.testing import check_environment  # noqa: E402


def _view(**cells: tuple[str, str, int]) -> np.ndarray:
    """An empty 7×7 view with objects at ``x{X}y{Y}=(type, colour, state)``."""
    img = np.zeros((7, 7, 3), dtype=np.uint8)
    img[:, :, 0] = OBJECT_TO_IDX["empty"]
    for key, (kind, color, state) in cells.items():
        x, y = int(key[1]), int(key[3])
        img[x, y] = (OBJECT_TO_IDX[kind], COLOR_TO_IDX[color], state)
    return img


def test_relative_position_uses_the_anchor_3_6() -> None:
    assert relative_position(3, 3) == "3 steps forward"
    assert relative_position(2, 3) == "3 steps forward and 1 step to the left"
    assert relative_position(6, 5) == "1 step forward and 3 steps to the right"
    assert relative_position(0, 6) == "3 steps to the left"


def test_describe_view_lists_objects_nearest_first_and_skips_walls() -> None:
    img = _view(x2y3=("ball", "red", 0), x3y5=("key", "green", 0), x0y0=("wall", "grey", 0),
                x5y6=("door", "blue", 2))
    text = describe_view(img)
    assert text.splitlines() == [
        "You see a green key 1 step forward.",
        "You see a locked blue door 2 steps to the right.",
        "You see a red ball 3 steps forward and 1 step to the left.",
    ]
    assert "wall" not in text


def test_describe_view_says_what_blocks_and_what_is_carried() -> None:
    img = _view(x3y5=("wall", "grey", 0))
    text = describe_view(img, carrying="a yellow box")
    assert "You see no objects." in text
    assert "A wall blocks the cell in front of you." in text
    assert text.endswith("You are carrying a yellow box.")


def test_registered() -> None:
    assert "babyai" in list_envs()


def test_contract_both_splits() -> None:
    env = BabyAIEnv(levels=("GoToObj", "PickupLoc"), tasks_per_level=2)
    try:
        check_environment(env, "train")
        check_environment(env, "test")
        assert set(env.task_ids("train")).isdisjoint(env.task_ids("test"))
        assert env.task_ids("train", seed=1) != env.task_ids("train", seed=2) or len(
            env.task_ids("train")) < 3
    finally:
        env.close()


def test_same_id_same_task_and_translation_matches_the_view() -> None:
    env = BabyAIEnv(levels=("GoToObj",), tasks_per_level=1)
    try:
        a = env.reset("GoToObj:0")
        b = env.reset("GoToObj:0")
        assert a == b
        assert a.goal.startswith("go to the ")
        assert a.observation.startswith("You see ")
        assert env.admissible_actions() == list(ACTIONS)
    finally:
        env.close()


def test_expert_demonstration_succeeds_and_unknown_actions_are_invalid() -> None:
    env = BabyAIEnv(levels=("GoToObj",), tasks_per_level=1)
    try:
        acts = expert_actions(env, "GoToObj:0")
        env.reset("GoToObj:0")
        bad = env.step("fly away")
        assert not bad.valid and not bad.done
        t = None
        for a in acts:
            t = env.step(a)
        assert t is not None and t.success and t.done and 0.0 < t.score <= 1.0
        assert "completed" in t.observation
        with pytest.raises(RuntimeError):
            env.step("turn left")
    finally:
        env.close()


def test_noop_actions_are_reported_invalid() -> None:
    env = BabyAIEnv(levels=("GoToObj",), tasks_per_level=1)
    try:
        env.reset("GoToObj:0")
        t = env.step("drop")  # carrying nothing: changes nothing
        assert not t.valid and t.observation.startswith("Nothing happens.")
        assert env.step("turn left").valid
    finally:
        env.close()


def test_bad_inputs_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        BabyAIEnv(levels=("NoSuchLevel",))
    env = BabyAIEnv(levels=("GoToObj",), tasks_per_level=1)
    try:
        with pytest.raises(ConfigError):
            env.reset("GoToObj")
        with pytest.raises(ConfigError):
            env.task_ids("seen")
    finally:
        env.close()
