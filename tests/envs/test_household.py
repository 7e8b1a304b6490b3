"""The offline household environment: catalog partition, generator, HouseholdEnv."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from deltamem.envs.base import Environment
from deltamem.envs.household import catalog
from deltamem.errors import ConfigError, InvalidInputError

pytestmark = pytest.mark.envs

_OBJ_DECL = re.compile(r"^\s*([A-Za-z]+)_bar_\d+ - object$", re.MULTILINE)


def _engine() -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")


# --- catalog: the partition is data -------------------------------------------------------


def test_unseen_partition_shares_no_layout_and_no_object_type() -> None:
    seen_layouts = {lay.name for lay in catalog.layouts_for("seen")}
    assert seen_layouts == {lay.name for lay in catalog.layouts_for("train")}
    unseen_layouts = {lay.name for lay in catalog.layouts_for("unseen")}
    assert seen_layouts and unseen_layouts and not seen_layouts & unseen_layouts
    seen_objs = {o.name for o in catalog.objects_for("seen")}
    unseen_objs = {o.name for o in catalog.objects_for("unseen")}
    assert seen_objs == {o.name for o in catalog.objects_for("train")}
    assert seen_objs and unseen_objs and not seen_objs & unseen_objs
    assert not (seen_objs | unseen_objs) & set(catalog.LAMPS)


@pytest.mark.parametrize("split", catalog.SPLITS)
@pytest.mark.parametrize("task_type", catalog.TASK_TYPES)
def test_every_split_can_host_every_task_type(split: str, task_type: str) -> None:
    prop = catalog.PROPERTY.get(task_type)
    hosts = [
        (lay.name, o.name)
        for lay in catalog.layouts_for(split) if lay.supports(task_type)
        for o in catalog.objects_for(split)
        if lay.room in o.rooms and o.places & set(lay.receptacles) and (not prop or o.has(prop))
    ]
    assert hosts


def test_catalog_names_are_known() -> None:
    for obj in catalog.OBJECTS.values():
        assert obj.places <= set(catalog.RECEPTACLES), obj.name
        assert obj.rooms <= set(catalog.ROOMS.values()), obj.name
    for lay in catalog.LAYOUTS.values():
        assert set(lay.receptacles) <= set(catalog.RECEPTACLES), lay.name
        assert all(1 <= lo <= hi for lo, hi in lay.receptacles.values()), lay.name


# --- generator -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checker():
    _engine()
    from deltamem.envs.household.generator import GameChecker

    return GameChecker()


def test_same_key_gives_byte_identical_files(tmp_path: Path, checker) -> None:
    from deltamem.envs.household.generator import GameChecker, generate_game, write_game

    a = write_game(generate_game("unseen", "pick_two_obj_and_place", "7-1", checker=checker),
                   tmp_path / "a")
    b = write_game(generate_game("unseen", "pick_two_obj_and_place", "7-1",
                                 checker=GameChecker()), tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    assert (a.parent / "traj_data.json").read_bytes() == (b.parent / "traj_data.json").read_bytes()
    other = generate_game("unseen", "pick_two_obj_and_place", "7-2", checker=checker)
    assert other.game["pddl_problem"] != json.loads(a.read_text())["pddl_problem"]


def test_game_file_has_alfworld_keys_and_goal_in_grammar(checker) -> None:
    from deltamem.envs.household.generator import generate_game

    game = generate_game("seen", "pick_clean_then_place_in_recep", "0-0", checker=checker)
    assert set(game.game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert game.game["solvable"] is True
    assert f"Your task is to: {game.goal}." in game.game["grammar"]
    assert "UNKNOWN GOAL" not in game.game["grammar"]
    assert game.traj["task_type"] == "pick_clean_then_place_in_recep"
    assert any(cmd.startswith("clean ") for cmd in game.walkthrough)


def test_split_and_task_type_are_validated(checker) -> None:
    from deltamem.envs.household.generator import generate_game

    with pytest.raises(InvalidInputError):
        generate_game("valid", "pick_and_place_simple", "0", checker=checker)
    with pytest.raises(InvalidInputError):
        generate_game("seen", "pick_and_slice", "0", checker=checker)


class _RejectFirst:
    """A checker that declares the first ``n`` drafts unsolvable."""

    def __init__(self, real, n: int) -> None:
        self.real, self.n, self.calls = real, n, 0

    def solve(self, problem):
        self.calls += 1
        return None if self.calls <= self.n else self.real.solve(problem)


def test_unsolvable_draft_moves_to_next_sub_seed_deterministically(checker) -> None:
    from deltamem.envs.household.generator import build_problem, generate_game

    game = generate_game("seen", "pick_heat_then_place_in_recep", "3-3",
                         checker=_RejectFirst(checker, 2))
    assert game.attempt == 2 and game.traj["attempt"] == 2
    expected = build_problem("seen", "pick_heat_then_place_in_recep",
                             random.Random("seen/pick_heat_then_place_in_recep/3-3#2"))
    assert game.game["pddl_problem"] == expected.text
    again = generate_game("seen", "pick_heat_then_place_in_recep", "3-3",
                          checker=_RejectFirst(checker, 2))
    assert again.game == game.game


def test_generation_fails_loudly_when_nothing_is_solvable(checker) -> None:
    from deltamem.envs.household.generator import generate_game

    with pytest.raises(RuntimeError, match="no solvable game"):
        generate_game("seen", "pick_and_place_simple", "0", checker=_RejectFirst(checker, 99),
                      max_attempts=3)


def _check_game(split: str, task_type: str, game) -> None:
    """Static validity of one generated game."""
    objects = set(_OBJ_DECL.findall(game.game["pddl_problem"]))
    movable = objects - set(catalog.LAMPS)
    assert movable <= {o.name for o in catalog.objects_for(split)}, movable
    assert game.traj["scene"]["layout"] in {lay.name for lay in catalog.layouts_for(split)}
    params = game.traj["pddl_params"]
    templates = catalog_templates(task_type)
    filled = {t.format(obj=params["object_target"].lower(), recep=params["parent_target"].lower(),
                       toggle=params["toggle_target"].lower(), mrecep="") for t in templates}
    assert game.goal in filled
    walk = game.walkthrough
    assert game.game["solvable"] and 1 <= len(walk) <= 20
    if task_type == "look_at_obj_in_light":
        assert any(c.startswith(f"use {params['toggle_target'].lower()} ") for c in walk)
        assert walk[-1].startswith(("use ", "take "))
    else:
        assert re.fullmatch(rf"move {params['object_target'].lower()} \d+ to "
                            rf"{params['parent_target'].lower()} \d+", walk[-1]), walk[-1]
    verb = {"pick_clean_then_place_in_recep": "clean ", "pick_heat_then_place_in_recep": "heat ",
            "pick_cool_then_place_in_recep": "cool "}.get(task_type)
    if verb:
        assert any(c.startswith(verb) for c in walk)
    if task_type == "pick_two_obj_and_place":
        assert sum(c.startswith("move ") for c in walk) == 2


def catalog_templates(task_type: str) -> list[str]:
    from alfworld.gen.goal_library import gdict

    return list(gdict[task_type]["templates"])


@pytest.mark.parametrize("task_type", catalog.TASK_TYPES)
def test_generated_games_are_valid_for_a_few_keys(task_type: str, checker) -> None:
    from deltamem.envs.household.generator import generate_game

    for split in ("seen", "unseen"):
        for k in range(3):
            _check_game(split, task_type, generate_game(split, task_type, f"f-{k}",
                                                        checker=checker))


@pytest.mark.slow
def test_fifty_seeds_per_task_type_give_valid_solvable_games(tmp_path: Path, checker) -> None:
    """50 keys x 6 task types, seen and unseen (train draws from seen's pool); a sample is
    replayed on the whole room through ALFWorld's engine."""
    from deltamem.envs.household import HouseholdEnv
    from deltamem.envs.household.generator import generate_game, write_game

    splits = ("seen", "unseen")
    layouts: dict[str, set[str]] = {s: set() for s in splits}
    types: dict[str, set[str]] = {s: set() for s in splits}
    env = HouseholdEnv(cache_dir=tmp_path)
    try:
        for split in splits:
            for task_type in catalog.TASK_TYPES:
                for seed in range(50):
                    game = generate_game(split, task_type, f"{seed}-0", checker=checker)
                    _check_game(split, task_type, game)
                    layouts[split].add(game.traj["scene"]["layout"])
                    types[split] |= set(game.traj["scene"]["object_types"])
                    if seed == 0:  # replay on the whole room, through ALFWorld's engine
                        task_id = f"{split}/{task_type}/{seed}-0"
                        root = tmp_path / "v1" / task_id
                        write_game(game, root)
                        env.reset(task_id)
                        for command in game.walkthrough:
                            assert command in env.admissible_actions()
                            last = env.step(command)
                        assert last.success and last.done
    finally:
        env.close()
    assert not layouts["seen"] & layouts["unseen"]
    assert not types["seen"] & types["unseen"]
    assert len(layouts["unseen"]) >= 4 and len(layouts["seen"]) >= 6


# --- HouseholdEnv ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    _engine()
    from deltamem.envs.household import HouseholdEnv

    env = HouseholdEnv(cache_dir=tmp_path_factory.mktemp("household"), n=12)
    yield env
    env.close()


def _walkthrough(env, task_id: str) -> list[str]:
    return json.loads(env.locate(task_id).path.read_text())["walkthrough"]


def test_is_an_environment_with_the_alfworld_domain() -> None:
    from deltamem.envs.household import HouseholdEnv

    env = HouseholdEnv()
    assert isinstance(env, Environment)
    assert (env.name, env.domain, env.splits) == ("household", "alfworld", catalog.SPLITS)


def test_task_ids_are_deterministic_balanced_and_distinct(env) -> None:
    ids = env.task_ids("seen", seed=0)
    assert ids == env.task_ids("seen", seed=0) and len(ids) == 12
    assert {i.split("/")[1] for i in ids} == set(catalog.TASK_TYPES)
    assert not set(ids) & set(env.task_ids("seen", seed=1))
    assert not set(ids) & set(env.task_ids("train", seed=0))
    assert all(i.startswith("unseen/") for i in env.task_ids("unseen", 0))
    with pytest.raises(ConfigError):
        env.task_ids("valid_seen")


def test_bad_task_id_is_rejected(env) -> None:
    with pytest.raises(InvalidInputError):
        env.reset("seen/pick_and_slice/0-0")
    with pytest.raises(InvalidInputError):
        env.reset("nonsense")


def test_reset_maps_the_first_observation_to_a_task(env) -> None:
    task_id = env.task_ids("unseen", 0)[0]
    task = env.reset(task_id)
    assert task.id == task_id and task.split == "unseen" and task.domain == "alfworld"
    assert task.max_steps == 30 and env.max_steps(task) == 30
    assert task.meta["task_type"] == task_id.split("/")[1]
    # the room kind the game was generated for (the Env-Tree's relevance label)
    assert task.meta["room"] in {"kitchen", "bathroom", "bedroom", "living room"}
    assert set(task.meta) == {"task_type", "room"}
    assert task.scene.startswith("You are in the middle of a room. Looking quickly around you")
    assert "Your task is to" not in task.scene and "Welcome" not in task.scene
    assert task.goal and not task.goal.endswith(".") and "Your task is to" not in task.goal
    assert task.scene in task.observation and f"Your task is to: {task.goal}." in task.observation
    assert "look" in env.admissible_actions()


def test_walkthrough_wins_and_invalid_action_is_flagged(env) -> None:
    task_id = env.task_ids("seen", 0)[0]
    env.reset(task_id)
    bad = env.step("fly to the moon")
    assert not bad.valid and not bad.done and bad.score == 0.0
    walk = _walkthrough(env, task_id)
    for i, command in enumerate(walk):
        assert command in env.admissible_actions()
        t = env.step(command)
        assert t.valid
        assert t.done == (i == len(walk) - 1)
    assert t.success and t.score == 1.0
    with pytest.raises(RuntimeError):
        env.step("look")


@pytest.mark.slow
@pytest.mark.parametrize("split", ["seen", "unseen"])
def test_walkthrough_wins_for_every_task_type(env, split: str) -> None:
    for task_id in env.task_ids(split, 0)[:6]:
        env.reset(task_id)
        for command in _walkthrough(env, task_id):
            t = env.step(command)
        assert t.success and t.done, task_id


def test_looking_around_until_the_cap_loses(tmp_path: Path) -> None:
    _engine()
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=tmp_path, max_steps=4) as short:
        task = short.reset(short.task_ids("seen", 0)[3])
        assert task.max_steps == 4
        steps = [short.step("look") for _ in range(4)]
        assert [t.done for t in steps] == [False, False, False, True]
        assert not any(t.success for t in steps) and steps[-1].score == 0.0


