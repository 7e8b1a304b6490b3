"""Figure 5: depth bars from the last bank stats of each run."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.analysis.depth import depth_bars, setting_labels
from deltamem.analysis.runs import load_runs
from deltamem.bench import read_episodes
from deltamem.errors import InvalidInputError

from .analysis_toys import MakeRun, as_dicts, md_tables


def test_depth_table_matches_the_last_histograms(make_run: MakeRun, tmp_path: Path) -> None:
    a = make_run("a", memory="deltamem", memory_options={"tau_task": 0.1})
    b = make_run("b", memory="deltamem", memory_options={"tau_task": 0.99,
                                                         "consolidation": False})
    path = depth_bars([a, b], tmp_path, plots=False)
    assert path == tmp_path / "depth_bars.md"
    assert not (tmp_path / "depth_bars.png").exists()
    (table,) = md_tables(path.read_text())
    rows = as_dicts(table)
    depths = [h.removeprefix("depth ") for h in table[0] if h.startswith("depth ")]
    for run_dir in (a, b):
        hist = read_episodes(run_dir / "episodes.jsonl")[-1]["bank"]["depth_histogram"]
        for tree in ("task", "env"):
            row = next(r for r in rows if r["run"] == run_dir.name and r["tree"] == tree)
            assert [int(row[f"depth {d}"]) for d in depths] == \
                [hist[tree].get(d, 0) for d in depths]
            assert int(row["total"]) == sum(hist[tree].values())
    # a permissive τ_task chains the corridor goals: deeper than a strict one
    deep = next(r for r in rows if r["run"] == "a" and r["tree"] == "task")
    assert any(int(deep[f"depth {d}"]) for d in depths if d != "1")
    labels = {r["run"]: r["setting"] for r in rows}
    assert labels == {"a": "K=default, τ_task=0.1", "b": "K=∞, τ_task=0.99"}


def test_setting_labels_fall_back_to_run_names(make_run: MakeRun) -> None:
    runs = load_runs([make_run("x", memory="deltamem"), make_run("y", memory="deltamem",
                                                                  seed=1)])
    assert setting_labels(runs) == ["x", "y"]


def test_depth_bars_png(make_run: MakeRun, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = depth_bars([make_run("a", memory="deltamem")], tmp_path, name="fig5", title="t")
    assert (tmp_path / "fig5.png").stat().st_size > 1000
    assert "![t](fig5.png)" in path.read_text()


def test_a_run_without_depth_histogram_is_refused(make_run: MakeRun, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="depth histogram"):
        depth_bars([make_run("none")], tmp_path, plots=False)
