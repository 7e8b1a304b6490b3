"""Recall quality without an LLM: warm rate, precision@1, score distributions, auto τ."""

from __future__ import annotations

import json

import pytest

from deltamem.analysis.recall_eval import (
    best_f1_tau,
    build_bank,
    collect_episodes,
    collect_tasks,
    evaluate_recall,
    write_report,
)
from deltamem.embed import HashingEmbedder
from deltamem.envs.base import Environment, Transition
from deltamem.errors import ConfigError
from deltamem.types import Task

GOALS = {
    "heat": "heat some {o} and put it in {p}",
    "clean": "clean some {o} and put it in {p}",
    "look": "look at {o} under the desklamp",
}
OBJECTS = ("apple", "mug", "book", "egg", "pen", "cup")
ROOMS = {"kitchen": "a fridge 1, a microwave 1 and a countertop 1",
         "bedroom": "a bed 1, a desk 1 and a drawer 2"}


class ToyEnv(Environment):
    """Task type and room cycle; the solution is two actions, the second wins."""

    name = "toy"
    domain = "alfworld"
    splits = ("train", "unseen")

    def __init__(self, with_solution: bool = True) -> None:
        self.with_solution = with_solution
        self._i = 0

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return [f"{split}/{k}" for k in range(12)]

    def reset(self, task_id: str) -> Task:
        k = int(task_id.split("/")[1]) + (5 if task_id.startswith("unseen") else 0)
        ttype = list(GOALS)[k % 3]
        room = list(ROOMS)[k % 2]
        goal = GOALS[ttype].format(o=OBJECTS[k % 6], p="countertop" if k % 2 else "desk")
        self._i = 0
        return Task(id=task_id, goal=goal, domain="alfworld",
                    scene=f"You are in the middle of a room. You see {ROOMS[room]}.",
                    meta={"task_type": ttype, "room": room})

    def admissible_actions(self) -> list[str]:
        return ["look", "win"]

    def step(self, action: str) -> Transition:
        self._i += 1
        won = action == "win"
        return Transition(f"On the desk 1, you see a {action} 1.", float(won), won, won)

    def solution(self) -> list[str] | None:
        return ["look", "win"] if self.with_solution else None


def test_f1_tau_is_the_midpoint_of_the_best_cut():
    # relevant scores 0.9, 0.8; irrelevant 0.6, 0.5 → best cut between 0.8 and 0.6
    tau, f1 = best_f1_tau([0.9, 0.6, 0.8, 0.5], [True, False, True, False], [True] * 4)
    assert tau == pytest.approx(0.7) and f1 == pytest.approx(2 * 2 / (2 * 2 + 0 + 2))
    # nothing relevant on top: no cut helps
    assert best_f1_tau([0.5, 0.4], [False, False], [True, True]) == (1.0, 0.0)


def test_solution_replay_fills_the_bank_and_recall_is_scored_per_tree():
    env = ToyEnv()
    train = collect_episodes(env, "train", 12)
    assert all(ep.success and [s.action for s in ep.steps] == ["look", "win"] for ep in train)
    tests = collect_tasks(env, "unseen", 6)
    mem = build_bank(train, HashingEmbedder(), domain="alfworld",
                     options={"tau_task": 0.99, "tau_env": 0.99, "task_trigger": "abstract",
                              "env_trigger": "places"})
    report = evaluate_recall(mem, train, tests, source="toy")
    task, envt = report.trees["task"], report.trees["env"]
    assert task.label_key == "task_type" and envt.label_key == "room"
    # abstract triggers: each held-out goal's template is in the bank (score 1) → right type
    assert task.warm_rate == 1.0 and task.precision == 1.0
    assert task.median("relevant") == pytest.approx(1.0)
    assert envt.warm_rate == 1.0 and envt.precision == 1.0  # same furniture → same text
    assert report.bank["nodes"]["task"] >= 3


def test_a_stream_without_a_label_reports_scores_only(tmp_path):
    env = ToyEnv()
    train = collect_episodes(env, "train", 6)
    tests = collect_tasks(env, "unseen", 3)
    mem = build_bank(train, HashingEmbedder(), domain="alfworld")
    report = evaluate_recall(mem, train, tests, label_keys={"task": "task_type",
                                                            "env": "nope"})
    assert report.trees["env"].label_key is None and report.trees["env"].precision is None
    md = write_report(report, tmp_path, plot=False).read_text()
    assert "no relevance label" in md and "warm rate" in md
    data = json.loads((tmp_path / "recall.json").read_text())
    assert data["trees"]["env"]["precision"] is None


def test_an_environment_without_a_solution_is_a_clear_error():
    with pytest.raises(ConfigError, match="knows no solution"):
        collect_episodes(ToyEnv(with_solution=False), "train", 2)


def test_run_report_counts_warm_recalls_per_tree():
    from deltamem.bench.report import _recall_section

    def rec(task: bool, env: bool) -> dict:
        return {"recall": {"details": {"task": {"accepted": task}, "env": {"accepted": env}}}}

    lines = _recall_section({"learning": [rec(False, True), rec(True, True), rec(True, False)]})
    assert "| learning | 3 | 2 | 2 |" in lines
    assert _recall_section({"learning": [{"recall": {"details": {}}}]}) == []
