"""What a recall says about places: sightings and placements."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL


def test_sightings_read_knowledge_lines_and_raw_observations_alike() -> None:
    from deltamem.agents.guide import sightings

    text = ("- cup: found in/on shelf\n> go to countertop 1\nOn the countertop 1, you see a "
            "cup 2, a bread 1, and a apple 3.\n> open fridge 1\nYou open the fridge 1. The "
            "fridge 1 is open. In it, you see a lettuce 1.")
    assert sightings(text) == [("cup", "shelf"), ("cup", "countertop"), ("bread", "countertop"),
                               ("apple", "countertop"), ("lettuce", "fridge")]
    g = Guide(HEAT_RECALL + "\n" + text, HEAT_GOAL)
    assert g.known_places() == {"shelf", "countertop"}


def test_knowledge_of_several_words_names_its_kind_by_the_last_word() -> None:
    from deltamem.agents.guide import sightings

    text = "- metal pot: found in/on kitchen\n- unknown substance b: found in/on living room"
    assert sightings(text) == [("pot", "kitchen"), ("b", "living room")]
    recall = ("Tasks of the form: heat {A} in a pot\n1. teleport to workshop\n"
              "2. pick up pot\n" + text)
    g = Guide(recall, "heat water in a pot")
    assert g.known_places() == {"kitchen"}
    here = ["teleport to bedroom", "teleport to kitchen", "teleport to workshop", "look around"]
    advice = g.advise(here, ["teleport to workshop"], here)  # no pot in the workshop
    assert advice.backtrack and advice.actions == ("teleport to kitchen",)


def test_things_a_recall_always_puts_in_one_place_belong_there() -> None:
    from deltamem.agents.guide import placements

    assert placements(["take iron", "put iron on ironing board", "take pot from shelf",
                       "take milk carton from desk 1", "insert milk carton into fridge 1",
                       "move pot to sink", "move pot to stove", "go north", "take egg turtle",
                       "move egg turtle in inventory to green box", "move jug to sink",
                       "take {A}", "move {A} to box"]) == {
        "iron": "ironing board", "milk carton": "fridge",  # the pot has two places
        "egg turtle": "green box"}  # the jug is never taken: a tool moved where it is
