"""The search-unvisited rule: any place not visited yet."""

from __future__ import annotations

from deltamem.agents.guide import Guide


def test_the_search_goes_on_elsewhere_when_every_recalled_place_was_visited() -> None:
    # the recalled game found the object in a cabinet, and a cabinet is the goal's
    # destination: other kinds of place do not realise "go to cabinet" loosely
    recall = ("Tasks of the form: heat some {A} and put it in {B}\n1. go to cabinet\n"
              "2. open cabinet\n3. take {A} from cabinet\n4. go to microwave\n"
              "5. heat {A} with microwave\n6. go to {B}\n7. move {A} to {B}")
    g = Guide(recall, "heat some plate and put it in cabinet")
    taken = ["go to cabinet 1", "open cabinet 1", "go to cabinet 2", "open cabinet 2"]
    here = ["close cabinet 2", "examine cabinet 2", "go to cabinet 1", "go to cabinet 2",
            "go to countertop 1", "go to fridge 1", "look"]
    advice = g.advise(here, taken, here)
    assert advice.backtrack and advice.actions == ("go to countertop 1", "go to fridge 1")
