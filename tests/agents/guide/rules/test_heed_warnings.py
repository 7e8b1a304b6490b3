"""The heed-warnings rule: what failed before is tried last, never blocked."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from deltamem.types import Recall, RecallItem

SKILL = ("Tasks of the form: heat some {A} and put it in {B}\n1. go to cabinet\n"
         "2. open cabinet\n3. take {A} from cabinet\n4. go to microwave\n"
         "5. heat {A} with microwave\n6. go to {B}\n7. move {A} to {B}")
GOAL = "heat some plate and put it in cabinet"


def _recall(*warnings: str) -> Recall:
    items = [RecallItem("task", "s", SKILL, 0.9, "base")]
    items += [RecallItem("task", f"w{n}", w, 0.8, "warning") for n, w in enumerate(warnings)]
    return Recall(text="\n\n".join(i.text for i in items), items=tuple(items))


SEARCH_HERE = ["go to cabinet 1", "go to countertop 1", "go to drawer 1", "go to fridge 1",
               "look"]
TAKEN = ["go to cabinet 1", "open cabinet 1", "go to cabinet 2", "open cabinet 2"]


def test_places_searched_in_vain_are_left_out_of_a_search_while_others_remain() -> None:
    plain = Guide(_recall(), GOAL).advise(SEARCH_HERE, TAKEN, SEARCH_HERE)
    assert plain.actions == ("go to countertop 1", "go to drawer 1", "go to fridge 1")
    warned = _recall("[FAILED]:\n- searched in vain for plate: countertop 1, drawer")
    advice = Guide(warned, GOAL).advise(SEARCH_HERE, TAKEN, SEARCH_HERE)
    assert advice.backtrack and advice.actions == ("go to fridge 1",)
    # another thing's search says nothing of this one
    other = _recall("- searched in vain for mug: countertop, drawer, fridge")
    assert Guide(other, GOAL).advise(SEARCH_HERE, TAKEN, SEARCH_HERE) == plain


def test_a_warning_never_blocks_the_only_way_forward() -> None:
    everywhere = _recall("- searched in vain for plate: countertop, drawer, fridge")
    plain = Guide(_recall(), GOAL).advise(SEARCH_HERE, TAKEN, SEARCH_HERE)
    assert Guide(everywhere, GOAL).advise(SEARCH_HERE, TAKEN, SEARCH_HERE) == plain


def test_commands_that_had_no_effect_are_left_out_and_placeholders_match_any_thing() -> None:
    here = ["heat plate 1 with microwave 1", "heat plate 1 with stoveburner 1", "look"]
    taken = ["go to cabinet 1", "open cabinet 1", "take plate 1 from cabinet 1",
             "go to microwave 1"]
    recall = Recall(text="", items=(
        RecallItem("task", "s", SKILL.replace("with microwave", "with {C}"), 0.9, "base"),
        RecallItem("task", "w", "[FAILED]:\n- heat {A} with stoveburner 2 -> Nothing happens."
                   "\n- go to stoveburner 1 -> You arrive at stoveburner 1.", 0.8, "warning")))
    g = Guide(recall, GOAL)
    assert g.warnings.failed("heat mug 3 with stoveburner 1")
    assert not g.warnings.failed("go to stoveburner 1")  # it had an effect
    advice = g.advise(here, taken, here)
    assert advice.actions == ("heat plate 1 with microwave 1",)


def test_warning_items_are_never_followed_and_a_text_recall_has_no_warnings() -> None:
    warned = _recall("[FAILED]:\n- go to garbagecan 1 -> Nothing happens.")
    g = Guide(warned, GOAL)
    assert len(g.procedures) == 1 and "garbagecan" not in g.procedures[0]
    assert not Guide(SKILL, GOAL).warnings
