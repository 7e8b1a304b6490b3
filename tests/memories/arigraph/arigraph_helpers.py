"""A tiny map game for AriGraph tests (no TextWorld needed) and scripted-LLM helpers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from deltamem.envs.base import Environment, Transition
from deltamem.types import Task

#: room -> (exits {direction: room}, items)
MAP: dict[str, tuple[dict[str, str], list[str]]] = {
    "hall": ({"east": "kitchen"}, []),
    "kitchen": ({"west": "hall", "east": "garden", "north": "attic"}, ["knife"]),
    "garden": ({"west": "kitchen"}, ["golden key"]),
    "attic": ({"south": "kitchen"}, []),
}


class MapEnv(Environment):
    """Walk the map and take the golden key (score 1, won)."""

    name = "map"
    domain = "textworld"
    splits = ("seen",)

    def __init__(self, start: str = "hall", max_steps: int = 20) -> None:
        self.start = start
        self.cap = max_steps
        self.here = start
        self.inventory: list[str] = []
        self.items = {r: list(v[1]) for r, v in MAP.items()}
        self.actions: list[str] = []

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return ["map-0", "map-1"]

    def describe(self) -> str:
        exits, _ = MAP[self.here]
        things = self.items[self.here]
        parts = [f"-= {self.here.title()} =-", f"You are in a {self.here}."]
        if things:
            parts.append("You see " + " and ".join(f"a {t}" for t in things) + ".")
        parts.append(" ".join(f"There is an exit to the {d}." for d in sorted(exits)))
        return "\n".join(parts)

    def reset(self, task_id: str) -> Task:
        self.here = self.start
        self.inventory = []
        self.items = {r: list(v[1]) for r, v in MAP.items()}
        self.actions = []
        return Task(id=task_id, goal="Find the golden key and take it.", domain="textworld",
                    split="seen", observation=self.describe(), max_steps=self.cap)

    def admissible_actions(self) -> list[str]:
        exits, _ = MAP[self.here]
        return [f"go {d}" for d in sorted(exits)] + [f"take {t}" for t in self.items[self.here]]

    def step(self, action: str) -> Transition:
        self.actions.append(action)
        valid = action in self.admissible_actions()
        if valid and action.startswith("go "):
            self.here = MAP[self.here][0][action[3:]]
            obs = self.describe()
        elif valid and action.startswith("take "):
            item = action[5:]
            self.items[self.here].remove(item)
            self.inventory.append(item)
            obs = f"You take the {item}."
        else:
            obs = "You can't do that."
        won = "golden key" in self.inventory
        done = won or len(self.actions) >= self.cap
        return Transition(obs, 1.0 if won else 0.0, done, won, valid)


def plan_json(*sub_goals: str) -> str:
    return json.dumps({"main_goal": "take the golden key",
                       "plan_steps": [{"sub_goal": g, "reason": "needed"} for g in sub_goals]})


def act_json(action: str) -> str:
    return json.dumps({"reason_for_action": "it helps", "action_to_take": action})


class Responder:
    """Scripted answers by purpose: plans, a queue of actions, empty extraction."""

    def __init__(self, actions: Sequence[str], plan: Sequence[str] = ("find the golden key",),
                 extract: Mapping[str, Any] | None = None) -> None:
        self.actions = list(actions)
        self.plan = list(plan)
        self.extract = extract or {"triplets": []}
        self.prompts: dict[str, list[str]] = {}

    def __call__(self, messages, purpose, choices):  # type: ignore[no-untyped-def]
        self.prompts.setdefault(purpose, []).append(messages[-1]["content"])
        if purpose == "plan":
            return plan_json(*self.plan)
        if purpose == "act":
            return act_json(self.actions.pop(0) if self.actions else "look")
        if purpose == "extract":
            if "EXISTING facts" in messages[-1]["content"]:
                return {"replace": []}
            return dict(self.extract)
        if purpose == "reflect":
            return {"reflection": "Look in the garden next time."}
        if purpose == "summarize":
            return {"summary": "I walked around."}
        if purpose == "importance":
            return {"importance": 5}
        raise AssertionError(f"unexpected purpose {purpose}")
