"""The leaderboard: its cells, a run end to end (local engine, in this process), the page
regenerated whole from the finished cells, resumability, and the plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.analysis.leaderboard import (
    bank_tokens,
    cells,
    collect,
    load_spec,
    render,
    run,
    write,
)
from deltamem.envs.registry import register, unregister
from deltamem.errors import ConfigError

RUN = """
env = "corridor-board"
split = "test"
llm = "scripted"
constrained = true
embedder = "hashing:64"
episodes = 3
"""

SPEC = """
page = "out/leaderboard.md"
systems = ["none", "deltamem", "long-context"]
seeds = [0]
versus = ["deltamem"]

[settings.short]
title = "short corridor"
config = "run.toml"
phase = "online"
run = {{ max_steps = 3 }}

[settings.long]
config = "run.toml"
phase = "online"
run = {{ max_steps = 6 }}
"""


@pytest.fixture
def corridor():
    register("corridor-board", "tests.bench.bench_toys:CorridorEnv")
    yield
    unregister("corridor-board")


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    (tmp_path / "run.toml").write_text(RUN, encoding="utf-8")
    path = tmp_path / "board.toml"
    path.write_text(text.format(), encoding="utf-8")
    return path


def test_one_cell_per_system_setting_and_seed(tmp_path, corridor):
    spec = load_spec(_spec(tmp_path))
    planned = cells(spec, tmp_path / "runs")
    assert [p.cell.name for p in planned][:3] == ["short-none-s0", "short-deltamem-s0",
                                                  "short-long-context-s0"]
    assert len(planned) == 6
    cfg = planned[4].cell.config
    assert (cfg.memory, cfg.max_steps, cfg.run_dir) == ("deltamem", 6,
                                                        tmp_path / "runs" / "long-deltamem-s0")


def test_a_setting_cannot_set_the_memory(tmp_path):
    text = SPEC.replace("run = {{ max_steps = 3 }}", 'run = {{ memory = "awm" }}')
    with pytest.raises(ConfigError, match="cannot set memory"):
        load_spec(_spec(tmp_path, text))


def test_end_to_end_resumable_and_regenerated_whole(tmp_path, corridor):
    spec = load_spec(_spec(tmp_path))
    runs = tmp_path / "runs"
    empty = render(spec, collect(spec, runs), generator="test")
    assert empty.count(" not run |") == 5 * 6  # five tables of six cells
    run(spec, runs, engine="local", workers=1, only=["short"])
    outcomes = run(spec, runs, engine="local", workers=1, only=["short"])
    assert all(o.skipped for o in outcomes)  # finished cells are not played again
    page, entries = write(spec, runs, generator="python scripts/leaderboard.py X",
                          plots=False)
    text = page.read_text(encoding="utf-8")
    done = {(e.setting, e.memory) for e in entries if e.success is not None}
    assert done == {("short", m) for m in spec.systems}
    by = {(e.setting, e.memory): e for e in entries}
    none = by[("short", "none")]
    assert none.episodes == 3 and none.memory_tokens == 0
    assert set(none.versus) == {"deltamem"} and "deltamem" not in by[("short",
                                                                       "deltamem")].versus
    assert by[("short", "long-context")].memory_tokens > 0
    lc = by[("short", "long-context")].growth  # "online" learns while it plays
    assert [g[0] for g in lc] == [1, 2, 2, 3] and lc[-1][1] == 3 and lc[-1][2] > 0
    assert "## Bank growth on short" in text
    assert "| long-context |" in text and "## Δ success vs deltamem" in text
    assert "python -m deltamem run" in text and "`short` / `none` / seed 0" in text
    assert write(spec, runs, generator="python scripts/leaderboard.py X",
                 plots=False)[0].read_text(encoding="utf-8") == text  # deterministic


def test_plots(tmp_path, corridor):
    pytest.importorskip("matplotlib")
    spec = load_spec(_spec(tmp_path))
    runs = tmp_path / "runs"
    run(spec, runs, engine="local", workers=1, only=["short-none", "short-deltamem"])
    page, _ = write(spec, runs, generator="test")
    for name in ("heatmap.png", "intervals.png"):
        assert (page.parent / "leaderboard" / name).stat().st_size > 0
    assert "![heatmap](leaderboard/heatmap.png)" in page.read_text(encoding="utf-8")


def test_bank_tokens():
    assert bank_tokens({"units": 4, "avg_tokens": 10.5}) == 42
    assert bank_tokens({"avg_tokens": {"ROOT": 10.0, "RESIDUAL": 20.0},
                        "kind": {"task": {"ROOT": 2, "RESIDUAL": 1},
                                 "env": {"ROOT": 1}}}) == 50
    assert bank_tokens({}) == 0
