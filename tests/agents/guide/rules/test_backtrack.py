"""The backtrack rule: an earlier step retried elsewhere, where the recall points first."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL, PLACES, VERBS


def test_the_search_goes_first_where_recalled_knowledge_found_the_object() -> None:
    recall = (HEAT_RECALL + "\n[Base Knowledge]\nKnowledge: - cup: found in/on shelf\n"
              "- egg: found in/on cabinet\n")
    g = Guide(recall, HEAT_GOAL)
    assert g.known_places() == {"shelf"}  # only the goal's objects count
    advice = g.advise(PLACES, ["go to sinkbasin 1"], PLACES)
    assert advice.actions == ("go to shelf 1",)
    visited = g.advise(PLACES, ["go to sinkbasin 1", "go to shelf 1"], PLACES)
    assert set(visited.actions) == {"go to cabinet 1", "go to cabinet 2", "go to microwave 1"}


def test_the_search_tries_where_the_procedure_did_the_blocked_step_elsewhere() -> None:
    chain = (HEAT_RECALL + "Extra steps not in the base:\n1. go to cabinet\n"
             "2. take {A} from cabinet\n")
    g = Guide(chain, HEAT_GOAL)
    steps = g.steps(VERBS)
    assert g.alternative_places(steps, steps.index("take cup from sinkbasin")) == {"cabinet"}
    advice = g.advise(PLACES, ["go to sinkbasin 1"], PLACES)
    assert advice.backtrack and set(advice.actions) == {"go to cabinet 1", "go to cabinet 2"}
    plain = Guide(HEAT_RECALL, HEAT_GOAL).advise(PLACES, ["go to sinkbasin 1"], PLACES)
    assert "go to shelf 1" in plain.actions  # without the variant: any place not visited


def test_a_recalled_place_that_is_not_here_is_searched_among_places_not_visited() -> None:
    recall = ("Tasks of the form: put two {A} in {B}\n1. go to laundryhamper\n"
              "2. take {A} from laundryhamper\n3. go to {B}\n4. move {A} to {B}")
    g = Guide(recall, "find two statue and put them in coffeetable")
    places = ["go to armchair 1", "go to shelf 1", "go to sofa 1", "go to coffeetable 1"]
    advice = g.advise(places, ["go to armchair 1"], places)
    assert advice.actions == ("go to shelf 1", "go to sofa 1")  # armchair 1 was seen


def test_the_search_goes_first_to_a_known_place_of_several_words() -> None:
    recall = ("Tasks of the form: create {A} paint\n1. teleport to workshop\n"
              "2. pour cup containing red paint in jug\nWhere the items were:\n"
              "- cup containing red paint: found in/on art studio")
    g = Guide(recall, "create orange paint")
    here = ["teleport to kitchen", "teleport to art studio", "teleport to workshop",
            "look around"]
    advice = g.advise(here, ["teleport to workshop"], here)
    assert advice.backtrack and advice.actions == ("teleport to art studio",)
