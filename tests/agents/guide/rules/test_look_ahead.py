"""The look-ahead rule: a later goal step realisable here."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL, PLACES


def test_a_step_the_current_game_does_not_need_is_skipped_for_a_goal_step_here() -> None:
    recall = ("Trigger: Tasks of the form: put a {A} in {B}\n"
              "Procedure: 1. go to countertop\n2. take {A} from countertop\n3. go to {B}\n"
              "4. open {B}\n5. put {A} in/on {B}")
    g = Guide(recall, "put a tomato in diningtable")
    advice = g.advise(["put tomato 1 in/on diningtable 1", "go to countertop 1"],
                      ["go to countertop 1", "take tomato 1 from countertop 1",
                       "go to diningtable 1"], [])
    assert advice.actions == ("put tomato 1 in/on diningtable 1",)


def test_lookahead_never_jumps_to_a_move_past_the_object_step() -> None:
    # the cup is not on the sinkbasin: going to the countertop (the goal's receptacle, and
    # admissible from anywhere) would be no progress; search for the cup instead
    g = Guide(HEAT_RECALL, HEAT_GOAL)
    advice = g.advise([*PLACES, "examine sinkbasin 1"], ["go to sinkbasin 1"], PLACES)
    assert advice.backtrack and advice.blocked == "take cup from sinkbasin"
    assert "go to countertop 1" not in advice.actions
    assert set(advice.actions) == {"go to cabinet 1", "go to cabinet 2", "go to microwave 1",
                                   "go to shelf 1"}


def test_lookahead_never_skips_taking_the_goal_object() -> None:
    recall = ("Tasks of the form: look at {A} under the {B}\n1. go to sidetable\n"
              "2. take {A} from sidetable\n3. use {B}")
    g = Guide(recall, "look at pen under the desklamp")
    here = ["go to desk 1", "use desklamp 1", "examine sidetable 1"]
    advice = g.advise(here, ["go to sidetable 1"], here)  # the pen is not on the sidetable
    assert "use desklamp 1" not in advice.actions  # the lamp is no use without the pen
    assert advice.backtrack


def test_a_step_advised_by_looking_ahead_is_not_advised_again_once_taken() -> None:
    # the look-ahead may skip a step that names a goal word other than the goal's object
    # (a box the recalled game chose); the pointer stays at the skipped step, so once the
    # advised step is taken it must not be advised again (a repeatable "focus on X" was
    # advised at every step to the cap)
    recall = ("Tasks of the form: measure the temperature of {A} for the green box\n"
              "1. pick up {A}\n2. move {A} to green box\n3. focus on {A}\n"
              "4. use thermometer on {A}")
    g = Guide(recall, "measure the temperature of water for the blue box")
    assert g.goal_object != "water"
    here = ["focus on water", "use thermometer on water", "look around"]
    taken = ["pick up water"]
    first = g.advise(here, taken, here)
    assert first.actions == ("focus on water",)
    assert g.advise(here, [*taken, "focus on water"], here).actions == (
        "use thermometer on water",)
    # the skipped step is still the one pointed at (household: use the lamp after taking)
    lamp = ("Tasks of the form: look at {A} under the {B}\n1. go to sidetable\n"
            "2. use {B}\n3. take {A} from sidetable\n4. go to armchair")
    g = Guide(lamp, "look at candle under the floorlamp")
    here = ["go to armchair 1", "go to shelf 1", "examine candle 1"]
    taken = ["go to sidetable 1", "take candle 1 from sidetable 1"]
    advice = g.advise(here, taken, here)
    assert advice.backtrack and advice.blocked == "use floorlamp"
