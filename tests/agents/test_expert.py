"""The demonstration policy: wins with the solution, noise reproducible by seed, re-plans."""

from __future__ import annotations

import pytest

from deltamem.agents.expert import ExpertAgent, expert_budget, parse_expert_spec
from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError
from deltamem.types import Recall, Task, Usage


class KeyRoom(Environment):
    """Take the key from the shelf, open the door, leave. Moving around the room is allowed
    (``go shelf``/``go door``/``go window``); ``take key`` only at the shelf, ``open door``
    only at the door holding the key, ``leave`` only through the open door."""

    name = "keyroom"
    domain = "generic"
    splits = ("train", "test")

    def __init__(self, planner: bool = True, with_solution: bool = True) -> None:
        self.planner = planner
        self.with_solution = with_solution
        self.replans = 0

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return [f"{split}-{i}" for i in range(10)]

    def reset(self, task_id: str) -> Task:
        self.at, self.key, self.open, self.out, self.n = "window", False, False, False, 0
        return Task(id=task_id, goal="leave the room", domain="generic",
                    observation="You are at the window.", max_steps=12)

    def admissible_actions(self) -> list[str]:
        acts = [f"go {p}" for p in ("shelf", "door", "window") if p != self.at]
        if self.at == "shelf" and not self.key:
            acts.append("take key")
        if self.at == "door" and self.key and not self.open:
            acts.append("open door")
        if self.at == "door" and self.open:
            acts.append("leave")
        return [*acts, "look"]

    def step(self, action: str) -> Transition:
        self.n += 1
        valid = action in self.admissible_actions()
        if valid:
            if action.startswith("go "):
                self.at = action[3:]
            elif action == "take key":
                self.key = True
            elif action == "open door":
                self.open = True
            elif action == "leave":
                self.out = True
        score = (self.key + self.open + self.out) / 3
        done = self.out or self.n >= 12
        return Transition(f"You are at the {self.at}.", score, done, self.out, valid)

    def _plan(self) -> list[str]:
        plan: list[str] = []
        at = self.at
        if not self.key:
            plan += ([] if at == "shelf" else ["go shelf"]) + ["take key"]
            at = "shelf"
        if not self.open:
            plan += ([] if at == "door" else ["go door"]) + ["open door"]
            at = "door"
        return plan + ([] if at == "door" else ["go door"]) + ["leave"]

    def solution(self) -> list[str] | None:
        return self._plan() if self.with_solution else None

    def replan(self) -> list[str] | None:
        if not self.planner:
            return None
        self.replans += 1
        return self._plan()


def _play(env: Environment, agent: ExpertAgent, task_id: str = "train-0"):
    task = env.reset(task_id)
    return agent.play(env, task, Recall(text=""))


def test_noise_free_expert_plays_the_solution_and_wins() -> None:
    env = KeyRoom()
    ep = _play(env, ExpertAgent())
    assert ep.success and ep.reward == 1.0
    assert [s.action for s in ep.steps] == ["go shelf", "take key", "go door", "open door",
                                            "leave"]
    assert all(s.thought == "demonstration" for s in ep.steps)
    assert ep.usage.to_dict() == Usage().to_dict()  # no LLM call
    assert env.replans == 0


@pytest.mark.parametrize("planner", [True, False])
def test_noise_is_reproducible_by_seed_and_task(planner: bool) -> None:
    def actions(seed: int, task_id: str) -> list[str]:
        ep = _play(KeyRoom(planner=planner), ExpertAgent(noise=0.4, seed=seed), task_id)
        return [s.action for s in ep.steps]

    assert actions(3, "train-1") == actions(3, "train-1")
    streams = {tuple(actions(seed, "train-1")) for seed in range(8)}
    assert len(streams) > 1  # the seed matters
    noisy = [s for seed in range(8)
             for s in _play(KeyRoom(planner=planner), ExpertAgent(noise=0.4, seed=seed)).steps
             if s.thought.endswith("random action")]
    assert noisy  # some actions were replaced


def test_noise_one_never_plays_the_planned_action_where_there_is_another() -> None:
    ep = _play(KeyRoom(), ExpertAgent(noise=1.0, seed=0))
    assert not ep.success
    assert all(s.thought == "demonstration: random action" for s in ep.steps)


def test_replanning_gets_back_on_track() -> None:
    wins = {True: 0, False: 0}
    for planner in (True, False):
        for seed in range(30):
            env = KeyRoom(planner=planner)
            ep = _play(env, ExpertAgent(noise=0.3, seed=seed))
            wins[planner] += ep.success
            if planner and any(s.thought.endswith("random action") for s in ep.steps):
                assert env.replans > 0
    assert wins[True] >= 20  # re-planning recovers from most random actions
    assert wins[True] >= wins[False]


def test_a_noisy_stream_holds_successes_and_failures() -> None:
    outcomes = {_play(KeyRoom(), ExpertAgent(noise=0.5, seed=s)).success for s in range(20)}
    assert outcomes == {True, False}


def test_without_a_solution_the_expert_refuses() -> None:
    with pytest.raises(ConfigError, match="knows no solution"):
        _play(KeyRoom(with_solution=False), ExpertAgent())


def test_step_cap_is_honoured() -> None:
    ep = _play(KeyRoom(), ExpertAgent(max_steps=2))
    assert len(ep.steps) == 2 and not ep.success


@pytest.mark.parametrize(("spec", "noise", "budget"),
                         [("expert", 0.0, None), ("expert:noise=0.25", 0.25, None),
                          ("react", None, None), ("expert:noise=1", 1.0, None),
                          ("expert:noise=0.5,budget=12", 0.5, 12)])
def test_parse_expert_spec(spec: str, noise: float | None, budget: int | None) -> None:
    assert parse_expert_spec(spec) == noise
    assert expert_budget(spec) == budget


@pytest.mark.parametrize("spec", ["expert:noise=2", "expert:noise=x", "expert:p=0.1", "expertx",
                                  "expert:noise=0.1,budget=0", "expert:budget=3"])
def test_bad_expert_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_expert_spec(spec)
    with pytest.raises(ConfigError):
        ExpertAgent(noise=1.5)
