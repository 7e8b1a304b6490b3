"""Items, best first: the procedures a recall holds and the order they are followed in."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from deltamem.types import Recall
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL, PLACES, VERBS, item


def test_items_are_followed_one_by_one_best_score_first() -> None:
    heat = item(HEAT_RECALL, 0.6)
    other = item("Strategy for: clean some {A} and put it in {B}\n1. go to cabinet\n"
                  "2. take {A} from cabinet\n3. go to sinkbasin\n4. clean {A} with sinkbasin",
                  0.9)
    recall = Recall(text=HEAT_RECALL + "\n" + other.text, items=(heat, other))
    g = Guide(recall, HEAT_GOAL)
    assert g.procedures[0] == other.text  # the system's own score orders them
    # the best item is followed on its own: its steps, not the two items run together
    assert g.advise(PLACES, [], PLACES).actions == ("go to cabinet 1", "go to cabinet 2")
    # at the cabinet with the cup in hand: the best item's next step (go to sinkbasin) is
    # realisable, so it is still followed
    taken = ["go to cabinet 1", "take cup 1 from cabinet 1"]
    assert g.advise(PLACES, taken, PLACES).actions == ("go to sinkbasin 1",)
    # at the microwave, holding the cup: the best item cannot go on here ("clean" is not
    # possible and nothing earlier is fresh), so the next item's step is advised
    here = ["heat cup 1 with microwave 1"]
    advice = g.advise(here, ["go to sinkbasin 1", "take cup 1 from sinkbasin 1",
                             "go to microwave 1"], [*PLACES, *here])
    assert advice.actions == ("heat cup 1 with microwave 1",)


def test_a_chain_of_base_and_deltas_is_one_procedure_and_warnings_are_not_followed() -> None:
    base = item("Tasks of the form: heat some {A} and put it in {B}\n1. go to sinkbasin\n"
                 "2. take {A} from sinkbasin", None, "base", "task")
    delta = item("Extra steps not in the base:\n1. go to microwave\n2. heat {A} with microwave",
                  1.0, "delta", "task")
    warn = item("[FAILED]:\n- go to shelf -> Nothing happens.\n- take cup from shelf",
                 0.99, "warning", "task")
    env = item("- cup: found in/on shelf", 0.97, "base", "env")
    recall = Recall(text="\n".join(i.text for i in (base, delta, warn, env)),
                    items=(base, delta, warn, env))
    g = Guide(recall, HEAT_GOAL)
    assert g.procedures[0] == base.text + "\n" + delta.text
    assert all("FAILED" not in p for p in g.procedures)
    assert g.steps(VERBS) == ["go to sinkbasin", "take cup from sinkbasin", "go to microwave",
                              "heat cup with microwave"]
    assert g.known_places() == {"shelf"}  # knowledge is read from the whole recall


def test_a_delta_that_edits_steps_puts_its_own_in_their_place() -> None:
    base = item("Trigger: Tasks of the form: heat some {A} and put it in {B}\nProcedure: "
                 "1. go to sinkbasin\n2. take {A} from sinkbasin\n3. go to microwave\n"
                 "4. heat {A} with microwave\n5. go to {B}", None, "base", "task")
    delta = item('Trigger: Variant of the base skill: heat some {A} and put it in {B}\n'
                  "Procedure: Changes to the base steps:\n"
                  '- instead of steps 3-4 ("go to microwave" to "heat {A} with microwave"):\n'
                  "1. go to stoveburner\n2. heat {A} with stoveburner", 1.0, "delta", "task")
    g = Guide(Recall(text=base.text + "\n" + delta.text, items=(base, delta)), HEAT_GOAL)
    assert g.steps(VERBS) == ["go to sinkbasin", "take cup from sinkbasin", "go to stoveburner",
                              "heat cup with stoveburner", "go to countertop"]
    # the guide's steps need not be numbered as the writer's: a named step is found by text
    odd = item(delta.text.replace("steps 3-4", "steps 7-8"), 1.0, "delta", "task")
    g = Guide(Recall(text=base.text + "\n" + odd.text, items=(base, odd)), HEAT_GOAL)
    assert "go to microwave" not in g.steps(VERBS)
