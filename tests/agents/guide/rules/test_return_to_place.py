"""The return-to-place rule: back to where the procedure does the blocked step."""

from __future__ import annotations

from deltamem.agents.guide import Guide


def test_after_a_search_the_guide_returns_to_where_the_procedure_does_the_step() -> None:
    recall = ("Tasks of the form: boil {A}\n1. teleport to kitchen\n2. pick up metal pot\n"
              "3. focus on {A}\n4. move {A} to metal pot\n5. move metal pot to stove\n"
              "6. activate stove")
    g = Guide(recall, "boil rubber")
    taken = ["teleport to kitchen", "pick up metal pot", "teleport to workshop",
             "focus on rubber", "move rubber to metal pot"]
    here = ["teleport to kitchen", "teleport to workshop", "teleport to hallway", "look around",
            "focus on rubber", "open drawer"]
    advice = g.advise(here, taken, here)  # no stove in the workshop: back to the kitchen
    assert advice.actions == ("teleport to kitchen",)
    assert advice.blocked == "move metal pot to stove"
    # where the step was reached (the kitchen), a blocked step is searched for as before
    at_kitchen = ["teleport to kitchen", "pick up metal pot"]
    kitchen = ["teleport to kitchen", "teleport to workshop", "look around", "open drawer"]
    advice = g.advise(kitchen, at_kitchen, kitchen)
    assert advice.blocked == "focus on rubber" and "teleport to kitchen" not in advice.actions
