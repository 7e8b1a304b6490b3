"""Replaying tasks with candidate memories (the utility measurement of §3.3).

A *player* is ``play(env, task, memory_text) -> Episode``. Two are provided:

* :func:`agent_player`: the frozen task model (any agent with ``play(env, task,
  recall)``, e.g. :class:`~deltamem.agents.react.ReActAgent` on an LLM) reads the
  candidate as its recalled memory: the paper's protocol;
* :class:`FollowerPlayer`: a scripted proxy task model for cheap, deterministic data:
  it executes the steps written in the memory in order (each matched to the most
  similar admissible action by character similarity, accepted at ``match`` or above)
  and takes a seeded random admissible action whenever the memory has no usable step.
  Its utilities measure how *executable* a memory is, not how much an LLM gains from
  it; results built with it are labelled ``player=follower``.

:func:`candidate_trajectories` turns episodes into ``(key, role, prompt, candidates)``
rows for :func:`~.utility.build_pairs`: the copilot prompt of the episode and the JSON
answers of the rule copilot over an α grid × the four compositions (Eq. 1, 5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from deltamem.envs.base import Environment
from deltamem.memories.mcma.copilot import RuleCopilot, copilot_prompt
from deltamem.memories.mcma.hierarchy import char_similarity
from deltamem.memories.mcma.preprocess import preprocess
from deltamem.memories.mcma.structures import render_entry
from deltamem.memories.mcma.utility import Replay
from deltamem.seeding import check_random_state, sub_seed
from deltamem.types import Episode, Recall, Step, Task

__all__ = [
    "FollowerPlayer",
    "Player",
    "agent_player",
    "candidate_trajectories",
    "memory_steps",
    "replay",
]

Player = Callable[[Environment, Task, str], Episode]
_STEP = re.compile(r"^\s*(?:\d+\.|>)\s+(.+?)\s*$")


def memory_steps(text: str) -> list[str]:
    """The executable-looking steps of a rendered memory (numbered chain lines, ``> x``)."""
    return [m.group(1) for line in text.splitlines() if (m := _STEP.match(line))]


@dataclass
class FollowerPlayer:
    """The scripted proxy task model (see the module docstring)."""

    seed: int = 0
    match: float = 0.75
    max_steps: int | None = None

    def __call__(self, env: Environment, task: Task, memory_text: str) -> Episode:
        plan = memory_steps(memory_text)
        rng = check_random_state(sub_seed(self.seed, task.id))
        cap = self.max_steps or env.max_steps(task)
        steps: list[Step] = []
        success, score = False, 0.0
        while len(steps) < cap:
            admissible = env.admissible_actions()
            if not admissible:
                break
            action = None
            while plan and action is None:
                want = plan.pop(0)
                best = max(admissible, key=lambda a: (char_similarity(want, a), a))
                if char_similarity(want, best) >= self.match:
                    action = best
            if action is None:
                action = rng.choice(sorted(admissible))
            t = env.step(action)
            steps.append(Step(action, t.observation, reward=t.score - score, done=t.done,
                              valid=t.valid))
            success, score = t.success, t.score
            if t.done:
                break
        return Episode(task, tuple(steps), success=success, reward=score, max_steps=cap)


def agent_player(agent: Any, header: str = "Memory from earlier episodes:") -> Player:
    """The frozen task model as a player: ``agent.play(env, task, Recall(text=...))``."""

    def play(env: Environment, task: Task, memory_text: str) -> Episode:
        text = f"{header}\n{memory_text}" if memory_text else ""
        return agent.play(env, task, Recall(text=text))

    return play


def replay(env: Environment, task_id: str, memory_text: str, player: Player) -> Replay:
    """Reset ``task_id``, play it with ``memory_text`` shown; success and steps taken."""
    task = env.reset(task_id)
    ep = player(env, task, memory_text)
    return Replay(ep.success, len(ep.steps))


ALPHAS = (0.0, 0.5, 1.0)


def candidate_trajectories(episodes: Sequence[Episode], *, alphas: Sequence[float] = ALPHAS,
                           prompt_alpha: float = 0.5, compact: bool = True
                           ) -> list[tuple[str, str, str, list[str], list[str]]]:
    """``(key, role, prompt, candidate_json, candidate_text)`` per episode.

    The candidates are the rule copilot's entries over ``alphas`` × compositions, each as
    the JSON answer a copilot would give (``{"knowledge": [entry]}``) and as the text the
    task model is shown; duplicates are dropped. ``key`` is ``<episode id>``; the prompt
    is the copilot prompt at ``prompt_alpha`` (``compact``: the trained copilot's short
    prompt, which :class:`~.memory.MCMA` uses with ``copilot_model``).
    """
    out = []
    for ep in episodes:
        role = "success" if ep.success else "failure"
        tree = preprocess(ep)
        prompt = copilot_prompt(role, ep, tree, prompt_alpha, 1, compact=compact)
        answers: dict[str, str] = {}
        for a in alphas:
            for entry in RuleCopilot(role).abstract(ep, tree, a):
                js = json.dumps({"knowledge": [entry.model_dump(exclude_none=True)]})
                answers.setdefault(js, render_entry(entry))
        out.append((ep.id, role, prompt, list(answers), list(answers.values())))
    return out
