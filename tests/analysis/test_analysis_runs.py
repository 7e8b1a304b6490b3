"""Reading run directories and per-phase statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.analysis.runs import default_out, load_run, load_runs, phase_stats
from deltamem.bench import read_episodes
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import InvalidInputError

from .analysis_toys import MakeRun


def test_phase_stats_match_a_hand_computation(make_run: MakeRun) -> None:
    run_dir = make_run("none")
    records = read_episodes(run_dir / "episodes.jsonl")
    st_ = phase_stats(records, seed=3, n_boot=500)
    wins = [r["success"] for r in records]
    assert st_.episodes == 6
    assert st_.success_rate == sum(wins) / 6
    assert st_.mean_reward == sum(r["reward"] for r in records) / 6
    assert st_.mean_steps == sum(r["steps"] for r in records) / 6
    act = sum(r["usage"]["act"]["prompt_tokens"] + r["usage"]["act"]["completion_tokens"]
              for r in records)
    assert st_.tokens == {"act": act / 6}
    assert st_.bank_size == 0
    assert st_.success_ci == bootstrap_ci([float(w) for w in wins], seed=3, n_boot=500)


def test_load_run_reads_config_and_labels_options(make_run: MakeRun) -> None:
    run = load_run(make_run("d", memory="deltamem", memory_options={"tau_task": 0.8,
                                                                     "k_cons": 2}))
    assert run.memory == "deltamem" and run.env == "corridor" and run.split == "test"
    assert run.label() == "deltamem [k_cons=2, tau_task=0.8]"
    assert run.column("online") == "corridor/test"
    assert list(run.phases()) == ["online"]
    assert run.last_bank() == run.records[-1]["bank"]


def test_load_run_rejects_what_is_not_a_finished_run(tmp_path: Path, make_run: MakeRun) -> None:
    with pytest.raises(InvalidInputError, match=r"no config\.json"):
        load_run(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"env": "x"}))
    with pytest.raises(InvalidInputError, match="no recorded episode"):
        load_run(tmp_path)
    run_dir = make_run("a")
    with pytest.raises(InvalidInputError, match="twice"):
        load_runs([run_dir, run_dir])
    with pytest.raises(InvalidInputError):
        load_runs([])


def test_default_out_is_the_run_or_the_common_parent(tmp_path: Path) -> None:
    assert default_out([tmp_path / "a"]) == tmp_path / "a"
    assert default_out([tmp_path / "x" / "a", tmp_path / "x" / "b"]) == (tmp_path / "x").resolve()


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(0, 1000))
def test_bootstrap_interval_contains_the_mean_and_is_seeded(values: list[float], seed: int) -> None:
    records = [{"phase": "online", "success": v > 0.5, "reward": v, "steps": 1} for v in values]
    a = phase_stats(records, seed=seed, n_boot=200)
    b = phase_stats(records, seed=seed, n_boot=200)
    assert a == b
    lo, hi = a.reward_ci
    assert lo - 1e-9 <= a.mean_reward <= hi + 1e-9
    lo, hi = a.success_ci
    assert lo - 1e-9 <= a.success_rate <= hi + 1e-9


def test_another_seed_gives_another_interval() -> None:
    records = [{"phase": "online", "success": i % 3 == 0, "reward": i / 10, "steps": 1}
               for i in range(10)]
    cis = {phase_stats(records, seed=s, n_boot=300).reward_ci for s in range(5)}
    assert len(cis) > 1
