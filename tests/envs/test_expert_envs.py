"""The expert policy on the real environments: it wins every generated household game (and
every walkthrough game of TextWorld), and noisy demonstrations repeat by seed."""

from __future__ import annotations

import pytest

from deltamem.agents.expert import ExpertAgent
from deltamem.envs.household import catalog
from deltamem.types import Recall

pytestmark = [pytest.mark.envs, pytest.mark.slow]

PER_TYPE = 2  # games per task type and split: 3 splits x 6 types x 2 = 36 games


@pytest.fixture(scope="module")
def household(tmp_path_factory):
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from deltamem.envs.household import HouseholdEnv

    env = HouseholdEnv(cache_dir=tmp_path_factory.mktemp("household"),
                       n=PER_TYPE * len(catalog.TASK_TYPES))
    yield env
    env.close()


@pytest.mark.parametrize("split", catalog.SPLITS)
def test_expert_wins_every_generated_household_game(household, split: str) -> None:
    ids = household.task_ids(split, seed=0)
    assert {i.split("/")[1] for i in ids} == set(catalog.TASK_TYPES)
    for task_id in ids:
        task = household.reset(task_id)
        walk = household.solution()
        assert walk, task_id
        ep = ExpertAgent().play(household, task, Recall())
        assert ep.success, (task_id, [s.action for s in ep.steps])
        assert [s.action for s in ep.steps] == walk


def test_household_replans_from_the_current_state(household) -> None:
    task_id = household.task_ids("unseen", seed=0)[0]
    household.reset(task_id)
    first = household.admissible_actions()
    detour = next(a for a in first if a.startswith("go to") and a != household.solution()[0])
    household.step(detour)
    plan = household.replan()
    assert plan
    t = None
    for action in plan:
        t = household.step(action)
    assert t is not None and t.success


def test_noisy_household_demonstrations_repeat_by_seed_and_mostly_win(household) -> None:
    ids = household.task_ids("train", seed=0)

    def stream(seed: int) -> list[tuple[tuple[str, ...], bool]]:
        out = []
        for task_id in ids:
            task = household.reset(task_id)
            ep = ExpertAgent(noise=0.3, seed=seed).play(household, task, Recall())
            out.append((tuple(s.action for s in ep.steps), ep.success))
        return out

    a = stream(1)
    assert a == stream(1)
    assert a != stream(2)
    assert any(any(s for s in acts if s) for acts, _ in a)
    wins = sum(ok for _, ok in a)
    assert wins >= len(ids) // 2  # re-planning gets most noisy demonstrations home


@pytest.fixture(scope="module")
def tw_cache(tmp_path_factory):
    pytest.importorskip("textworld")
    from deltamem.envs.textworld_games import TextWorldEnv

    root = tmp_path_factory.mktemp("tw")
    ids = [TextWorldEnv(g, 2, n_games=2).task_ids("train") for g in ("treasure", "cooking",
                                                                     "coin")]
    TextWorldEnv(cache_dir=root).prepare([i for group in ids for i in group])
    return root, ids


def test_expert_wins_every_textworld_walkthrough_game(tw_cache) -> None:
    from deltamem.envs.textworld_games import TextWorldEnv

    root, ids = tw_cache
    for game, group in zip(("treasure", "cooking", "coin"), ids, strict=True):
        env = TextWorldEnv(game, 2, n_games=2, cache_dir=root)
        try:
            for task_id in group:
                task = env.reset(task_id)
                ep = ExpertAgent().play(env, task, Recall())
                assert ep.success, (task_id, [s.action for s in ep.steps])
        finally:
            env.close()


def test_expert_wins_every_cleaning_game(tmp_path) -> None:
    pytest.importorskip("textworld")
    from deltamem.envs.textworld_cleaning import CleaningEnv

    env = CleaningEnv(difficulty=1, n_games=2, cache_dir=tmp_path / "games")
    try:
        for task_id in env.task_ids("train"):
            task = env.reset(task_id)
            ep = ExpertAgent().play(env, task, Recall())
            assert ep.success, (task_id, [s.action for s in ep.steps])
    finally:
        env.close()
