"""The ReAct agent: prompt assembly, free and constrained modes, step cap, usage."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem.agents import INVALID_OBSERVATION, ReActAgent
from deltamem.agents.prompts import (
    build_messages,
    history_start,
    load_agent_prompts,
    render_history,
    render_step,
)
from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError, LLMError
from deltamem.llm import ScriptedLLM
from deltamem.llm.base import BaseLLM, Completion
from deltamem.types import Recall, RecallItem, Step, Task


class LineEnv(Environment):
    """A line of cells 0..length; reach the last cell. Records every action it is sent."""

    name = "line"
    domain = "generic"
    splits = ("test",)

    def __init__(self, length: int = 3, cap: int = 10, listed: bool = True) -> None:
        self.length, self.cap, self.listed = length, cap, listed
        self.pos = 0
        self.done = False
        self.sent: list[tuple[str, tuple[str, ...]]] = []

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return ["t0"]

    def reset(self, task_id: str) -> Task:
        self.pos, self.done, self.sent = 0, False, []
        return Task(id=task_id, goal="reach the end of the line", domain="generic",
                    observation="You stand at the start of a line.", max_steps=self.cap)

    def admissible_actions(self) -> list[str]:
        if not self.listed:
            return []
        acts = ["look"]
        if self.pos < self.length:
            acts.insert(0, "go forward")
        if self.pos > 0:
            acts.append("go back")
        return acts

    def step(self, action: str) -> Transition:
        if self.done:
            raise RuntimeError("step after done")
        self.sent.append((action, tuple(self.admissible_actions())))
        if action == "go forward" and self.pos < self.length:
            self.pos += 1
        elif action == "go back" and self.pos > 0:
            self.pos -= 1
        elif action != "look":
            return Transition("I do not understand.", self.pos / self.length, False, False, False)
        self.done = self.pos == self.length
        return Transition(f"You are at cell {self.pos}.", self.pos / self.length, self.done,
                          self.done)


def _play(agent: ReActAgent, env: LineEnv, recall: Recall | None = None):
    task = env.reset("t0")
    return agent.play(env, task, recall or Recall())


def test_free_mode_reaches_goal_and_accounts_reward() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Thought: forward.\nAction: Go Forward.")
    env = LineEnv(length=3)
    ep = _play(ReActAgent(llm, domain="generic"), env)
    assert ep.success and ep.reward == pytest.approx(1.0)
    assert [s.action for s in ep.steps] == ["go forward"] * 3
    assert [s.thought for s in ep.steps] == ["forward."] * 3
    assert sum(s.reward for s in ep.steps) == pytest.approx(1.0)
    assert ep.steps[-1].done and ep.steps[0].admissible == ("go forward", "look")
    assert ep.max_steps == 10


def test_invalid_action_is_not_sent_and_is_counted() -> None:
    llm = ScriptedLLM(["Action: fly away", "Thought: only a thought", "Action: go forward"],
                      responder=lambda m, p, c: "Action: go forward")
    env = LineEnv(length=1)
    ep = _play(ReActAgent(llm, domain="generic"), env)
    assert [s.valid for s in ep.steps] == [False, False, True]
    assert ep.steps[0].observation == INVALID_OBSERVATION
    assert ep.steps[1].action == ""
    assert [a for a, _ in env.sent] == ["go forward"]
    assert ep.success
    # the model saw its invalid action and the feedback in the next prompt
    last_prompt = llm.calls[-1][1][-1]["content"]
    assert "Action: fly away" in last_prompt and INVALID_OBSERVATION in last_prompt


def test_without_admissible_list_every_action_is_sent_and_env_decides_validity() -> None:
    llm = ScriptedLLM(["Action: dance", "Action: go forward"])
    env = LineEnv(length=1, listed=False)
    ep = _play(ReActAgent(llm, domain="generic"), env)
    assert [a for a, _ in env.sent] == ["dance", "go forward"]
    assert [s.valid for s in ep.steps] == [False, True]


@pytest.mark.parametrize(("cap", "override"), [(4, None), (10, 2), (1, None)])
def test_step_cap_is_respected(cap: int, override: int | None) -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: look")
    env = LineEnv(length=3, cap=cap)
    ep = _play(ReActAgent(llm, domain="generic", max_steps=override), env)
    expected = override if override is not None else cap
    assert len(ep.steps) == expected == len(llm.calls) == ep.max_steps
    assert not ep.success and ep.reward == 0.0


def test_garbage_replies_still_stop_at_the_cap() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "I refuse to answer in the format.")
    env = LineEnv(cap=5)
    ep = _play(ReActAgent(llm, domain="generic"), env)
    assert len(ep.steps) == 5 and not any(s.valid for s in ep.steps)
    assert env.sent == [] and ep.reward == 0.0 and not ep.success


def test_usage_of_the_episode_is_counted_under_act_only() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: go forward")
    llm.complete([{"role": "user", "content": "earlier work"}], purpose="extract")
    ep = _play(ReActAgent(llm, domain="generic"), LineEnv(length=2))
    assert set(ep.usage.by_purpose) == {"act"}
    assert ep.usage.by_purpose["act"].calls == 2 == len(ep.steps)
    assert ep.usage.by_purpose["act"].prompt_tokens > 0
    assert llm.usage.by_purpose["extract"].calls == 1
    assert all(purpose == "act" for purpose, _, _ in llm.calls[1:])


@settings(max_examples=40)
@given(st.lists(st.integers(min_value=0, max_value=10), min_size=1, max_size=12))
def test_constrained_mode_only_sends_admissible_actions(picks: Sequence[int]) -> None:
    queue = list(picks)

    def pick(messages, purpose, choices):
        assert purpose == "act" and choices
        return choices[queue.pop(0) % len(choices)] if queue else choices[-1]

    llm = ScriptedLLM(responder=pick)
    env = LineEnv(length=3, cap=8)
    ep = _play(ReActAgent(llm, domain="generic", constrained=True), env)
    assert env.sent, "the env was stepped"
    for action, _ in env.sent:
        assert action in ("go forward", "go back", "look")
    for step in ep.steps:
        assert step.valid and step.action in step.admissible and step.thought == ""
    for (_, _, choices), step in zip(llm.calls, ep.steps, strict=True):
        assert tuple(choices) == step.admissible


class _Liar(BaseLLM):
    name = "liar"

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        return Completion(text="teleport home", prompt_tokens=1, completion_tokens=1)


def test_constrained_mode_rejects_a_backend_that_ignores_choices() -> None:
    env = LineEnv()
    with pytest.raises(LLMError, match="not one of the offered choices"):
        _play(ReActAgent(_Liar(), domain="generic", constrained=True), env)
    assert env.sent == []


def test_constrained_mode_needs_admissible_actions() -> None:
    with pytest.raises(ConfigError, match="needs admissible actions"):
        _play(ReActAgent(ScriptedLLM(), domain="generic", constrained=True),
              LineEnv(listed=False))


def test_constrained_mode_refuses_placeholder_actions() -> None:
    class Shop(LineEnv):
        def admissible_actions(self) -> list[str]:
            return ["search[<keywords>]"]

    with pytest.raises(ConfigError, match="placeholders"):
        _play(ReActAgent(ScriptedLLM(), domain="webshop", constrained=True), Shop())


def test_recall_text_is_placed_between_example_and_task() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: go forward")
    recall = Recall(text="MEMORY HEADER\n[Base Skill] walk forward",
                    items=(RecallItem("task", "n1", "walk forward", 0.9, "base"),))
    _play(ReActAgent(llm, domain="alfworld"), LineEnv(length=1), recall)
    system, user = llm.calls[0][1]
    assert system["role"] == "system" and "household" in system["content"]
    content = user["content"]
    example_at = content.index("put a cool tomato in microwave")
    memory_at = content.index("MEMORY HEADER")
    task_at = content.index("You stand at the start of a line.")
    assert example_at < memory_at < task_at
    assert "Your goal: reach the end of the line" in content
    assert "- go forward" in content  # short admissible lists are shown


def test_empty_recall_leaves_memory_out() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: go forward")
    _play(ReActAgent(llm, domain="generic"), LineEnv(length=1))
    content = llm.calls[0][1][1]["content"]
    assert content.count("---") == 1  # only the separator after the example


def test_history_is_trimmed_from_the_front_but_task_is_kept() -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: look")
    _play(ReActAgent(llm, domain="generic", history_chars=120), LineEnv(cap=12))
    content = llm.calls[-1][1][1]["content"]
    assert "You stand at the start of a line." in content
    assert "earlier steps are not shown" in content
    assert content.count("Action: look") < 11


def test_render_history_keeps_newest_and_marks_dropped() -> None:
    steps = [Step(f"a{i}", "o" * 50) for i in range(5)]
    text = render_history(steps, max_chars=0)
    assert text.startswith("[4 earlier steps are not shown.]") and "Action: a4" in text
    assert render_history(steps, max_chars=10_000).count("Action:") == 5
    assert render_history([], 100) == ""


@given(st.lists(st.integers(min_value=1, max_value=120), min_size=1, max_size=60),
       st.integers(min_value=0, max_value=1500))
def test_history_trims_in_blocks_so_the_prefix_stays(lengths: list[int], budget: int) -> None:
    steps = [Step(f"a{i}", "o" * n) for i, n in enumerate(lengths)]
    starts = [history_start(steps[: n + 1], budget) for n in range(len(steps))]
    for n, start in enumerate(starts):
        shown = sum(len(render_step(s)) + 1 for s in steps[start: n + 1])
        assert start <= n  # the newest step is always shown
        assert shown <= budget or start == n  # within budget unless one step exceeds it
        if n and start == starts[n - 1]:  # no trim: the previous history is a prefix
            before = render_history(steps[:n], budget)
            assert render_history(steps[: n + 1], budget).startswith(before + "\n")
    assert starts == sorted(starts)  # the start never moves back


def test_history_start_moves_in_blocks_not_every_step() -> None:
    steps = [Step(f"a{i}", "o" * 80) for i in range(40)]  # ~100 chars a step
    starts = [history_start(steps[: n + 1], 1000) for n in range(len(steps))]
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    assert starts[-1] > 0 and moves <= 8  # one step at a time would move ~30 times


@pytest.mark.parametrize("domain", ["alfworld", "scienceworld", "webshop", "textworld", "generic"])
def test_every_domain_has_templates(domain: str) -> None:
    p = load_agent_prompts(domain)
    assert "Action" in p.instruction and p.example.startswith("Task:")
    msgs = build_messages(p, Task(id="x", goal="g", observation="o"), Recall(), [], ["look"],
                          constrained=False, history_chars=100, max_listed_actions=0)
    assert "Available actions" not in msgs[1]["content"]


@pytest.mark.parametrize("constrained", [True, False])
def test_cue_at_start_makes_each_step_s_prompt_extend_the_previous(constrained: bool) -> None:
    """With the cue before the task, the user message of every call (the hint-free, list-free
    main-job layout) starts with the whole previous one; with the cue at the end it does not."""
    def prompts(cue_at: str) -> list[str]:
        llm = ScriptedLLM(responder=lambda m, p, c: c[-1] if c else "Action: look")
        agent = ReActAgent(llm, domain="alfworld", constrained=constrained, cue_at=cue_at,
                           max_listed_actions=0, history_chars=10_000)
        _play(agent, LineEnv(cap=6, length=9))
        return [call[1][1]["content"] for call in llm.calls]

    start, end = prompts("start"), prompts("end")
    assert len(start) == len(end) == 6
    for before, after in itertools.pairwise(start):
        assert after.startswith(before + "\n") and after != before
    for before, after in itertools.pairwise(end):
        assert not after.startswith(before)
    cue = start[0].split("\n")
    assert cue.index("Now it is your turn. Here is your task.") + 1 < len(cue)
    asked = cue[cue.index("Now it is your turn. Here is your task.") + 1]
    assert asked.startswith("Reply with")  # the cue right before the task
    assert end[0].endswith(asked) and not start[0].endswith(asked)
    # the same words either way, only the cue moved
    assert sorted(start[-1].split("\n")) == sorted(end[-1].split("\n"))


def test_cue_at_must_be_start_or_end() -> None:
    with pytest.raises(ConfigError, match="cue_at"):
        _play(ReActAgent(ScriptedLLM(), domain="generic", cue_at="middle"),  # type: ignore[arg-type]
              LineEnv())
    with pytest.raises(ConfigError, match="cue_at"):
        build_messages(load_agent_prompts("generic"), Task(id="x", goal="g", observation="o"),
                       Recall(), [], ["look"], constrained=True, history_chars=100,
                       max_listed_actions=0, cue_at="middle")


def test_unknown_domain_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown domain"):
        _play(ReActAgent(ScriptedLLM(), domain="chess"), LineEnv())


def test_play_is_deterministic_with_a_deterministic_llm() -> None:
    def responder(messages, purpose, choices):
        n = messages[-1]["content"].count("Observation:")
        return "Thought: hm\nAction: look" if n % 2 else "Action: go forward"

    eps = [_play(ReActAgent(ScriptedLLM(responder=responder), domain="generic"), LineEnv(4))
           for _ in range(2)]
    assert [s.to_dict() for s in eps[0].steps] == [s.to_dict() for s in eps[1].steps]
    assert eps[0].usage.to_dict() == eps[1].usage.to_dict()


def _first_choice(messages, purpose, choices):
    return "look" if "look" in choices else choices[0]


def test_repeat_limit_drops_a_looping_action_from_the_choices() -> None:
    llm = ScriptedLLM(responder=_first_choice)
    env = LineEnv(length=3, cap=12)
    ep = _play(ReActAgent(llm, domain="generic", constrained=True, repeat_limit=2), env)
    actions = [s.action for s in ep.steps]
    # once from the opening text, twice from "cell 0", then it is left out there
    assert actions[:4] == ["look", "look", "look", "go forward"]
    offered = [tuple(c) for _, _, c in llm.calls]
    assert "look" in offered[2]
    # the 4th decision had "go forward" alone left: taken without a model call
    assert offered[3] == ("go forward", "look", "go back")  # new cell: "look" is back
    assert ep.success


def test_repeat_limit_breaks_cycles_between_places() -> None:
    # desk -> drawer -> desk -> drawer ...: back at the desk for the second time, the
    # action taken from that same observation before is worn out (limit 1)
    agent = ReActAgent(ScriptedLLM(), domain="generic", constrained=True, repeat_limit=1)
    task = Task(id="t", goal="g", domain="generic", observation="start")
    steps = [Step(action="go to desk", observation="at desk", reward=0.0, done=False),
             Step(action="go to drawer", observation="at drawer", reward=0.0, done=False),
             Step(action="go to desk", observation="at desk", reward=0.0, done=False)]
    options = ("go to drawer", "go to desk", "take pen")
    assert agent._without_loops(options, task, steps) == ("go to desk", "take pen")
    agent2 = ReActAgent(ScriptedLLM(), domain="generic", constrained=True, repeat_limit=2)
    assert agent2._without_loops(options, task, steps) == options


def test_without_repeat_limit_the_loop_goes_on() -> None:
    llm = ScriptedLLM(responder=_first_choice)
    env = LineEnv(length=3, cap=6)
    ep = _play(ReActAgent(llm, domain="generic", constrained=True), env)
    assert [s.action for s in ep.steps] == ["look"] * 6 and not ep.success


def test_repeat_limit_keeps_something_to_choose() -> None:
    agent = ReActAgent(ScriptedLLM(), domain="generic", constrained=True, repeat_limit=1)
    task = Task(id="t", goal="g", domain="generic", observation="o")
    step = Step(action="look", observation="o", reward=0.0, done=False)
    assert agent._without_loops(("look",), task, [step]) == ("look",)
    assert agent._without_loops(("look", "go"), task, [step]) == ("go",)
    other = Step(action="look", observation="p", reward=0.0, done=False)
    assert agent._without_loops(("look", "go"), task, [other]) == ("look", "go")


def test_repeat_limit_must_be_positive() -> None:
    agent = ReActAgent(ScriptedLLM(), domain="generic", constrained=True, repeat_limit=0)
    with pytest.raises(ConfigError, match="repeat_limit"):
        _play(agent, LineEnv())
