"""The guide of one episode: the rule set run in order, the agent's use of it."""

from __future__ import annotations

import pytest

from deltamem.agents.guide import Guide
from deltamem.agents.react import ReActAgent
from deltamem.envs.base import GUIDE_RULES
from deltamem.errors import ConfigError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.types import Recall
from tests.agents.guide.recalls import DELTAMEM_RECALL, GOAL, HEAT_GOAL, HEAT_RECALL, PLACES
from tests.agents.test_expert import KeyRoom


def test_advice_follows_progress_and_backtracks_when_the_object_is_elsewhere() -> None:
    g = Guide(DELTAMEM_RECALL, GOAL)
    everywhere = ["go to fridge 1", "go to countertop 1", "go to countertop 2",
                  "go to diningtable 1", "go to microwave 1", "look"]
    first = g.advise(everywhere, [], everywhere)
    assert first.actions == ("go to fridge 1",)
    assert first.hint == "From memory, the next step: go to fridge 1"
    at_fridge = ["close fridge 1", "take egg 1 from fridge 1", "go to countertop 1",
                 "go to fridge 1", "go to microwave 1"]
    stuck = g.advise(at_fridge, ["go to fridge 1", "open fridge 1"], everywhere)
    assert stuck.backtrack and stuck.blocked == "take tomato from fridge"
    assert stuck.actions == ("go to countertop 1", "go to microwave 1")  # not yet visited
    found = g.advise(["take tomato 1 from countertop 1", "go to microwave 1"],
                     ["go to fridge 1", "open fridge 1", "go to countertop 1"], everywhere)
    assert found.actions == ("take tomato 1 from countertop 1",)
    end = g.advise(["put tomato 1 in/on diningtable 1"],
                   ["go to fridge 1", "open fridge 1", "go to countertop 1",
                    "take tomato 1 from countertop 1", "go to microwave 1",
                    "heat tomato 1 with microwave 1", "go to diningtable 1"], everywhere)
    assert end.actions == ("put tomato 1 in/on diningtable 1",)


def test_empty_recall_gives_no_advice() -> None:
    g = Guide("", GOAL)
    assert g.advise(["look"], [], []).hint is None


def test_an_action_the_environment_refused_is_not_advised_again() -> None:
    recall = "Tasks of the form: boil {A}\n1. teleport to kitchen\n2. pick up {A}"
    g = Guide(recall, "boil water")
    here = ["open drawer in cupboard", "open fridge", "teleport to kitchen", "look around"]
    taken = ["teleport to kitchen"]
    first = g.advise(here, taken, here)
    assert first.backtrack and first.actions[0] == "open drawer in cupboard"
    # listed, but the engine could not parse it: advising it again repeats the refusal
    again = g.advise(here, taken, here, refused=["open drawer in cupboard"])
    assert again.actions == ("open fridge",)
    # when every advised action was refused, the advice stays (nothing better to say)
    only = g.advise(["open drawer in cupboard", "look around"], taken, here,
                    refused=["open drawer in cupboard"])
    assert only.actions == ("open drawer in cupboard",)


KEY_RECALL = ("Trigger: Tasks of the form: leave the room\n"
              "Procedure: 1. go shelf\n2. take key\n3. go door\n4. open door\n5. leave")


def _agent_play(guide: str, env: KeyRoom | None = None
                ) -> tuple[bool, list[tuple[str, list[str] | None]]]:
    llm = ScriptedLLM(responder=lambda messages, purpose, choices: choices[-1])  # picks "look"
    env = env or KeyRoom()
    task = env.reset("test-0")
    agent = ReActAgent(llm, domain="generic", constrained=True, guide=guide)  # type: ignore[arg-type]
    ep = agent.play(env, task, Recall(text=KEY_RECALL))
    prompts = [(m[-1]["content"], c) for _, m, c in llm.calls]
    return ep.success, prompts


def test_guide_off_is_the_plain_agent() -> None:
    success, calls = _agent_play("off")
    assert not success
    assert all("From memory" not in text for text, _ in calls)


def test_guide_hint_puts_the_next_step_right_before_the_action_list() -> None:
    success, calls = _agent_play("hint")
    text, _ = calls[0]
    assert "From memory, the next step: go shelf\nAvailable actions:" in text
    assert not success  # a model that ignores the hint still picks what it likes


def test_guide_prior_makes_the_choice_among_the_realising_actions() -> None:
    success, calls = _agent_play("prior")
    assert success
    assert calls == []  # every step had one realising action: no model call was needed


