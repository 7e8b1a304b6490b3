"""Search steps: the steps before the goal's object was first picked up."""

from __future__ import annotations

from deltamem.analysis.trajectories import goal_entities, search_steps


def test_goal_entities_are_the_object_then_the_place() -> None:
    assert goal_entities("put a hot cup in countertop") == ["cup", "countertop"]
    assert goal_entities("look at bowl under the desklamp") == ["bowl", "desklamp"]
    assert goal_entities("find two pencil and put them in drawer") == ["pencil", "drawer"]


def test_search_steps_count_until_the_goal_object_is_taken() -> None:
    goal = "put a hot cup in countertop"
    actions = ["go to fridge 1", "open fridge 1", "take egg 1 from fridge 1",
               "go to cabinet 2", "take cup 2 from cabinet 2", "go to microwave 1"]
    assert search_steps(goal, actions) == 4  # taking the egg is not the goal's object
    assert search_steps(goal, actions[:4]) is None
    assert search_steps(goal, ["take cup 1 from countertop 1"]) == 0
    assert search_steps("focus on the animal", ["look around", "pick up animal"]) == 1
    assert search_steps("", ["take cup 1 from countertop 1"]) is None  # no entity
