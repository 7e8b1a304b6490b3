"""Outcome judges: the LLM judge's validated verdict and the scripted judge's rules."""

from __future__ import annotations

import pytest

from deltamem.errors import ConfigError
from deltamem.judge import JUDGE_SCHEMA, LLMJudge, ScriptedJudge, make_judge
from deltamem.llm.scripted import ScriptedLLM
from deltamem.types import Step, Task, Verdict

HOT = Task(id="h", goal="heat some egg and put it in diningtable", domain="alfworld")
STEPS = (
    Step("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see a egg 2."),
    Step("take egg 2 from sinkbasin 1", "You pick up the egg 2 from the sinkbasin 1."),
    Step("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
    Step("heat egg 2 with microwave 1", "You heat the egg 2 using the microwave 1."),
    Step("go to diningtable 1", "You arrive at diningtable 1."),
    Step("move egg 2 to diningtable 1", "You move the egg 2 to the diningtable 1."),
)


def test_llm_judge_returns_the_validated_verdict_and_counts_its_calls() -> None:
    llm = ScriptedLLM([{"verdict": "success", "reason": "step 6 puts the heated egg there"}])
    v = LLMJudge(llm).judge(HOT, STEPS)
    assert v == Verdict("success", "step 6 puts the heated egg there", "llm:scripted")
    (purpose, messages, _), = llm.calls
    assert purpose == "judge" and llm.usage.by_purpose["judge"].calls == 1
    prompt = messages[-1]["content"]
    assert "heat some egg and put it in diningtable" in prompt
    assert "> move egg 2 to diningtable 1" in prompt and "You move the egg 2" in prompt


def test_llm_judge_repairs_once_then_refuses() -> None:
    fixed = ScriptedLLM(['{"verdict": "probably"}',
                         {"verdict": "failure", "reason": "the egg was never heated"}])
    assert LLMJudge(fixed).judge(HOT, STEPS).outcome == "failure"
    bad = ScriptedLLM(["yes", '{"verdict": "yes", "reason": "x"}'])
    v = LLMJudge(bad, name="mine").judge(HOT, STEPS)
    assert v.outcome == "refused" and v.judge == "mine" and "no valid verdict" in v.reason
    assert not v.decided and v.success is None and len(bad.calls) == 2


def test_uncertain_is_a_valid_answer_that_decides_nothing() -> None:
    v = LLMJudge(ScriptedLLM([{"verdict": "uncertain", "reason": "cut off"}])).judge(HOT, STEPS)
    assert v.outcome == "uncertain" and not v.decided
    assert JUDGE_SCHEMA["properties"]["verdict"]["enum"] == ["success", "failure", "uncertain"]


def test_scripted_judge_replays_household_effects() -> None:
    judge = ScriptedJudge()
    won = judge.judge(HOT, STEPS)
    assert won.outcome == "success" and won.reason.startswith("after step 6")
    unheated = [s for s in STEPS if not s.action.startswith("heat")]
    assert judge.judge(HOT, unheated).outcome == "failure"
    # an action the environment refused has no effect
    refused = [*STEPS[:-1], Step("move egg 2 to diningtable 1", "Nothing happens.")]
    assert judge.judge(HOT, refused).outcome == "failure"
    # put into the wrong receptacle kind
    wrong = [*STEPS[:-1], Step("move egg 2 to countertop 1", "You move the egg 2 to the "
                                                             "countertop 1.")]
    assert judge.judge(HOT, wrong).outcome == "failure"


def test_scripted_judge_two_objects_and_the_lamp() -> None:
    judge = ScriptedJudge()
    two = Task(id="2", goal="find two cd and put them in safe")
    one_cd = [Step("take cd 1 from desk 1", "You pick up the cd 1 from the desk 1."),
              Step("move cd 1 to safe 1", "You move the cd 1 to the safe 1.")]
    both = [*one_cd, Step("take cd 2 from bed 1", "You pick up the cd 2 from the bed 1."),
            Step("move cd 2 to safe 1", "You move the cd 2 to the safe 1.")]
    assert judge.judge(two, one_cd).outcome == "failure"
    assert judge.judge(two, both).outcome == "success"
    look = Task(id="l", goal="examine the statue with the desklamp")
    steps = [Step("go to sidetable 1", "You arrive at sidetable 1."),
             Step("use desklamp 1", "You turn on the desklamp 1."),
             Step("go to shelf 2", "You arrive at shelf 2."),
             Step("take statue 1 from shelf 2", "You pick up the statue 1 from the shelf 2.")]
    assert judge.judge(look, steps).outcome == "failure"  # not where the lamp is
    back = [*steps, Step("go to sidetable 1", "You arrive at sidetable 1.")]
    assert judge.judge(look, back).outcome == "success"


def test_scripted_judge_reads_stated_outcomes_and_is_uncertain_otherwise() -> None:
    judge = ScriptedJudge()
    task = Task(id="s", goal="Your task is to boil water.")
    assert judge.judge(task, [Step("boil", "Task completed.")]).outcome == "success"
    assert judge.judge(task, [Step("eat", "You died.")]).outcome == "failure"
    v = judge.judge(task, [Step("look around", "This room is called the kitchen.")])
    assert v == Verdict("uncertain", v.reason, "scripted") and not v.decided


def test_make_judge() -> None:
    assert isinstance(make_judge(" scripted "), ScriptedJudge)
    with pytest.raises(ConfigError):
        make_judge("")
    with pytest.raises(ConfigError):
        make_judge("nonsense:x")
