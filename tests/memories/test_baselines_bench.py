"""The baselines run end to end through the benchmark runner (online protocol)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.bench import RunConfig, read_episodes, run
from deltamem.envs.base import Environment, Transition
from deltamem.llm import ScriptedLLM
from deltamem.types import Task

from .baseline_helpers import SYSTEMS, H, good_answer


class DoorEnv(Environment):
    """Task ``<split>-<i>``: open the door on the east (even i) or west (odd i) side."""

    name = "doors"
    domain = "generic"
    splits = ("test",)

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return [f"{split}-{i}" for i in range(6)]

    def reset(self, task_id: str) -> Task:
        self.east = int(task_id.rsplit("-", 1)[1]) % 2 == 0
        side = "east" if self.east else "west"
        return Task(id=task_id, goal=f"open the {side} door", domain="generic", split="test",
                    scene="a hall with an east door and a west door",
                    observation="You are in a hall with an east door and a west door.",
                    max_steps=3, meta={"task_type": side})

    def admissible_actions(self) -> list[str]:
        return ["open east door", "open west door", "look"]

    def step(self, action: str) -> Transition:
        if action == "look":
            return Transition("Two doors.", 0.0, False, False)
        won = action == ("open east door" if self.east else "open west door")
        return Transition("The door opens." if won else "It is locked.", float(won), won, won)


def actor(messages, purpose, choices):
    if purpose == "act":
        return "Thought: try the east door.\nAction: open east door"
    return good_answer(messages, purpose, choices)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("extractor", ["structural", "llm"])
def test_online_run(system, extractor, tmp_path: Path):
    config = RunConfig(run_dir=tmp_path / "run", env="doors", split="test", llm="scripted",
                       memory=system, episodes=6, extractor=extractor)
    llm = ScriptedLLM(responder=actor)
    run(config, env=DoorEnv(), llm=llm, embedder=H, progress=False)
    records = read_episodes(tmp_path / "run" / "episodes.jsonl")
    assert len(records) == 6
    assert [r["success"] for r in records] == [True, False] * 3
    last = records[-1]["bank"]
    assert last["system"] == system and last["episodes_learned"] == 6
    assert last["mode"] == ("llm" if extractor == "llm" else "deterministic")
    assert last["units"] > 0
    assert records[0]["recall"]["chars"] == 0  # cold start
    assert records[2]["recall"]["chars"] > 0  # learned from the first episode
    purposes = set(llm.usage.by_purpose)
    if extractor == "llm" and system not in ("synapse", "long-context"):  # never ask the LLM
        assert "extract" in purposes
    else:
        assert purposes == {"act"}