def test_wrong_placement_does_not_win(env) -> None:
    task_id = next(i for i in env.task_ids("seen", 0) if "pick_and_place_simple" in i)
    env.reset(task_id)
    walk = _walkthrough(env, task_id)
    take = next(i for i, c in enumerate(walk) if c.startswith("take "))
    for command in walk[: take + 1]:
        env.step(command)
    obj, source = walk[take][len("take "):].split(" from ")
    back = env.step(f"move {obj} to {source}")  # the start place never has the goal's type
    assert back.valid and not back.success and not back.done and back.score == 0.0


def test_step_before_reset_raises(tmp_path: Path) -> None:
    _engine()
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=tmp_path) as fresh, pytest.raises(RuntimeError):
        fresh.step("look")


def test_cache_is_reused_and_temporary_dir_removed(tmp_path: Path) -> None:
    _engine()
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=tmp_path) as first:
        task_id = first.task_ids("train", 5)[0]
        path = first.locate(task_id).path
        stamp = path.stat().st_mtime_ns
    with HouseholdEnv(cache_dir=tmp_path) as second:
        assert second.locate(task_id).path == path
        assert path.stat().st_mtime_ns == stamp
    temp = HouseholdEnv()
    made = temp.locate(task_id).path
    assert made.read_bytes() == path.read_bytes()
    temp.close()
    assert not made.exists()


