"""A tiny household game (ALFWorld-style text) and a session the agents' tools play it through.

Deterministic and instant: the framework tests run it without textworld/alfworld; the
``envs`` tests play :class:`deltamem.envs.household.HouseholdEnv` through the same session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deltamem.envs.base import Environment, Transition
from deltamem.types import Task

GOAL = "put a clean apple in fridge"


@dataclass
class _Kitchen:
    apple_at: str
    location: str = "middle"
    holding: bool = False
    clean: bool = False
    placed: bool = False


class ToyKitchen(Environment):
    """Two kitchens: the apple lies on countertop 1 (task ``k1``) or countertop 2 (``k2``)."""

    name = "toy-kitchen"
    domain = "alfworld"
    splits = ("seen",)
    PLACES = ("cabinet 1", "countertop 1", "countertop 2", "fridge 1", "sinkbasin 1")

    def __init__(self) -> None:
        self.state: _Kitchen | None = None
        self.task: Task | None = None

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return ["k1", "k2"]

    def reset(self, task_id: str) -> Task:
        self.state = _Kitchen(apple_at="countertop 1" if task_id == "k1" else "countertop 2")
        scene = ("You are in the middle of a kitchen. Looking quickly around you, you see "
                 + ", ".join(f"a {p}" for p in self.PLACES) + ".")
        self.task = Task(id=task_id, goal=GOAL, scene=scene, domain="alfworld", split="seen",
                         observation=f"{scene}\n\nYour task is to: {GOAL}.", max_steps=12)
        return self.task

    def solution(self) -> list[str]:
        assert self.state is not None
        where = self.state.apple_at
        return [f"go to {where}", f"take apple 1 from {where}", "go to sinkbasin 1",
                "clean apple 1 with sinkbasin 1", "go to fridge 1", "open fridge 1",
                "move apple 1 to fridge 1"]

    def admissible_actions(self) -> list[str]:
        return [f"go to {p}" for p in self.PLACES]

    def step(self, action: str) -> Transition:
        s = self.state
        assert s is not None
        a = action.strip()
        obs = "Nothing happens."
        if a.startswith("go to ") and a[6:] in self.PLACES:
            s.location = a[6:]
            there = "a apple 1" if s.location == s.apple_at and not s.holding else "nothing"
            obs = f"You arrive at {s.location}. On the {s.location}, you see {there}."
            if s.location == "fridge 1":
                obs = "You arrive at fridge 1. The fridge 1 is closed."
        elif a == f"take apple 1 from {s.apple_at}" and s.location == s.apple_at:
            s.holding, obs = True, "You pick up the apple 1 from the " + s.apple_at + "."
        elif a == "clean apple 1 with sinkbasin 1" and s.holding and s.location == "sinkbasin 1":
            s.clean, obs = True, "You clean the apple 1 using the sinkbasin 1."
        elif a == "open fridge 1" and s.location == "fridge 1":
            obs = "You open the fridge 1. The fridge 1 is open. In it, you see nothing."
        elif a == "move apple 1 to fridge 1" and s.holding and s.location == "fridge 1":
            s.holding, s.placed, obs = False, True, "You move the apple 1 to the fridge 1."
        won = s.placed and s.clean
        return Transition(observation=obs, score=1.0 if won else 0.0, done=won, success=won,
                          valid=obs != "Nothing happens.")


@dataclass
class Session:
    """One episode being played: the tools call :meth:`act`; the scripted models read
    :meth:`next_action` (the game's own solution, one action per model call)."""

    env: Environment
    task: Task
    plan: list[str]
    actions: list[str] = field(default_factory=list)
    done: bool = False
    won: bool = False

    @classmethod
    def start(cls, env: Environment, task_id: str) -> Session:
        task = env.reset(task_id)
        plan = env.solution()  # type: ignore[attr-defined]
        assert plan, f"no solution for {task_id}"
        return cls(env, task, list(plan))

    def act(self, command: str) -> str:
        if self.done:
            return "The episode is over."
        t = self.env.step(command)
        self.actions.append(command)
        self.done, self.won = t.done, t.success
        return t.observation

    def next_action(self) -> str | None:
        """The next action of the plan, or ``None`` when the game is over."""
        if self.done or len(self.actions) >= len(self.plan):
            return None
        return self.plan[len(self.actions)]
