"""The put-away rule: things that belong somewhere are put there."""

from __future__ import annotations

import pytest

from deltamem.agents.guide import Guide
from tests.agents.guide.recalls import TIDY_GOAL, TIDY_RECALL


def test_a_held_thing_goes_where_it_belongs_and_a_misplaced_one_is_taken() -> None:
    g = Guide(TIDY_RECALL, TIDY_GOAL)
    kitchen = ["examine fridge", "examine kitchen counter", "go west",
               "take milk carton from kitchen counter", "take frying pan from kitchen counter"]
    advice = g.advise(kitchen, [], kitchen)
    # the milk carton is out of place (it belongs in the fridge); the frying pan's place is
    # not in the recall, so it is left alone
    assert advice.actions == ("take milk carton from kitchen counter",)
    holding = ["examine fridge", "examine kitchen counter", "go west", "drop milk carton",
               "insert milk carton into fridge", "put milk carton on kitchen counter"]
    assert g.advise(holding, ["take milk carton from kitchen counter"], holding).actions == (
        "insert milk carton into fridge",)
    # a thing where it belongs is never taken: only the moves remain
    laundry = ["examine ironing board", "go east", "go north", "take iron from ironing board"]
    advice = g.advise(laundry, [], laundry)
    assert "take iron from ironing board" not in advice.actions
    assert set(advice.actions) <= {"go east", "go north"}


def test_knowledge_lines_saying_where_things_belong_count_as_placements() -> None:
    from deltamem.agents.guide import belongings

    knowledge = ("## Environment knowledge memory\n"
                 "- iron: belongs in/on ironing board (putting it there scored)\n"
                 "- milk carton: belongs in/on fridge (putting it there scored)\n"
                 "- raincoat: belongs in/on coat hook (putting it there scored)\n"
                 "- tv remote: found in/on shoe rack\n")
    assert belongings(knowledge) == {"iron": "ironing board", "milk carton": "fridge",
                                     "raincoat": "coat hook"}
    holding = ["examine fridge", "go west", "drop milk carton",
               "insert milk carton into fridge", "put milk carton on kitchen counter"]
    # a recall with no steps at all: the knowledge alone is a tidying
    g = Guide(knowledge, TIDY_GOAL)
    assert g.advise(holding, ["take milk carton"], holding).actions == (
        "insert milk carton into fridge",)
    # two places are not enough, as for the steps
    g = Guide("\n".join(knowledge.splitlines()[:3]), TIDY_GOAL)
    assert g.advise(holding, ["take milk carton"], holding).actions != (
        "insert milk carton into fridge",)
    # where the steps and a scored placement differ, the scored one wins
    recall = TIDY_RECALL.replace("insert milk carton into fridge",
                                  "put milk carton on kitchen counter")
    g = Guide(recall + "\n" + knowledge.splitlines()[2], TIDY_GOAL)
    assert g.advise(holding, ["take milk carton"], holding).actions == (
        "insert milk carton into fridge",)


def test_a_held_thing_is_carried_back_to_the_room_seen_holding_its_place() -> None:
    g = Guide(TIDY_RECALL, TIDY_GOAL)
    laundry = ["examine ironing board", "go east"]
    hall = ["examine shoe rack", "go north", "go west", "take iron"]
    hall_holding = ["examine shoe rack", "go north", "go west", "drop iron",
                    "put iron on shoe rack", "examine iron"]
    taken: list[str] = []
    assert g.advise(laundry, taken, laundry).actions == ("go east",)
    taken.append("go east")
    assert g.advise(hall, taken, hall).actions == ("take iron",)
    taken.append("take iron")
    # holding the iron, whose place (the ironing board) is in the room west of here
    assert g.advise(hall_holding, taken, hall_holding).actions == ("go west",)


_GROW = "Your task is to grow a apple plant from seed. First, focus on a seed."


_FIND = "Your task is to find a(n) living thing. First, focus on the thing."


_GROW_ACTIONS = ["go to kitchen", "go to greenhouse", "open cupboard", "move jug to sink"]


_FIND_ACTIONS = ["go to outside", "open cupboard", "go to kitchen"]


@pytest.mark.parametrize(("goal", "header", "steps", "admissible", "first"), [
    # tools of a procedure, moved where they are
    (_GROW, "Your task is to grow a {A} plant from seed. First, focus on a seed.",
     ["go to kitchen", "move jug to sink", "go to greenhouse", "move soil to flower pot",
      "focus on {A} seed"], _GROW_ACTIONS, "go to kitchen"),
    # taken and put away, but two things in two places are not yet a tidying
    (_GROW, "Your task is to grow a {A} plant from seed. First, focus on a seed.",
     ["go to kitchen", "take jug", "move jug to sink", "go to greenhouse", "take soil",
      "move soil to flower pot", "focus on {A} seed"], _GROW_ACTIONS, "go to kitchen"),
    # things gathered in one box
    (_FIND, "Your task is to find a(n) living thing.",
     ["go to outside", "move egg turtle in inventory to green box", "move baby bee to green box",
      "move egg parrot to green box"], _FIND_ACTIONS, "go to outside"),
    (_FIND, "Your task is to find a(n) living thing.",
     ["go to outside", "take egg turtle", "take baby bee", "take egg parrot",
      "move egg turtle in inventory to green box", "move baby bee to green box",
      "move egg parrot to green box"], _FIND_ACTIONS, "go to outside"),
], ids=["tools", "two-fetched", "one-box", "one-box-fetched"])
def test_tools_moved_or_things_gathered_in_one_box_are_no_tidying(
        goal: str, header: str, steps: list[str], admissible: list[str], first: str) -> None:
    recall = f"Tasks of the form: {header}\n" + "".join(
        f"{n}. {step}\n" for n, step in enumerate(steps, 1))
    assert Guide(recall, goal).advise(admissible, [], admissible).actions == (first,)


def test_the_tidying_rule_leaves_a_goal_about_named_things_to_the_procedure() -> None:
    goal = "put a clean apple in diningtable"
    recall = ("Tasks of the form: put a clean {A} in {B}\n1. go to fridge\n"
              "2. take {A} from fridge\n3. clean {A} with sinkbasin\n4. move {A} to {B}\n"
              "5. move knife to countertop\n")
    g = Guide(recall, goal)
    admissible = ["go to fridge 1", "go to sinkbasin 1", "take knife 1 from countertop 1"]
    # one thing the goal does not name is no tidying: the procedure leads
    assert g.advise(admissible, [], admissible).actions == ("go to fridge 1",)
