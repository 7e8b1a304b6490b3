"""``compare``: the Table 1 shape, checked against hand computation."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.analysis.compare import compare
from deltamem.bench import read_episodes
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import InvalidInputError

from .analysis_toys import MakeRun, as_dicts, md_tables


def _ci(values: list[float], seed: int, n_boot: int) -> tuple[float, float]:
    return bootstrap_ci(values, seed=seed, n_boot=n_boot)


def test_compare_rows_match_the_episode_logs(make_run: MakeRun, tmp_path: Path) -> None:
    none = make_run("none")
    dm = make_run("dm", memory="deltamem", episodes=5)
    path = compare([none, dm], tmp_path / "out", seed=7, n_boot=400)
    assert path == tmp_path / "out" / "compare.md"
    detail, pivot = md_tables(path.read_text())
    rows = {r["run"]: r for r in as_dicts(detail)}
    for run_dir in (none, dm):
        recs = read_episodes(run_dir / "episodes.jsonl")
        n = len(recs)
        wins = [float(r["success"]) for r in recs]
        rewards = [r["reward"] for r in recs]
        row = rows[run_dir.name]
        assert row["episodes"] == str(n)
        assert row["env/split"] == "corridor/test" and row["phase"] == "online"
        lo, hi = _ci(wins, 7, 400)
        assert row["success rate [95% CI]"] == \
            f"{sum(wins) / n:.1%} [{lo * 100:.1f}, {hi * 100:.1f}]"
        lo, hi = _ci(rewards, 7, 400)
        assert row["mean reward [95% CI]"] == f"{sum(rewards) / n:.3f} [{lo:.3f}, {hi:.3f}]"
        assert row["mean steps"] == f"{sum(r['steps'] for r in recs) / n:.1f}"
        act = sum(r["usage"]["act"]["prompt_tokens"] + r["usage"]["act"]["completion_tokens"]
                  for r in recs) / n
        assert row["tokens/ep act"] == row["tokens/ep total"] == f"{act:.0f}"
        assert row["bank size"] == str(recs[-1]["bank"]["units"])
    assert rows["none"]["memory"] == "none" and rows["dm"]["memory"] == "deltamem"
    assert rows["dm"]["bank size"] != "0"
    # Table 1 layout: one row per system, one column per env/split
    assert pivot[0] == ["memory", "corridor/test"]
    cells = {r[0]: r[1] for r in pivot[1:]}
    none_mean = float(rows["none"]["mean reward [95% CI]"].split()[0])
    dm_mean = float(rows["dm"]["mean reward [95% CI]"].split()[0])
    assert none_mean != dm_mean  # the toy stream gives them different means
    best, other = ("none", "deltamem") if none_mean > dm_mean else ("deltamem", "none")
    by_run = {"none": rows["none"], "deltamem": rows["dm"]}
    assert cells[best] == f"**{by_run[best]['mean reward [95% CI]']}**"
    assert cells[other] == by_run[other]["mean reward [95% CI]"]


def test_compare_is_deterministic_by_seed(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("none")
    a = compare([run_dir], tmp_path / "a", seed=1, n_boot=300).read_text()
    b = compare([run_dir], tmp_path / "b", seed=1, n_boot=300).read_text()
    c = compare([run_dir], tmp_path / "c", seed=2, n_boot=300).read_text()
    assert a == b and a != c


def test_train_to_test_phases_each_get_a_row(make_run: MakeRun, tmp_path: Path) -> None:
    run_dir = make_run("t2t", protocol="train-to-test", train_episodes=3, episodes=4)
    detail, pivot = md_tables(compare([run_dir], tmp_path).read_text())
    assert [r["phase"] for r in as_dicts(detail)] == ["build", "frozen", "unfrozen"]
    assert as_dicts(detail)[0]["env/split"] == "corridor/train"
    # the build phase is not an evaluation: not in the Table 1 layout
    assert pivot[0] == ["memory", "corridor/test (frozen)", "corridor/test (unfrozen)"]


def test_same_system_twice_on_one_column_is_refused(make_run: MakeRun, tmp_path: Path) -> None:
    a, b = make_run("a"), make_run("b", seed=1)
    with pytest.raises(InvalidInputError, match="both 'none' on corridor/test"):
        compare([a, b], tmp_path)