def test_a_guide_runs_the_rule_set_it_is_given_in_order() -> None:
    g = Guide(HEAT_RECALL, HEAT_GOAL)
    assert g.rule_names == GUIDE_RULES == (
        "put-away", "follow", "look-ahead", "return-to-place", "open-closed", "backtrack",
        "search-unvisited", "heed-warnings")
    assert [r.name for r in g.rules] == list(GUIDE_RULES)
    # a blocked step: the default set opens the cabinet before searching elsewhere ...
    here = [*PLACES, "open cabinet 1", "examine cabinet 1"]
    taken = ["go to sinkbasin 1", "go to cabinet 1"]
    assert g.advise(here, taken, PLACES).actions == ("open cabinet 1",)
    # ... a set without open-closed goes straight on to the search, one without any search
    # rule says nothing it could do
    no_open = [r for r in GUIDE_RULES if r != "open-closed"]
    searched = Guide(HEAT_RECALL, HEAT_GOAL, rules=no_open).advise(here, taken, PLACES)
    assert searched.backtrack and "open cabinet 1" not in searched.actions
    assert searched.actions
    bare = Guide(HEAT_RECALL, HEAT_GOAL, rules=["follow"]).advise(here, taken, PLACES)
    assert bare.actions == () and bare.step == "take cup from sinkbasin"


@pytest.mark.parametrize("rules", [["follow", "nope"], ["follow", "follow"],
                                   ["follow", "put-away"], ["heed-warnings", "follow"],
                                   "follow"])
def test_a_rule_set_that_cannot_be_run_as_written_is_refused(rules: list[str] | str) -> None:
    with pytest.raises(ConfigError):
        Guide(HEAT_RECALL, HEAT_GOAL, rules=rules)


def test_the_agent_follows_the_rule_set_its_environment_declares() -> None:
    class NoFollowRoom(KeyRoom):
        guide_rules = tuple(r for r in GUIDE_RULES if r != "follow")

    assert KeyRoom.guide_rules == GUIDE_RULES  # a domain that declares none runs the default
    success, calls = _agent_play("prior", NoFollowRoom())
    # without "follow" the recalled steps are not advised where they can be done: the model
    # chooses (and picks "look"), where the declared default set won without a model call
    assert not success
    assert calls


def test_the_agent_can_be_given_a_rule_set_of_its_own() -> None:
    llm = ScriptedLLM(responder=lambda messages, purpose, choices: choices[-1])  # picks "look"
    env = KeyRoom()
    no_follow = tuple(r for r in GUIDE_RULES if r != "follow")
    agent = ReActAgent(llm, domain="generic", constrained=True, guide="prior",
                       guide_rules=no_follow)
    ep = agent.play(env, env.reset("test-0"), Recall(text=KEY_RECALL))
    assert not ep.success and llm.calls  # as in a domain that declares that set


def test_a_place_the_composition_replaced_is_searched_before_the_rest() -> None:
    """A delta put "take {A} from countertop" in place of the base's "take {A} from
    sinkbasin": the chain still recorded the sinkbasin, so when the countertop has no tomato
    the search goes there before any other place."""
    from deltamem.types import Recall, RecallItem

    base = ("[Base Skill]\nTrigger: Tasks of the form: put a cool {A} in {B}\nProcedure: "
            "1. go to sinkbasin\n2. take {A} from sinkbasin\n3. go to fridge\n"
            "4. cool {A} with fridge\n5. go to {B}\n6. move {A} to {B}")
    delta = ("[Skill Delta 1]\nTrigger: Variant of the base skill: put a cool {A} in {B}\n"
             "Procedure: Changes to the base steps:\n- instead of steps 1-2 (\"go to "
             "sinkbasin\" to \"take {A} from sinkbasin\"):\n1. go to countertop\n"
             "2. take {A} from countertop")
    recall = Recall(text=base + "\n\n" + delta, items=(
        RecallItem("task", "r", base, 0.9, "base"), RecallItem("task", "d", delta, 0.9, "delta")))
    g = Guide(recall, "put a cool tomato in microwave")
    here = ["go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to drawer 1",
            "go to fridge 1", "go to sinkbasin 1", "look"]
    advice = g.advise(here, ["go to countertop 1"], here)
    assert advice.actions == ("go to sinkbasin 1",)
    followed = g.steps(set(), g.procedures[0])
    assert followed[:2] == ["go to countertop", "take tomato from countertop"]
