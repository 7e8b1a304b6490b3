"""LangGraph adapter: a graph with a fake chat model plays two household episodes; the second
one's prompt holds what the first one taught."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

pytest.importorskip("langgraph")

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from deltamem import DeltaMem, Task
from deltamem.embed import HashingEmbedder
from deltamem.integrations.langgraph import GraphMemory, tool_action
from deltamem.recorder import EpisodeRecorder

from .integration_game import Session, ToyKitchen


class PolicyChatModel(BaseChatModel):
    """A fake chat model: records every prompt, answers with ``policy(prompt)``."""

    policy: Any
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.policy(messages))])

    @property
    def _llm_type(self) -> str:
        return "deltamem-test-policy"


def build(memory: GraphMemory, session: Callable[[], Session], model: PolicyChatModel) -> Any:
    """START → recall → agent ⇄ tools; agent → learn → END (when it stops calling tools)."""

    @tool
    def act(command: str) -> str:
        """Send one text command to the household game; returns what you observe."""
        return session().act(command)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([act]))
    memory.wire(builder, entry="agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "learn"})
    builder.add_edge("tools", "agent")
    return builder.compile()


def policy_of(session: Callable[[], Session]) -> Callable[[list[BaseMessage]], AIMessage]:
    counter = iter(range(10_000))

    def policy(messages: list[BaseMessage]) -> AIMessage:
        action = session().next_action()
        if action is None:
            return AIMessage(content="Done.")
        return AIMessage(content="", tool_calls=[
            {"name": "act", "args": {"command": action}, "id": f"call_{next(counter)}"}])

    return policy


def play_two(env: Any, ids: list[str], bank: DeltaMem, system: str | None = None
             ) -> tuple[list[list[BaseMessage]], list[Session], list[EpisodeRecorder]]:
    """Plays each task once through the graph; returns each episode's first prompt, its
    session and its recorder (what was recalled for it, what it changed)."""
    sessions: list[Session] = []
    learned: list[EpisodeRecorder] = []
    current = lambda: sessions[-1]  # noqa: E731
    memory = GraphMemory(bank, task=lambda state: current().task,
                         outcome=lambda state: (current().won, None), on_learned=learned.append)
    model = PolicyChatModel(policy=policy_of(current), prompts=[])
    graph = build(memory, current, model)
    firsts: list[list[BaseMessage]] = []
    for i, task_id in enumerate(ids):
        sessions.append(Session.start(env, task_id))
        before = len(model.prompts)
        opening = [("system", system)] if system else []
        memory.invoke(graph, {"messages": [*opening, ("user", current().task.observation)]},
                      {"configurable": {"thread_id": f"episode-{i}"}})
        firsts.append(model.prompts[before])
    return firsts, sessions, learned


def check_second_prompt_holds_the_first_lesson(firsts: list[list[BaseMessage]],
                                               learned: list[EpisodeRecorder]) -> None:
    first, second = learned
    assert "Memory recalled" not in prompt_text(firsts[0])  # nothing learned yet
    assert first.recall.empty and first.changes is not None
    taught = {c.id for c in first.changes.written}
    recalled = {i.id for i in second.recall.items}
    assert taught and recalled and recalled <= taught  # the recall is episode 1's nodes
    assert second.recall.text in prompt_text(firsts[1])
    head = firsts[1][0]
    assert isinstance(head, SystemMessage) and second.recall.text in str(head.content)


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


@pytest.fixture
def bank() -> DeltaMem:
    return DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")


def test_second_episode_prompt_holds_what_the_first_taught(bank: DeltaMem) -> None:
    firsts, sessions, learned = play_two(ToyKitchen(), ["k1", "k2"], bank)
    assert all(s.won for s in sessions) and len(learned) == 2
    check_second_prompt_holds_the_first_lesson(firsts, learned)
    # what episode 1 taught, abstracted from its actions and observations
    assert "clean {A} with sinkbasin" in learned[1].recall.text
    assert "countertop 1" not in learned[1].recall.text
    assert firsts[1][0].content == learned[1].recall.text  # no system prompt: memory leads
    assert bank.stats()["episodes_learned"] == 2
    (node,) = [n for n in bank.nodes("task") if n.kind == "ROOT"]
    assert "take {A} from countertop" in node.payload.procedure  # steps = the tool calls


def test_memory_merges_into_an_existing_system_prompt(bank: DeltaMem) -> None:
    firsts, _, _ = play_two(ToyKitchen(), ["k1", "k2"], bank, system="You play household games.")
    head = firsts[1][0]
    assert isinstance(head, SystemMessage)
    assert head.content.startswith("You play household games.\n\nMemory recalled")
    assert sum(isinstance(m, SystemMessage) for m in firsts[1]) == 1


def test_a_crash_inside_the_graph_is_learned_as_a_failure_and_reraised(bank: DeltaMem) -> None:
    env = ToyKitchen()
    sessions = [Session.start(env, "k1")]
    calls = iter(range(100))

    def flaky(messages: list[BaseMessage]) -> AIMessage:
        if next(calls) == 2:
            raise RuntimeError("model endpoint down")
        return policy_of(lambda: sessions[-1])(messages)

    memory = GraphMemory(bank, task=lambda s: sessions[-1].task)
    graph = build(memory, lambda: sessions[-1], PolicyChatModel(policy=flaky, prompts=[]))
    with pytest.raises(RuntimeError, match="model endpoint down"):
        memory.invoke(graph, {"messages": [("user", "play")]},
                      {"configurable": {"thread_id": "t"}})
    assert memory.episode({"configurable": {"thread_id": "t"}}) is None
    assert bank.stats()["episodes_learned"] == 1
    assert bank.stats()["label"]["task"] == {"FAILURE": 1}


def test_tool_action_text_and_default_task(bank: DeltaMem) -> None:
    assert tool_action("act", {"command": "go to fridge 1"}) == "go to fridge 1"
    assert tool_action("search", {"q": "x", "n": 3}) == 'search(q="x", n=3)'
    assert tool_action("noop", {}) == "noop()"
    from deltamem.integrations.langgraph import task_from_state

    assert task_from_state({"messages": [("user", "x")], "task": {"goal": "g"}}).goal == "g"
    t = Task(id="a", goal="water the plant")
    assert task_from_state({"task": t}) is t


@pytest.mark.envs
def test_household_env_two_episodes(bank: DeltaMem, tmp_path: Path) -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=tmp_path, n=12) as env:
        kind = "pick_clean_then_place_in_recep"
        ids = [f"seen/{kind}/0-0", f"seen/{kind}/0-1"]
        firsts, sessions, learned = play_two(env, ids, bank)
    assert all(s.won for s in sessions)
    check_second_prompt_holds_the_first_lesson(firsts, learned)
    # episode 1's object and where it lay: knowledge read from its observations
    taken = next(a for a in sessions[0].actions if a.startswith("take "))
    thing, place = re.fullmatch(r"take (\w+) \d+ from (\w+) \d+", taken).groups()  # type: ignore[union-attr]
    assert f"{thing}: found in/on {place}" in learned[1].recall.text


def test_with_a_judge_an_episode_without_outcome_learns_the_verdict(bank: DeltaMem) -> None:
    """No outcome from the state: the scripted judge reads the trajectory and decides."""
    from deltamem.judge import ScriptedJudge

    sessions: list[Session] = []
    learned: list[EpisodeRecorder] = []
    current = lambda: sessions[-1]  # noqa: E731
    memory = GraphMemory(bank, task=lambda state: current().task, outcome=lambda state: None,
                         on_learned=learned.append, judge=ScriptedJudge())
    graph = build(memory, current, PolicyChatModel(policy=policy_of(current), prompts=[]))
    sessions.append(Session.start(ToyKitchen(), "k1"))
    memory.invoke(graph, {"messages": [("user", current().task.observation)]},
                  {"configurable": {"thread_id": "judged"}})
    (rec,) = learned
    assert sessions[0].won and rec.verdict is not None and rec.verdict.judge == "scripted"
    assert rec.episode is not None and rec.episode.success is True
    assert rec.verdict.decided  # the toy game's last observation states the outcome
