"""Realising a recalled step: exact and loose realisations, stand-ins."""

from __future__ import annotations

import pytest

from deltamem.agents.guide import Guide, realises


def test_realisation_exact_loose_and_goal_words() -> None:
    goal_words = frozenset({"hot", "tomato", "diningtable"})
    assert realises("go to microwave 1", "go to microwave", goal_words) == "exact"
    assert realises("take tomato 1 from countertop 2", "take tomato from fridge",
                    goal_words) == "loose"
    assert realises("take egg 1 from fridge 1", "take tomato from fridge", goal_words) is None
    assert realises("put tomato 1 in/on countertop 1", "put tomato in/on diningtable",
                    goal_words) is None
    assert realises("open fridge 1", "go to fridge", goal_words) is None


def test_the_place_a_thing_is_taken_from_is_never_pinned_by_the_goal() -> None:
    """The recalled game found its potato in the sinkbasin; this goal puts the tomato in the
    sinkbasin: the tomato seen on the dining table must still be taken (it was walked past)."""
    goal_words = frozenset({"heat", "tomato", "sinkbasin"})
    assert realises("take tomato 1 from diningtable 1", "take tomato from sinkbasin",
                    goal_words) == "loose"
    assert realises("take apple 1 from diningtable 1", "take tomato from sinkbasin",
                    goal_words) is None  # the thing handled still matters
    assert realises("move tomato 1 to diningtable 1", "move tomato to sinkbasin",
                    goal_words) is None  # and so does where it goes
    g = Guide("1. go to sinkbasin\n2. take tomato from sinkbasin\n3. go to microwave\n"
              "4. heat tomato with microwave\n5. go to sinkbasin\n6. move tomato to sinkbasin",
              "heat some tomato and put it in sinkbasin")
    here = ["go to sinkbasin 1", "go to microwave 1", "take tomato 1 from diningtable 1"]
    advice = g.advise(here, ["go to sinkbasin 1", "go to diningtable 1"], here)
    assert advice.actions == ("take tomato 1 from diningtable 1",)


def test_a_move_is_realised_by_any_way_of_reaching_the_same_place() -> None:
    goal_words = frozenset({"thermometer"})
    assert realises("teleport to kitchen", "go to kitchen", goal_words) == "exact"
    assert realises("go to kitchen", "teleport to kitchen", goal_words) == "exact"
    assert realises("teleport to art studio", "go to art studio", goal_words) == "exact"
    # a move to another place is a loose realisation (the search), whichever the way
    assert realises("teleport to hallway", "go to kitchen", goal_words) == "loose"
    assert realises("go to hallway", "go to kitchen", goal_words) == "loose"
    assert realises("teleport to kitchen", "go to thermometer", goal_words) is None
    recall = "Tasks of the form: boil {A}\n1. go to kitchen\n2. pick up thermometer"
    here = ["go to hallway", "teleport to kitchen", "teleport to workshop", "look around"]
    advice = Guide(recall, "boil water").advise(here, [], here)
    assert advice.actions == ("teleport to kitchen",) and not advice.backtrack


def test_a_committing_step_is_never_realised_loosely() -> None:
    # focusing on the wrong thing ends a ScienceWorld task: "focus on dove" is not
    # "focus on agent", although neither word is in the goal
    goal = "find a(n) living thing. First, focus on the thing"
    words = frozenset({"living", "thing"})
    assert realises("focus on agent", "focus on dove", words) is None
    assert realises("focus on dove", "focus on dove", words) == "exact"
    assert realises("move dove to blue box", "move dove to green box", words) == "loose"
    recall = "Tasks of the form: find a living thing\n1. teleport to outside\n2. focus on dove"
    here = ["focus on agent", "focus on air", "focus on beaver", "look around"]
    advice = Guide(recall, goal).advise(here, ["teleport to outside"], here)
    assert not any(a.startswith("focus") for a in advice.actions)


def test_a_handling_step_keeps_its_object_and_only_places_change_loosely() -> None:
    words = frozenset({"rubber"})
    assert realises("pick up bee", "pick up thermometer", words) is None
    assert realises("look at agent", "look around", words) is None
    assert realises("use thermometer in inventory on water", "use thermometer in inventory on "
                    "ice", words) == "loose"
    assert realises("pour cup containing blue paint in jug", "pour cup containing red paint "
                    "in jug", words) is None
    # the search verbs may change their place: another room, another receptacle
    assert realises("teleport to workshop", "teleport to kitchen", words) == "loose"
    assert realises("open drawer", "open cupboard", words) == "loose"
    # household: where the object lay is incidental, the object is not
    goal_words = frozenset({"tomato", "diningtable"})
    assert realises("take tomato 1 from countertop 2", "take tomato from fridge",
                    goal_words) == "loose"
    assert realises("take egg 1 from fridge 1", "take knife from fridge", goal_words) is None


def test_a_carried_thing_is_named_with_or_without_its_inventory() -> None:
    assert realises("focus on thermometer", "focus on thermometer in inventory",
                    frozenset()) == "exact"
    assert realises("use thermometer on water", "use thermometer in inventory on water in "
                    "inventory", frozenset()) == "exact"


def test_instance_letters_and_unequal_places_in_realisation() -> None:
    from deltamem.agents.guide import abstract_action

    assert abstract_action("pick up unknown substance B") == "pick up unknown substance"
    assert realises("pick up unknown substance", "pick up unknown substance B",
                    frozenset()) == "exact"
    # moving a thing to another place of another length is another action; a move is not
    assert realises("move ice cream to bathroom", "move ice cream to metal pot",
                    frozenset()) is None
    assert realises("teleport to living room", "teleport to kitchen", frozenset()) == "loose"


