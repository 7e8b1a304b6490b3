"""OpenAI Agents SDK adapter: an agent with the SDK's scripted model plays two household
episodes; the second run's instructions hold what the first one taught. Offline: the model
is ``agents.testing.ScriptedModel`` and tracing is disabled."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from agents import Agent, RunConfig, function_tool, set_tracing_disabled
from deltamem import DeltaMem, Recall
from deltamem.embed import HashingEmbedder
from deltamem.integrations.openai_agents import MemoryHooks, run_with_memory

from .integration_game import Session, ToyKitchen

set_tracing_disabled(True)
OFFLINE = RunConfig(tracing_disabled=True)
INSTRUCTIONS = "You play household text games. Act with the `act` tool."


def scripted(session: Callable[[], Session], *, fail_at: int | None = None) -> ScriptedModel:
    """The SDK's scripted model; every call answers with the game's next action."""
    calls = iter(range(10_000))

    def respond(call: ModelCall) -> Any:
        n = next(calls)
        if fail_at is not None and n == fail_at:
            raise RuntimeError("model endpoint down")
        action = session().next_action()
        if action is None:
            return [assistant_message("Done.")]
        return [function_call("act", {"command": action}, call_id=f"call_{n}")]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(40)])


def player(session: Callable[[], Session], model: ScriptedModel) -> Agent[Any]:
    @function_tool
    def act(command: str) -> str:
        """Send one text command to the household game; returns what you observe."""
        return session().act(command)

    return Agent(name="player", instructions=INSTRUCTIONS, tools=[act], model=model)


def play_two(env: Any, ids: list[str], bank: DeltaMem
             ) -> tuple[list[ModelCall], list[Session], list[MemoryHooks]]:
    """Plays each task once; returns each run's first model call, session and hooks."""
    sessions: list[Session] = []
    current = lambda: sessions[-1]  # noqa: E731
    model = scripted(current)
    agent = player(current, model)
    firsts: list[ModelCall] = []
    hooks: list[MemoryHooks] = []

    async def go() -> None:
        for task_id in ids:
            sessions.append(Session.start(env, task_id))
            hooks.append(MemoryHooks(bank, current().task,
                                     outcome=lambda _: (current().won, None)))
            before = len(model.calls)
            await run_with_memory(agent, current().task.observation, memory=bank,
                                  task=current().task, hooks=hooks[-1], run_config=OFFLINE)
            firsts.append(model.calls[before])

    asyncio.run(go())
    return firsts, sessions, hooks


def check_second_run_holds_the_first_lesson(firsts: list[ModelCall],
                                            hooks: list[MemoryHooks]) -> None:
    first, second = (h.recorder for h in hooks)
    assert firsts[0].system_instructions == INSTRUCTIONS  # nothing learned yet
    assert first.recall.empty and first.changes is not None
    taught = {c.id for c in first.changes.written}
    recalled = {i.id for i in second.recall.items}
    assert taught and recalled and recalled <= taught  # the recall is episode 1's nodes
    assert firsts[1].system_instructions == f"{INSTRUCTIONS}\n\n{second.recall.text}"


@pytest.fixture
def bank() -> DeltaMem:
    return DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")


def test_second_run_instructions_hold_what_the_first_taught(bank: DeltaMem) -> None:
    firsts, sessions, hooks = play_two(ToyKitchen(), ["k1", "k2"], bank)
    assert all(s.won for s in sessions)
    check_second_run_holds_the_first_lesson(firsts, hooks)
    assert "clean {A} with sinkbasin" in hooks[1].recall.text
    assert bank.stats()["episodes_learned"] == 2
    (root,) = [n for n in bank.nodes("task") if n.kind == "ROOT"]
    assert "take {A} from countertop" in root.payload.procedure  # steps = the tool calls


def test_a_failing_run_is_learned_as_failure_and_reraised(bank: DeltaMem) -> None:
    sessions = [Session.start(ToyKitchen(), "k1")]
    agent = player(lambda: sessions[-1], scripted(lambda: sessions[-1], fail_at=3))
    hooks = MemoryHooks(bank, sessions[0].task, outcome=lambda _: (sessions[0].won, None))

    async def go() -> None:
        await run_with_memory(agent, "play", memory=bank, task=sessions[0].task, hooks=hooks,
                              run_config=OFFLINE)

    with pytest.raises(RuntimeError, match="model endpoint down"):
        asyncio.run(go())
    assert len(hooks.recorder.steps) == 3 and hooks.recorder.episode is not None
    assert hooks.recorder.episode.success is False
    assert bank.stats()["label"]["task"] == {"FAILURE": 1}


