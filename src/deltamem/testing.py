"""Fakes and conformance checks that ship with the library.

* :class:`ScriptedLLM`, :class:`~deltamem.embed.HashingEmbedder` and
  :class:`~deltamem.embed.TableEmbedder` (exact vectors per text), re-exported for
  deterministic tests;
* :func:`make_episode` builds small episodes;
* :func:`check_memory` runs the memory contract on any :class:`Memory` (with ``bank=``,
  also that its bank reopens as the same system through the registry); a new memory
  system is "in" when it passes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from deltamem.embed.hashing import HashingEmbedder
from deltamem.embed.table import TableEmbedder
from deltamem.envs.base import Environment
from deltamem.errors import DeltaMemError, InvalidInputError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memory import Memory
from deltamem.types import Changes, Episode, Recall, Step, Task

__all__ = [
    "HashingEmbedder",
    "ScriptedLLM",
    "TableEmbedder",
    "check_environment",
    "check_memory",
    "make_episode",
]


def make_episode(
    goal: str = "put a clean apple in fridge",
    *,
    scene: str = "You are in the middle of a room. Looking quickly around you, you see a "
    "countertop 1, a fridge 1 and a sinkbasin 1.",
    actions: Sequence[tuple[str, str]] = (
        ("go to countertop 1", "On the countertop 1, you see a apple 1, and a knife 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
        ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
        ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
        ("go to fridge 1", "The fridge 1 is closed."),
        ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1."),
        ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
    ),
    success: bool = True,
    reward: float | None = None,
    domain: str = "alfworld",
    task_id: str = "task-0",
    episode_id: str | None = None,
) -> Episode:
    """A small household-style episode (defaults: a successful clean-and-place task)."""
    task = Task(
        id=task_id,
        goal=goal,
        scene=scene,
        domain=domain,
        split="test",
        observation=scene + "\nYour task is to: " + goal,
        max_steps=30,
    )
    steps = tuple(Step(action=a, observation=o) for a, o in actions)
    kwargs = {} if episode_id is None else {"id": episode_id}
    return Episode(
        task,
        steps,
        success=success,
        reward=(1.0 if success else 0.0) if reward is None else reward,
        max_steps=30,
        **kwargs,
    )


def check_memory(
    memory: Memory, *, task: Task | None = None, bank: str | Path | None = None
) -> None:
    """Run the :class:`~deltamem.memory.Memory` contract on ``memory``.

    Checks: recall returns a Recall and does not change stats; learn returns
    Changes; learn rejects malformed episodes (empty trajectory, NaN reward)
    with InvalidInputError and changes nothing; stats is JSON-like; observe is
    callable. Raises AssertionError naming the broken rule. ``memory`` is
    written to: pass a throwaway instance.

    ``bank``: where ``memory`` keeps its bank. Then ``memory`` is closed at the end and the
    bank reopened with :func:`deltamem.memories.open_bank`: it must open as the same
    system (same class) holding the same (same ``stats()``); a system registered without a
    bank class must leave no file there.
    """
    ep = make_episode()
    task = task or ep.task
    before = json.dumps(memory.stats(), sort_keys=True, default=str)
    r = memory.recall(task)
    assert isinstance(r, Recall), "recall must return a Recall"
    assert json.dumps(memory.stats(), sort_keys=True, default=str) == before, (
        "recall must not change what is stored"
    )
    json.dumps(r.to_dict())  # details must be serialisable
    for bad in (
        Episode(task, (), success=True, reward=1.0),
        Episode(task, ep.steps, success=True, reward=math.nan),
    ):
        try:
            memory.learn(bad, r)
        except InvalidInputError:
            pass
        else:
            raise AssertionError("learn must reject a malformed episode with InvalidInputError")
        assert json.dumps(memory.stats(), sort_keys=True, default=str) == before, (
            "a rejected learn must leave the memory unchanged"
        )
    changes = memory.learn(ep, r)
    assert isinstance(changes, Changes), "learn must return Changes"
    assert memory.observe(ep.steps[0]) is None or isinstance(memory.observe(ep.steps[0]), Recall)
    r2 = memory.recall(task)
    assert isinstance(r2, Recall)
    try:
        json.dumps(memory.stats())
    except TypeError as e:  # pragma: no cover - message path
        raise AssertionError(f"stats must be JSON-serialisable: {e}") from e
    if bank is not None:
        _check_reopen(memory, bank)


def _check_reopen(memory: Memory, bank: str | Path) -> None:
    """``memory``'s bank reopens through the registry as the same system, same content."""
    from deltamem.memories import memory_spec, open_bank
    from deltamem.store.factory import is_url

    stats = json.dumps(memory.stats(), sort_keys=True, default=str)
    memory.close()
    try:
        keeps_bank = memory_spec(memory.name).bank is not None
    except DeltaMemError:  # not registered under its own name: open_bank says what it is
        keeps_bank = True
    if not keeps_bank:
        assert is_url(bank) or not Path(bank).exists(), (
            f"memory system {memory.name!r} is registered without a bank class but wrote "
            f"{bank}: register its bank class (register_memory(..., bank=...))"
        )
        return
    try:
        again = open_bank(bank)
    except DeltaMemError as e:
        raise AssertionError(
            f"the bank of memory system {memory.name!r} must reopen with open_bank: {e}"
        ) from e
    try:
        assert type(again) is type(memory), (
            f"a {type(memory).__name__} bank reopened as {type(again).__name__}"
        )
        assert json.dumps(again.stats(), sort_keys=True, default=str) == stats, (
            "a reopened bank must hold what was stored (its stats differ)"
        )
    finally:
        again.close()


def check_environment(env: Environment, split: str, *, steps: int = 5, seed: int = 0) -> None:
    """Run the :class:`~deltamem.envs.base.Environment` contract on ``env``.

    Checks: ``task_ids`` is deterministic and non-empty for ``split``; ``reset``
    returns a :class:`Task` with a goal, a known domain and the split; admissible
    actions are strings; ``step`` returns a :class:`Transition` whose score is in
    [0, 1] and whose ``success`` implies ``done``. Plays up to ``steps`` steps of
    the first admissible action. Raises AssertionError naming the broken rule.
    """
    from deltamem.domains import DOMAINS
    from deltamem.envs.base import Transition

    ids = env.task_ids(split, seed=seed)
    assert ids, f"task_ids({split!r}) is empty"
    assert ids == env.task_ids(split, seed=seed), "task_ids must be deterministic"
    task = env.reset(ids[0])
    assert isinstance(task, Task), "reset must return a Task"
    assert task.goal.strip(), "the task needs a goal"
    assert task.domain in DOMAINS, f"unknown domain {task.domain!r}"
    assert env.max_steps(task) >= 1, "max_steps must be positive"
    for _ in range(steps):
        actions = env.admissible_actions()
        assert all(isinstance(a, str) for a in actions), "admissible actions must be strings"
        t = env.step(actions[0] if actions else "look")
        assert isinstance(t, Transition), "step must return a Transition"
        assert 0.0 <= t.score <= 1.0, f"score {t.score} outside [0, 1]"
        assert not t.success or t.done, "success implies done"
        if t.done:
            break
