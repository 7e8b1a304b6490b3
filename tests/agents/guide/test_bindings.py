"""Goal bindings: placeholders and recalled entities filled from the goal."""

from __future__ import annotations

from deltamem.agents.guide import Guide, goal_bindings
from deltamem.types import Recall
from tests.agents.guide.recalls import DELTAMEM_RECALL, GOAL, SYNAPSE_RECALL, VERBS


def test_placeholders_and_recalled_entities_are_filled_from_the_goal() -> None:
    assert goal_bindings(DELTAMEM_RECALL, GOAL) == {"{A}": "tomato", "{B}": "diningtable"}
    assert goal_bindings("Trigger: Tasks of the form: cool some {A} and put it in {B}",
                         "heat some cup and put it in countertop", ["cool"]) == {
        "{A}": "cup", "{B}": "countertop"}
    assert goal_bindings(SYNAPSE_RECALL, GOAL) == {"apple": "tomato", "countertop": "diningtable"}
    g = Guide(DELTAMEM_RECALL, GOAL)
    assert g.steps(VERBS) == ["go to fridge", "open fridge", "take tomato from fridge",
                              "go to microwave", "heat tomato with microwave",
                              "go to diningtable", "put tomato in/on diningtable"]
    assert Guide(SYNAPSE_RECALL, GOAL).steps(VERBS) == [
        "go to fridge 1", "open fridge 1", "take tomato 1 from fridge 1"]


def test_each_item_of_a_chain_is_filled_from_its_own_goal_line() -> None:
    from deltamem.types import RecallItem

    base = ("[Base Skill]\nTrigger: Tasks of the form: measure the temperature of {A}, which is "
            "located around the {B} {C}. First, focus on the {D}.\nProcedure: 1. pick up {D}\n"
            "2. teleport to {B} {C}\n3. pick up {A}")
    delta = ("[Skill Delta 1]\nTrigger: Variant of the base skill: measure the temperature of "
             "{A}, which is located around the {B}. First, focus on the {C}.\nProcedure: Extra "
             "steps not in the base:\n1. focus on {C}\n2. teleport to {B}")
    recall = Recall(text=base + "\n" + delta, items=(
        RecallItem("task", "n1", base, None, "base"), RecallItem("task", "n2", delta, 0.9,
                                                                 "delta")))
    goal = ("measure the temperature of water, which is located around the bedroom. First, "
            "focus on the thermometer.")
    steps = Guide(recall, goal).steps({"pick", "teleport", "focus"})
    # the base's {B} {C} ("living room") faces one word here; the delta's {C} is the tool
    assert steps == ["pick up thermometer", "teleport to bedroom", "pick up water",
                     "focus on thermometer", "teleport to bedroom"]


def test_a_placeholder_facing_a_two_word_name_the_actions_use_takes_both() -> None:
    recall = ("Tasks of the form: find the {A} in the {B}\n1. teleport to {B}\n"
              "2. pick up {A}")
    g = Guide(recall, "find the seed in the living room")
    here = ["teleport to living room", "teleport to kitchen", "look around"]
    advice = g.advise(here, [], here)
    assert advice.actions == ("teleport to living room",)
    assert goal_bindings(recall, "find the seed in the living room", ()) == {
        "{A}": "seed", "{B}": "room"}  # without the names the actions use: the head noun


def test_a_run_of_three_placeholders_takes_three_words() -> None:
    recall = ("Tasks of the form: turn on the {A} {B} {C}. First, focus on it.\n"
              "1. focus on {A} {B} {C}")
    assert goal_bindings(recall, "turn on the blue light bulb. First, focus on it.", ()) == {
        "{A}": "blue", "{B}": "light", "{C}": "bulb"}


def test_a_placeholder_the_goal_left_unbound_takes_its_example_when_that_thing_is_here() -> None:
    recall = ("Tasks of the form: Your first objective is to take a trip {A}. Then, lift the {E} "
              "from the floor of the cookhouse. ({A} = e.g. south, {E} = e.g. coin)\n"
              "1. go {A}\n2. take {E}")
    goal = "First thing I need you to do is to go east. Then, take the coin in the washroom."
    g = Guide(recall, goal)
    here = ["go north", "take coin", "examine coin", "look"]
    g.advise(here, [], here)
    # a move keeps its placeholder (the recalled route is not this game's)
    assert g.steps({"go", "take"}) == ["go {A}", "take coin"]
    assert g.advise(here, ["go north"], here).actions == ("take coin",)
    # an example that names nothing offered in this episode is not used
    g = Guide(recall, goal)
    elsewhere = ["go north", "take key", "look"]
    g.advise(elsewhere, [], elsewhere)
    assert g.steps({"go", "take"}) == ["go {A}", "take {E}"]