def test_bare_hooks_with_dynamic_instructions_learn_on_agent_end(bank: DeltaMem) -> None:
    from agents import Runner

    env = ToyKitchen()
    sessions: list[Session] = []
    model = scripted(lambda: sessions[-1])

    async def episode(task_id: str) -> MemoryHooks:
        sessions.append(Session.start(env, task_id))
        s = sessions[-1]
        hooks = MemoryHooks(bank, s.task)

        @function_tool
        def act(command: str) -> str:
            """Send one command to the game."""
            out = s.act(command)
            if s.done:
                hooks.recorder.finish(s.won)  # the tool saw the game end
            return out

        agent = Agent(name="p", instructions=hooks.instructions(INSTRUCTIONS), tools=[act],
                      model=model)
        await Runner.run(agent, "play", hooks=hooks, run_config=OFFLINE)
        return hooks

    first = asyncio.run(episode("k1"))
    calls_of_first = len(model.calls)
    second = asyncio.run(episode("k2"))
    assert first.recorder.closed and first.recorder.episode.success  # type: ignore[union-attr]
    assert model.calls[0].system_instructions == INSTRUCTIONS
    assert second.recall.text and model.calls[calls_of_first].system_instructions == (
        f"{INSTRUCTIONS}\n\n{second.recall.text}")
    assert second.recorder.closed and bank.stats()["episodes_learned"] == 2


def test_run_config_keeps_an_existing_filter(bank: DeltaMem) -> None:
    from agents.run_config import ModelInputData

    seen: list[str | None] = []

    def mine(data: Any) -> ModelInputData:
        seen.append(data.model_data.instructions)
        return ModelInputData(input=data.model_data.input, instructions="base")

    sessions = [Session.start(ToyKitchen(), "k1")]
    hooks = MemoryHooks(bank, sessions[0].task)
    hooks.recorder.start()
    hooks.recorder.recall = Recall(text="MEMORY")
    config = hooks.run_config(RunConfig(tracing_disabled=True, call_model_input_filter=mine))

    from agents.run_config import CallModelData

    out = asyncio.run(config.call_model_input_filter(  # type: ignore[misc]
        CallModelData(model_data=ModelInputData(input=[], instructions="x"), agent=None,
                      context=None)))
    assert seen == ["x"] and out.instructions == "base\n\nMEMORY"


@pytest.mark.envs
def test_household_env_two_runs(bank: DeltaMem, tmp_path: Path) -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=tmp_path, n=12) as env:
        kind = "pick_clean_then_place_in_recep"
        firsts, sessions, hooks = play_two(env, [f"seen/{kind}/0-0", f"seen/{kind}/0-1"], bank)
    assert all(s.won for s in sessions)
    check_second_run_holds_the_first_lesson(firsts, hooks)
    # episode 1's object and where it lay: knowledge read from its observations
    taken = next(a for a in sessions[0].actions if a.startswith("take "))
    thing, place = re.fullmatch(r"take (\w+) \d+ from (\w+) \d+", taken).groups()  # type: ignore[union-attr]
    assert f"{thing}: found in/on {place}" in hooks[1].recall.text


def test_with_a_judge_a_run_without_outcome_learns_the_verdict(bank: DeltaMem) -> None:
    """No outcome given: the hooks' judge decides, on the memory's async calls."""
    from deltamem.judge import ScriptedJudge

    sessions = [Session.start(ToyKitchen(), "k1")]
    agent = player(lambda: sessions[-1], scripted(lambda: sessions[-1]))
    hooks = MemoryHooks(bank, sessions[0].task, judge=ScriptedJudge())
    asyncio.run(run_with_memory(agent, "play", memory=bank, task=sessions[0].task, hooks=hooks,
                                run_config=OFFLINE))
    rec = hooks.recorder
    assert sessions[0].won and rec.verdict is not None and rec.verdict.decided
    assert rec.episode is not None and rec.episode.success is True
    assert bank.stats()["episodes_learned"] == 1