# --- a drifting stream: placement regimes -------------------------------------------------------


def test_home_types_move_at_the_drift_and_keys_name_the_regime() -> None:
    from deltamem.envs.household.generator import home_type, placement_regime

    places = {"CounterTop", "Fridge", "SinkBasin", "DiningTable"}
    a, b = home_type("a", "Egg", places), home_type("b", "Egg", places)
    assert a in places and b in places and a != b
    assert home_type("a", "Egg", places) == a  # a fixed ranking, not a draw
    assert home_type("a", "Egg", {"Fridge"}) == home_type("b", "Egg", {"Fridge"}) == "Fridge"
    assert home_type("a", "Egg", set()) is None
    assert placement_regime("1-3@b") == "b" and placement_regime("1-3") is None
    for bad in ("1-3@c", "@a"):
        with pytest.raises(InvalidInputError):
            placement_regime(bad)
    with pytest.raises(InvalidInputError):
        home_type("c", "Egg", places)


def test_a_regime_puts_every_object_in_its_home_type() -> None:
    _engine()
    from deltamem.envs.household.generator import build_problem, home_type

    for seed in range(6):
        for regime in ("a", "b"):
            p = build_problem("seen", "pick_and_place_simple", random.Random(seed), regime)
            recep_type = {rid.lower(): t for rid, t in
                          re.findall(r"\(receptacleType (\S+) (\S+)Type\)", p.text)}
            present = set(recep_type.values())
            goal = p.traj["pddl_params"]["parent_target"]
            init = p.text.split("(:goal")[0]
            for oid, rid in re.findall(r"\(inReceptacle (\S+) (\S+)\)", init):
                kind = oid.split("_bar_")[0]
                if kind in catalog.LAMPS:
                    continue
                allowed = set(catalog.OBJECTS[kind].places) & present
                if kind == p.traj["pddl_params"]["object_target"]:
                    allowed -= {goal}
                assert recep_type[rid.lower()] == home_type(regime, kind, allowed), (seed, oid)
            assert p.traj["placement_regime"] == regime


def test_drift_after_splits_every_stream_into_two_regimes(tmp_path: Path) -> None:
    from deltamem.envs.household import HouseholdEnv

    env = HouseholdEnv(cache_dir=tmp_path, n=6, drift_after=4)
    ids = env.task_ids("seen", seed=0)
    assert [i.rsplit("@", 1)[1] for i in ids] == ["a"] * 4 + ["b"] * 2
    plain = HouseholdEnv(cache_dir=tmp_path, n=6).task_ids("seen", seed=0)
    assert [i.rsplit("@", 1)[0] for i in ids] == plain  # the same tasks, other placements
    with pytest.raises(ConfigError):
        HouseholdEnv(n=6, drift_after=-1).task_ids("seen")
