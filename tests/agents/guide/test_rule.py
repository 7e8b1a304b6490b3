"""The rule contract's state: a decision, and a procedure's position in it."""

from __future__ import annotations

from deltamem.agents.guide import Position
from tests.agents.guide.recalls import decision


def test_a_position_points_past_the_steps_the_actions_taken_realise() -> None:
    steps = ["go to fridge", "open fridge", "take tomato from fridge", "go to microwave"]
    words = frozenset({"tomato", "microwave"})
    at = Position.locate(steps, decision(["look"], ["go to fridge 1", "open fridge 1"], words))
    assert (at.k, at.step) == (2, "take tomato from fridge")
    assert at.named == {"go", "to", "fridge", "open"}
    assert at.steps == steps and at.subs == {}
    assert at.admissible == ["look"] and at.goal_words == words  # the decision, kept
    done = Position.locate(steps, decision(["look"], [
        "go to fridge 1", "open fridge 1", "take tomato 1 from fridge 1", "go to microwave 1"],
        words))
    assert done.k == len(done.steps)  # every step done: no step aimed at


def test_a_pick_up_of_a_held_thing_is_passed_and_a_stand_in_is_swapped_in() -> None:
    steps = ["pick up metal pot", "move metal pot to stove"]
    held = decision(["put down metal pot", "move metal pot to stove"], [], frozenset({"water"}))
    assert Position.locate(steps, held).step == "move metal pot to stove"
    wires = ["connect battery anode to black wire terminal",
             "connect black wire terminal to cathode in motor"]
    taken = ["connect anode in battery to orange wire terminal 1"]
    at = Position.locate(wires, decision([], taken, frozenset({"motor"})))
    assert at.subs == {"black": "orange"}
    assert at.step == "connect orange wire terminal to cathode in motor"
    assert at.reached_at() == 0  # the pointer reached the step with the first action
