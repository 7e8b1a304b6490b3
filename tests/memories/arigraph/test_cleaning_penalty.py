"""The Cleaning game's -1 for moving an item out of its right place (paper, Appendix F)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from deltamem.envs.textworld_cleaning import CATALOG, CleaningEnv, _route, _walk, design

pytestmark = [pytest.mark.envs, pytest.mark.slow]


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CleaningEnv, str]]:
    pytest.importorskip("textworld")
    env = CleaningEnv(difficulty=1, n_games=1, cache_dir=tmp_path_factory.mktemp("games"))
    tid = env.task_ids("seen")[0]
    env.prepare([tid])
    yield env, tid
    env.close()


def _place(item: str, plan: dict[str, Any]) -> str:
    room, furn = plan["homes"][item]
    return f"insert {item} into {furn}" if CATALOG[room][furn][0] else f"put {item} on {furn}"


def _play(env: CleaningEnv, cmds: list[str]) -> list[float]:
    scores = []
    for cmd in cmds:
        t = env.step(cmd)
        assert t.valid, cmd
        scores.append(t.score)
    return scores


def test_walkthrough_wins_with_full_score_and_no_penalty(game) -> None:  # type: ignore[no-untyped-def]
    env, tid = game
    env.reset(tid)
    t = None
    for cmd in env.walkthrough():
        t = env.step(cmd)
    assert t is not None and t.success and t.score == 1.0 and env.penalties == []


def test_moving_a_correctly_placed_item_costs_one_point_once(game) -> None:  # type: ignore[no-untyped-def]
    env, tid = game
    level, seed = 1, int(tid.rsplit("s", 1)[1])
    plan = design(level, seed)
    env.reset(tid)
    max_points = 2 * len(plan["misplaced"])
    walk = env.walkthrough()
    first_take = next(i for i, c in enumerate(walk) if c.startswith("take "))
    assert _play(env, walk[: first_take + 1])[-1] == pytest.approx(1 / max_points)

    here = plan["start"][plan["misplaced"][0]][0]
    keep = next(i for i in sorted(plan["homes"]) if i not in plan["misplaced"])
    room, furn = plan["homes"][keep]
    scores = _play(env, [*_route(plan["passages"], here, room), f"take {keep} from {furn}"])
    assert scores[-1] == pytest.approx(0.0) and env.penalties == [keep]  # 1/max - 1/max
    # Putting it back refunds nothing; moving it again is not charged twice.
    scores = _play(env, [_place(keep, plan), f"take {keep} from {furn}", _place(keep, plan)])
    assert scores == pytest.approx([0.0, 0.0, 0.0]) and env.penalties == [keep]

    # Finish the job: won, but one point short of the maximum.
    item = plan["misplaced"][0]
    home = plan["homes"][item][0]
    rest = [*_route(plan["passages"], room, home), _place(item, plan),
            *_walk(home, plan["passages"], plan["misplaced"][1:], plan["start"], plan["homes"])]
    t = None
    for cmd in rest:
        t = env.step(cmd)
    assert t is not None and t.success and t.score == pytest.approx((max_points - 1) / max_points)

    env.reset(tid)
    assert env.penalties == []


def test_taking_a_returned_item_again_is_penalised(game) -> None:  # type: ignore[no-untyped-def]
    env, tid = game
    plan = design(1, int(tid.rsplit("s", 1)[1]))
    env.reset(tid)
    max_points = 2 * len(plan["misplaced"])
    walk = env.walkthrough()
    item = plan["misplaced"][0]
    put = walk.index(_place(item, plan))
    assert _play(env, walk[: put + 1])[-1] == pytest.approx(2 / max_points)
    furn = plan["homes"][item][1]
    assert _play(env, [f"take {item} from {furn}"]) == pytest.approx([1 / max_points])
    assert env.penalties == [item]


def test_score_never_goes_below_zero(game) -> None:  # type: ignore[no-untyped-def]
    env, tid = game
    plan = design(1, int(tid.rsplit("s", 1)[1]))
    env.reset(tid)
    keep = next(i for i in sorted(plan["homes"]) if i not in plan["misplaced"])
    room, furn = plan["homes"][keep]
    cmds = [*_route(plan["passages"], plan["player"], room), f"take {keep} from {furn}"]
    assert _play(env, cmds)[-1] == 0.0 and env.penalties == [keep]
