"""The recall guide: recalled steps filled from the goal, progress, realisation, back-tracking."""

from __future__ import annotations

from tests.agents.test_expert import KeyRoom

from deltamem.agents.guide import Guide, goal_bindings, realises, recalled_steps
from deltamem.agents.react import ReActAgent
from deltamem.llm.scripted import ScriptedLLM
from deltamem.types import Recall

DELTAMEM_RECALL = """Relevant experience from memory:

## Task skill
[Base Skill]
Trigger: Tasks of the form: put a hot {A} in {B} ({A} = e.g. apple, {B} = e.g. countertop)
Procedure: 1. go to fridge
2. open fridge
3. take {A} from fridge
4. go to microwave
5. heat {A} with microwave
6. go to {B}
7. put {A} in/on {B}
Done when: The environment reports the task done after: put {A} in/on {B}
[Failure Record / WARN]
Trigger: Attempts at: put a hot apple in countertop -- failed after 30 steps (reward 0)
Procedure: [FAILED]:
- go to garbagecan -> Nothing happens.
"""
SYNAPSE_RECALL = """## Solved example 1 (similarity 0.81)
Task: put a hot apple in countertop
You are in the middle of a room. Looking quickly around you, you see a fridge 1.
> go to fridge 1
The fridge 1 is closed.
> open fridge 1
You open the fridge 1. In it, you see a apple 1.
> take apple 1 from fridge 1
"""
GOAL = "put a hot tomato in diningtable"
VERBS = ("go", "take", "open", "heat", "put", "examine", "look")


def test_placeholders_and_recalled_entities_are_filled_from_the_goal() -> None:
    assert goal_bindings(DELTAMEM_RECALL, GOAL) == {"{A}": "tomato", "{B}": "diningtable"}
    assert goal_bindings("Trigger: Tasks of the form: cool some {A} and put it in {B}",
                         "heat some cup and put it in countertop", ["cool"]) == {
        "{A}": "cup", "{B}": "countertop"}
    assert goal_bindings(SYNAPSE_RECALL, GOAL) == {"apple": "tomato", "countertop": "diningtable"}
    g = Guide(DELTAMEM_RECALL, GOAL)
    assert g.steps(VERBS) == ["go to fridge", "open fridge", "take tomato from fridge",
                              "go to microwave", "heat tomato with microwave",
                              "go to diningtable", "put tomato in/on diningtable"]
    assert Guide(SYNAPSE_RECALL, GOAL).steps(VERBS) == [
        "go to fridge 1", "open fridge 1", "take tomato 1 from fridge 1"]


def test_failure_records_and_unknown_verbs_are_not_steps() -> None:
    steps = recalled_steps(DELTAMEM_RECALL, ["go"])
    assert "go to garbagecan" not in steps  # a failure record
    assert steps[:3] == ["go to fridge", "open fridge", "take {A} from fridge"]  # numbered
    assert recalled_steps("Knowledge: - cloth: found in/on countertop\nwalk the dog",
                          ["go"]) == []  # a fact and an unmarked line with an unknown verb



def test_tree_sub_goals_are_headings_not_steps() -> None:
    """A bulleted sub-goal over indented steps (MCMA's tree plans) is not itself a step,
    even when it starts with an action verb; a step over an indented note still is."""
    tree = """[tree] Tree plan: heat some potato and put it in garbagecan
  * heat some potato and put it in garbagecan
    * Take potato from sinkbasin
      1. go to sinkbasin
      2. take potato from sinkbasin
    * Heat potato with microwave
      1. go to microwave
      2. heat potato with microwave
"""
    verbs = {"go", "take", "heat", "put"}
    assert recalled_steps(tree, verbs) == [
        "go to sinkbasin", "take potato from sinkbasin", "go to microwave",
        "heat potato with microwave"]
    flat = "- go to fridge\n- take apple from fridge\n  (it was on the top shelf)\n"
    assert recalled_steps(flat, verbs) == ["go to fridge", "take apple from fridge"]

def test_realisation_exact_loose_and_goal_words() -> None:
    goal_words = frozenset({"hot", "tomato", "diningtable"})
    assert realises("go to microwave 1", "go to microwave", goal_words) == "exact"
    assert realises("take tomato 1 from countertop 2", "take tomato from fridge",
                    goal_words) == "loose"
    assert realises("take egg 1 from fridge 1", "take tomato from fridge", goal_words) is None
    assert realises("put tomato 1 in/on countertop 1", "put tomato in/on diningtable",
                    goal_words) is None
    assert realises("open fridge 1", "go to fridge", goal_words) is None


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


