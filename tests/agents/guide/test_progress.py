"""Progress: where the actions taken bring a procedure."""

from __future__ import annotations

from deltamem.agents.guide import Guide


def test_a_pick_up_of_a_thing_already_held_is_done() -> None:
    recall = ("1. teleport to kitchen\n2. pick up metal pot\n3. move metal pot to stove\n"
              "4. activate stove")
    goal = "Your task is to boil water."
    g = Guide(recall, goal)
    held = ["put down metal pot", "move metal pot to stove", "move metal pot to sink",
            "teleport to hallway"]
    taken = ["teleport to kitchen"]
    assert g.advise(held, taken, held).actions == ("move metal pot to stove",)
    # not held: the pick-up is the step; and "put down" alone does not pass another thing
    free = ["pick up metal pot", "put down metal pot", "move metal pot to stove"]
    assert g.advise(free, taken, free).actions == ("pick up metal pot",)
    other = ["put down lighter", "move metal pot to stove", "teleport to hallway"]
    assert g.advise(other, taken, other).actions != ("move metal pot to stove",)