def test_a_place_that_only_tells_two_things_apart_does_not_block_a_step() -> None:
    # ScienceWorld names where a thing is when two things share its name
    assert realises("focus on soap in kitchen", "focus on soap", frozenset({"soap"})) == "exact"
    assert realises("move soap in table to metal pot", "move soap to metal pot",
                    frozenset({"soap"})) == "exact"
    # only an "in <place>" span is a qualifier, and only where the step goes on or ends
    assert realises("move soap to bathroom", "move soap", frozenset()) is None
    assert realises("focus on soap in kitchen", "focus on water", frozenset()) is None


def test_another_thing_of_the_kind_stands_in_for_an_absent_recalled_thing() -> None:
    from deltamem.agents.guide import substitutes

    goal = ("Your task is to find a(n) living thing. First, focus on the thing. Then, move it "
            "to the green box in the bedroom.")
    recall = ("Tasks of the form: Your task is to find a(n) living thing. First, focus on the "
              "thing. Then, move it to the {A} {B} in the {C}.\n1. teleport to outside\n"
              "2. focus on egg parrot\n3. pick up egg parrot\n4. teleport to {C}\n"
              "5. move egg parrot egg in inventory to {A} {B}")
    g = Guide(recall, goal)
    outside = ["teleport to bedroom", "focus on egg turtle", "focus on baby beaver",
               "pick up egg turtle", "look around"]
    advice = g.advise(outside, ["teleport to outside"], outside)
    assert advice.actions == ("focus on egg turtle",)  # shares "egg"; the beaver shares nothing
    taken = ["teleport to outside", "focus on egg turtle"]
    assert g.advise(outside, taken, outside).actions == ("pick up egg turtle",)
    bedroom = ["move egg turtle to green box", "move egg turtle to bed", "teleport to outside"]
    taken += ["pick up egg turtle", "teleport to bedroom"]
    assert g.advise(bedroom, taken, [*outside, *bedroom]).actions == (
        "move egg turtle to green box",)
    # never while the recalled thing itself is here, and never a thing the goal names
    here = ["focus on egg parrot", "focus on egg turtle"]
    assert g.advise(here, ["teleport to outside"], here).actions == ("focus on egg parrot",)
    assert not substitutes("focus on red box", "focus on green box", frozenset({"green"}))


def test_whether_a_recalled_thing_is_absent_follows_the_offers_of_each_decision() -> None:
    # absent() answers are kept while the offered actions stay the same; a thing offered
    # later in the episode is no longer absent (the answers must not outlive the offers)
    recall = "1. teleport to outside\n2. focus on egg parrot\n3. pick up egg parrot"
    g = Guide(recall, "Your task is to find a(n) living thing.")
    outside = ["teleport to bedroom", "focus on egg turtle", "look around"]
    g.advise(outside, ["teleport to outside"], outside)
    assert g.absent("focus on egg parrot") and g.absent("pick up egg parrot")
    assert not g.absent("focus on egg turtle")
    later = [*outside, "focus on egg parrot"]
    assert g.advise(later, ["teleport to outside"], later).actions == ("focus on egg parrot",)
    assert not g.absent("focus on egg parrot")


@pytest.mark.parametrize(("wires", "second"), [(("orange", "red"), "red"),
                                                (("black", "red"), "red")])
def test_a_part_is_named_either_way_and_a_stand_in_keeps_its_role(
        wires: tuple[str, str], second: str) -> None:
    from deltamem.agents.guide import part_names

    assert part_names("connect anode in battery to terminal in yellow wire") == (
        "connect battery anode to yellow wire terminal")
    assert part_names("pour cup containing red paint in art studio into jug") == (
        "pour cup containing red paint in art studio into jug")  # not a bare part
    goal = ("Your task is to turn on the electric motor. First, focus on the electric motor. "
            "Then, create an electrical circuit that powers it on.")
    recall = ("Tasks of the form: Your task is to turn on the {A} {B} {C}. First, focus on the "
              "{A} {B} {C}. Then, create an electrical circuit that powers it on.\n"
              "1. focus on {A} {B} {C}\n2. connect battery anode to black wire terminal\n"
              "3. connect battery cathode to blue wire terminal\n"
              "4. connect black wire terminal to cathode in {A} {B} {C}\n"
              "5. connect blue wire terminal to anode in {A} {B} {C}\n6. wait1")
    g = Guide(recall, goal)

    def offered(taken: list[str]) -> list[str]:
        used = {w for a in taken for w in a.split() if w in wires}
        free = [f"{w} wire terminal {n}" for w in wires for n in (1, 2)
                if not any(f"{w} wire terminal {n}" in a for a in taken)]
        out = ["focus on electric motor", "wait1",
               "connect anode in battery to anode in solar panel",
               "connect battery cathode to anode in nuclear generator"]
        out += [f"connect anode in battery to {t}" for t in free]
        out += [f"connect battery cathode to {t}" for t in free]
        out += [f"connect {t} to {p} in electric motor" for t in free for p in ("anode", "cathode")]
        assert used <= set(wires)
        return sorted(out)

    taken: list[str] = []
    for _ in range(6):
        advice = g.advise(offered(taken), taken, offered(taken))
        assert advice.actions, taken
        taken.append(advice.actions[0])
    first = wires[0]  # stands in for the recalled black wire (or is it)
    assert taken == [
        "focus on electric motor",
        f"connect anode in battery to {first} wire terminal 1",
        # the first wire already plays the black one: the blue one's role goes elsewhere
        f"connect battery cathode to {second} wire terminal 1",
        f"connect {first} wire terminal 2 to cathode in electric motor",
        f"connect {second} wire terminal 2 to anode in electric motor",
        "wait1",
    ]