def test_a_step_the_current_game_does_not_need_is_skipped_for_a_goal_step_here() -> None:
    recall = ("Trigger: Tasks of the form: put a {A} in {B}\n"
              "Procedure: 1. go to countertop\n2. take {A} from countertop\n3. go to {B}\n"
              "4. open {B}\n5. put {A} in/on {B}")
    g = Guide(recall, "put a tomato in diningtable")
    advice = g.advise(["put tomato 1 in/on diningtable 1", "go to countertop 1"],
                      ["go to countertop 1", "take tomato 1 from countertop 1",
                       "go to diningtable 1"], [])
    assert advice.actions == ("put tomato 1 in/on diningtable 1",)


def test_empty_recall_gives_no_advice() -> None:
    g = Guide("", GOAL)
    assert g.advise(["look"], [], []).hint is None


KEY_RECALL = ("Trigger: Tasks of the form: leave the room\n"
              "Procedure: 1. go shelf\n2. take key\n3. go door\n4. open door\n5. leave")


def _agent_play(guide: str) -> tuple[bool, list[tuple[str, list[str] | None]]]:
    llm = ScriptedLLM(responder=lambda messages, purpose, choices: choices[-1])  # picks "look"
    env = KeyRoom()
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


HEAT_RECALL = ("Trigger: Tasks of the form: heat some {A} and put it in {B}\n"
               "Procedure: 1. go to sinkbasin\n2. take {A} from sinkbasin\n3. go to microwave\n"
               "4. heat {A} with microwave\n5. go to {B}\n6. move {A} to {B}\n")
HEAT_GOAL = "heat some cup and put it in countertop"
PLACES = ["go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to microwave 1",
          "go to shelf 1", "go to sinkbasin 1"]


def test_lookahead_never_jumps_to_a_move_past_the_object_step() -> None:
    # the cup is not on the sinkbasin: going to the countertop (the goal's receptacle, and
    # admissible from anywhere) would be no progress; search for the cup instead
    g = Guide(HEAT_RECALL, HEAT_GOAL)
    advice = g.advise([*PLACES, "examine sinkbasin 1"], ["go to sinkbasin 1"], PLACES)
    assert advice.backtrack and advice.blocked == "take cup from sinkbasin"
    assert "go to countertop 1" not in advice.actions
    assert set(advice.actions) == {"go to cabinet 1", "go to cabinet 2", "go to microwave 1",
                                   "go to shelf 1"}


def test_a_blocked_step_opens_what_is_closed_here_first() -> None:
    g = Guide(HEAT_RECALL, HEAT_GOAL)
    here = [*PLACES, "open cabinet 1", "examine cabinet 1"]
    advice = g.advise(here, ["go to sinkbasin 1", "go to cabinet 1"], PLACES)
    assert advice.actions == ("open cabinet 1",) and advice.backtrack
    opened = g.advise(PLACES, ["go to sinkbasin 1", "go to cabinet 1", "open cabinet 1"], PLACES)
    assert "open cabinet 1" not in opened.actions  # opened once is enough
    inside = g.advise([*PLACES, "take cup 1 from cabinet 1"],
                      ["go to sinkbasin 1", "go to cabinet 1", "open cabinet 1"], PLACES)
    assert inside.actions == ("take cup 1 from cabinet 1",)


def test_the_search_goes_first_where_recalled_knowledge_found_the_object() -> None:
    recall = (HEAT_RECALL + "\n[Base Knowledge]\nKnowledge: - cup: found in/on shelf\n"
              "- egg: found in/on cabinet\n")
    g = Guide(recall, HEAT_GOAL)
    assert g.known_places() == {"shelf"}  # only the goal's objects count
    advice = g.advise(PLACES, ["go to sinkbasin 1"], PLACES)
    assert advice.actions == ("go to shelf 1",)
    visited = g.advise(PLACES, ["go to sinkbasin 1", "go to shelf 1"], PLACES)
    assert set(visited.actions) == {"go to cabinet 1", "go to cabinet 2", "go to microwave 1"}
