"""ScienceWorld adapter: samplers (pure) and the real engine (marked envs + slow)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.envs.base import Environment
from deltamem.envs.scienceworld import (
    PAPER_SEEN,
    PAPER_UNSEEN,
    TASKS,
    ScienceWorldEnv,
    default_max_steps,
    parse_task_id,
    sample_variations,
    teleport_walks,
)
from deltamem.errors import ConfigError
from deltamem.types import Task


def _in_split(name: str, variation: int, split: str) -> bool:
    _, a, b, c = TASKS[name]
    lo, hi = {"train": (0, a), "seen": (a, a + b), "unseen": (a + b, a + b + c)}[split]
    return lo <= variation < hi


# -- samplers (no JVM) ---------------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["paper", "balanced"])
@pytest.mark.parametrize(("split", "size"), [("seen", 194), ("unseen", 211), ("train", 200)])
def test_sampler_sizes_are_exact_unique_and_inside_the_split(sampler, split, size):
    eps = sample_variations(split, sampler=sampler)
    assert len(eps) == size
    assert len(set(eps)) == size
    assert all(_in_split(name, v, split) for name, v in eps)


@pytest.mark.parametrize("sampler", ["paper", "balanced"])
def test_sampler_is_deterministic(sampler):
    for split in ("seen", "unseen", "train"):
        assert sample_variations(split, sampler=sampler, seed=3) == sample_variations(
            split, sampler=sampler, seed=3
        )


def test_paper_sets_match_the_reference_lists():
    assert sample_variations("seen") == list(PAPER_SEEN)
    assert sample_variations("unseen") == list(PAPER_UNSEEN)
    # first and last entries of ETO's dev_indices.json / test_indices.json
    assert PAPER_SEEN[0] == ("test-conductivity-of-unknown-substances", 418)
    assert PAPER_SEEN[-1] == ("chemistry-mix", 22)
    assert PAPER_UNSEEN[0] == ("boil", 21)
    assert PAPER_UNSEEN[-1] == ("identify-life-stages-2", 9)
    # the paper names 24 task types
    assert len({n for n, _ in PAPER_SEEN}) == 24
    assert {n for n, _ in PAPER_SEEN} == {n for n, _ in PAPER_UNSEEN}


def test_paper_seed_permutes_but_keeps_the_set():
    ref = sample_variations("seen")
    shuffled = sample_variations("seen", seed=1)
    assert shuffled != ref
    assert sorted(shuffled) == sorted(ref)
    assert sample_variations("seen", n=5) == ref[:5]


def test_balanced_covers_all_30_tasks_with_the_water_filling_quota():
    eps = sample_variations("seen", sampler="balanced")
    per_task = {name: sum(1 for n, _ in eps if n == name) for name in TASKS}
    assert set(per_task) == set(TASKS)
    assert per_task["identify-life-stages-1"] == 3
    assert per_task["identify-life-stages-2"] == 2
    assert per_task["power-component"] == 5
    assert max(per_task.values()) - min(
        v for k, v in per_task.items() if TASKS[k][2] >= 7
    ) <= 1


@given(st.integers(min_value=0, max_value=10_000))
def test_balanced_seed_changes_selection_not_size(seed):
    eps = sample_variations("unseen", sampler="balanced", seed=seed)
    assert len(eps) == 211 and len(set(eps)) == 211


def test_sampler_rejects_bad_arguments():
    with pytest.raises(ConfigError, match="unknown ScienceWorld split"):
        sample_variations("dev")
    with pytest.raises(ConfigError, match="sampler"):
        sample_variations("seen", sampler="random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="195 requested"):
        sample_variations("seen", n=195)
    with pytest.raises(ConfigError, match="variations"):
        sample_variations("unseen", sampler="balanced", n=10_000)


def test_task_ids_parse_and_reject():
    assert parse_task_id("find-animal:225") == ("find-animal", 225)
    for bad in ("find-animal", "nope:1", "find-animal:x", "boil:30"):
        with pytest.raises(ConfigError):
            parse_task_id(bad)


def test_env_task_ids_need_no_jvm():
    env = ScienceWorldEnv()
    ids = env.task_ids("unseen")
    assert ids[0] == "boil:21" and len(ids) == 211
    assert env.jvm_pid is None
    env.close()  # nothing started: a no-op


def test_tasks_option_keeps_every_variation_of_the_named_tasks_only():
    env = ScienceWorldEnv(tasks="find-animal, find-plant")
    for split in ("train", "unseen"):
        ids = env.task_ids(split)
        names = [parse_task_id(i)[0] for i in ids]
        assert set(names) == {"find-animal", "find-plant"}
        want = {f"{n}:{v}" for n in ("find-animal", "find-plant")
                for v in range(*_split_bounds(n, split))}
        assert set(ids) == want and len(ids) == len(want)
    first = [parse_task_id(i)[0] for i in env.task_ids("unseen")[:10]]
    assert first == ["find-animal", "find-plant"] * 5  # the first n cover the tasks evenly
    assert env.task_ids("unseen", seed=1) != env.task_ids("unseen", seed=0)
    assert sorted(env.task_ids("unseen", seed=1)) == sorted(env.task_ids("unseen", seed=0))
    assert ScienceWorldEnv(tasks=["find-plant"]).task_ids("seen") == \
        ScienceWorldEnv(tasks=("find-plant",)).task_ids("seen")
    for bad in ("nope", " , ", ["find-animal", "boil-water"]):
        with pytest.raises(ConfigError):
            ScienceWorldEnv(tasks=bad)


def _split_bounds(name: str, split: str) -> tuple[int, int]:
    _, a, b, c = TASKS[name]
    return {"train": (0, a), "seen": (a, a + b), "unseen": (a + b, a + b + c)}[split]


def test_step_caps_table_and_override():
    assert default_max_steps("find-animal") == 15
    assert all(default_max_steps(n) >= 10 for n in TASKS)
    assert ScienceWorldEnv(max_steps=7).task_max_steps("boil") == 7
    env = ScienceWorldEnv(max_steps={"boil": 5})
    assert env.task_max_steps("boil") == 5 and env.task_max_steps("melt") == 80
    with pytest.raises(ConfigError):
        default_max_steps("nope")


def test_calls_before_reset_raise():
    env = ScienceWorldEnv()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look around")
    with pytest.raises(RuntimeError, match="reset"):
        env.admissible_actions()


def test_teleport_walks_make_each_walk_through_doors_one_teleport():
    gold = ["open door to hallway", "go to hallway", "open door to kitchen", "go to kitchen",
            "look around", "pick up thermometer", "open door to hallway", "go to hallway",
            "look around", "open cupboard", "go to art studio", "focus on paint",
            "open door to outside"]
    assert teleport_walks(gold) == [
        "teleport to kitchen", "look around", "pick up thermometer", "teleport to hallway",
        "look around", "open cupboard", "teleport to art studio", "focus on paint"]
    # not rooms: doors of things and moves to things stay
    kept = ["open door to cupboard", "go to table", "open fridge"]
    assert teleport_walks(kept) == kept
    assert teleport_walks([]) == []


@given(st.lists(st.sampled_from(["open door to kitchen", "go to kitchen", "go to hallway",
                                 "look around", "open fridge", "wait1"]), max_size=12))
def test_teleport_walks_never_lengthens_and_keeps_every_other_action(actions):
    out = teleport_walks(actions)
    assert len(out) <= len(actions)
    others = [a for a in actions if not a.startswith(("open door to", "go to"))]
    assert [a for a in out if not a.startswith("teleport to")] == others
    assert not any(a.startswith(("open door to", "go to")) for a in out)


# -- the real engine -------------------------------------------------------------------------


def _need_engine() -> None:
    pytest.importorskip("scienceworld")
    if shutil.which("java") is None:
        pytest.skip("java is not installed")


@pytest.fixture(scope="module")
def sw():
    _need_engine()
    env = ScienceWorldEnv(max_steps=100)
    yield env
    env.close()



@pytest.mark.envs
@pytest.mark.slow
def test_split_table_matches_the_package(sw):
    sw.reset("boil:21")
    engine = sw._sw
    for name, (_code, a, b, c) in TASKS.items():
        engine.load(name, 0, "")
        assert engine.get_variations_train() == list(range(a)), name
        assert engine.get_variations_dev() == list(range(a, a + b)), name
        assert engine.get_variations_test() == list(range(a + b, a + b + c)), name


@pytest.mark.envs
@pytest.mark.slow
def test_reset_returns_a_task_and_admissible_actions(sw):
    task = sw.reset("find-animal:225")
    assert isinstance(sw, Environment)
    assert isinstance(task, Task)
    assert task.id == "find-animal:225" and task.split == "unseen"
    assert task.domain == "scienceworld"
    assert "find a(n) animal" in task.goal
    assert task.scene.startswith("This room is called")
    assert task.observation == task.scene
    assert task.max_steps == 100 and task.meta["task_type"] == "find-animal"
    actions = sw.admissible_actions()
    assert actions and "look around" in actions
    assert any(a.startswith("teleport to ") for a in actions)


@pytest.mark.envs
@pytest.mark.slow
def test_gold_sequence_succeeds(sw):
    gold = sw.gold_actions("find-animal:225")
    sw.reset("find-animal:225")
    t = None
    for action in gold:
        t = sw.step(action)
        assert t.valid, action
        if t.done:
            break
    assert t is not None and t.done and t.success and t.score == 1.0
    with pytest.raises(RuntimeError, match="over"):
        sw.step("look around")


@pytest.mark.envs
@pytest.mark.slow
def test_solution_teleports_and_still_wins(sw):
    task = sw.reset("chemistry-mix-paint-secondary-color:0")
    walked = sw.gold_actions(task.id)
    sw.reset(task.id)
    plan = sw.solution()
    assert plan is not None and len(plan) < len(walked)
    assert any(a.startswith("teleport to ") for a in plan)
    assert not any(a.startswith(("go to ", "open door to ")) for a in plan)
    t = None
    for action in plan:
        t = sw.step(action)
        if t.done:
            break
    assert t is not None and t.success
    plain = ScienceWorldEnv(teleport_solution=False)
    assert plain.get_params()["teleport_solution"] is False


@pytest.mark.envs
@pytest.mark.slow
def test_an_action_the_engine_refuses_is_not_listed_until_the_world_changes(sw):
    sw.reset("boil:15")  # ice cream, in the kitchen's closed freezer
    sw.step("teleport to kitchen")
    assert "focus on ice cream" in sw.admissible_actions()  # listed, although out of reach
    assert not sw.step("focus on ice cream").valid
    assert "focus on ice cream" not in sw.admissible_actions()
    sw.step("look around")  # only a look: still refused
    assert "focus on ice cream" not in sw.admissible_actions()
    assert sw.step("open freezer").valid
    assert "focus on ice cream" in sw.admissible_actions()
    assert sw.step("focus on ice cream").valid


@pytest.mark.envs
@pytest.mark.slow
def test_wrong_focus_fails_and_invalid_action_is_flagged(sw):
    sw.reset("find-animal:225")
    t = sw.step("xyzzy the frobnicator")
    assert not t.valid and not t.done
    t = sw.step("focus on air")
    assert t.done and not t.success
    assert 0.0 <= t.score < 1.0


@pytest.mark.envs
@pytest.mark.slow
def test_current_score_mode_drops_to_zero_and_cap_ends_episode():
    _need_engine()
    env = ScienceWorldEnv(max_steps=2, score_mode="current", admissible="templates")
    try:
        task = env.reset("find-animal:225")
        assert task.max_steps == 2
        assert "focus on <OBJ>" in env.admissible_actions()
        t = env.step("focus on air")
        assert t.done and not t.success and t.score == 0.0
        env.reset("find-animal:225")
        assert not env.step("look around").done
        assert env.step("look around").done  # out of steps
        runtime = env._sw._gateway.jvm.java.lang.Runtime.getRuntime()
        assert runtime.maxMemory() <= 512 * 2**20  # the -Xmx cap reached the JVM
        pid = env.jvm_pid
    finally:
        env.close()
    assert env.jvm_pid is None
    assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    return out.stdout.strip().startswith("Z") or not out.stdout.strip()
