"""Eq. 6 utilities, Top-K preference pairs, the resumable data set, replays."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import ConfigError, StoreError
from deltamem.memories.mcma.replay import FollowerPlayer, candidate_trajectories, memory_steps
from deltamem.memories.mcma.utility import (
    PairDataset,
    Replay,
    build_pairs,
    preference_pairs,
    selection_probabilities,
    utilities,
)
from deltamem.testing import make_episode


def test_eq6_values() -> None:
    s = utilities([Replay(True, 10), Replay(True, 20), Replay(False, 5), Replay(True, 15)])
    assert s[0] == pytest.approx(1.0)
    assert s[1] == pytest.approx(0.1)
    assert s[2] == 0.0
    assert s[3] == pytest.approx(0.1 + 0.9 * 0.5)
    assert utilities([Replay(True, 7), Replay(True, 7)]) == [1.0, 1.0]
    assert utilities([Replay(False, 3)]) == [0.0]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 60)), min_size=1, max_size=12))
def test_eq6_bounds(runs: list[tuple[bool, int]]) -> None:
    s = utilities([Replay(a, b) for a, b in runs])
    for (ok, _), x in zip(runs, s, strict=True):
        assert (x == 0.0) if not ok else 0.1 - 1e-9 <= x <= 1.0 + 1e-9


def test_top_k_pairs_by_gap() -> None:
    pairs = preference_pairs([0.0, 1.0, 0.55, 0.1], top_k=3)
    assert pairs[0] == (1, 0, 1.0)
    assert [p[:2] for p in pairs] == [(1, 0), (1, 3), (2, 0)]
    assert preference_pairs([0.5, 0.5], top_k=5) == []
    with pytest.raises(ConfigError):
        preference_pairs([1.0], top_k=-1)


def test_eq3_softmax() -> None:
    p = selection_probabilities([1.0, 0.0], beta=2.0)
    assert sum(p) == pytest.approx(1.0)
    assert p[0] / p[1] == pytest.approx(math.exp(2.0))
    with pytest.raises(ConfigError):
        selection_probabilities([1.0], beta=0)


def test_dataset_is_resumable_and_versioned(tmp_path) -> None:
    ds = PairDataset(tmp_path / "run" / "pairs.jsonl")
    calls: list[str] = []

    def replay(key: str, text: str) -> Replay:
        calls.append(text)
        return Replay(text == "good", 3)

    rows = [("t1", "success", "P1", ["A", "B"], ["good", "bad"]),
            ("t2", "success", "P2", ["C", "D"], ["bad", "bad"])]
    assert build_pairs(ds, rows, replay) == 1
    assert ds.pairs()[0]["chosen"] == "A" and ds.pairs()[0]["rejected"] == "B"
    assert ds.done() == {"t1", "t2"}
    # a torn last line (crash mid-write) is ignored; finished keys are skipped
    with ds.path.open("a") as f:
        f.write('{"schema": 1, "type": "pa')
    calls.clear()
    assert build_pairs(ds, [*rows, ("t3", "failure", "P3", ["E", "F"], ["good", "x"])],
                       replay) == 1
    assert calls == ["good", "x"]
    assert len(ds.pairs("failure")) == 1
    ds.path.write_text(json.dumps({"schema": 99, "type": "done", "key": "z"}) + "\n")
    with pytest.raises(StoreError, match="schema"):
        ds.done()


def test_memory_steps_and_follower_player() -> None:
    text = "[chain] x\n  1. go to countertop 1\n  2. take apple 1 from countertop 1\n> look"
    assert memory_steps(text) == ["go to countertop 1", "take apple 1 from countertop 1",
                                  "look"]

    class Env:
        name = "fake"

        def __init__(self) -> None:
            self.taken: list[str] = []

        def admissible_actions(self):
            return ["go to countertop 1", "take apple 1 from countertop 1", "inventory"]

        def max_steps(self, task):
            return 5

        def step(self, a):
            from deltamem.envs.base import Transition

            self.taken.append(a)
            won = self.taken[-2:] == ["go to countertop 1", "take apple 1 from countertop 1"]
            return Transition("ok", 1.0 if won else 0.0, won, won)

    env = Env()
    ep = FollowerPlayer()(env, make_episode().task, text)
    assert ep.success and len(ep.steps) == 2
    env2 = Env()
    ep2 = FollowerPlayer(seed=3)(env2, make_episode().task, "no steps here")
    assert len(ep2.steps) == 5 or ep2.success  # random actions until the cap
    assert FollowerPlayer(seed=3)(Env(), make_episode().task, "no steps").steps == ep2.steps


def test_candidate_trajectories() -> None:
    [(key, role, prompt, answers, texts)] = candidate_trajectories(
        [make_episode(episode_id="e1")])
    assert key == "e1" and role == "success"
    assert "put a clean apple in fridge" in prompt
    assert len(answers) == len(texts) == len(set(answers)) >= 8  # α grid × compositions
    assert all(json.loads(a)["knowledge"] for a in answers)
