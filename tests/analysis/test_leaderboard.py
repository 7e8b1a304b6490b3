"""The leaderboard: its cells, a run end to end (local engine, in this process), the cells'
digests, the page regenerated whole from the digests alone (fixture digests with chosen
outcomes, and a fresh clone's: no run directory), resumability, and the plots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deltamem.analysis.leaderboard import (
    bank_tokens,
    cells,
    collect,
    digest,
    load_spec,
    render,
    run,
    write,
)
from deltamem.analysis.run_digest import RunRecord, read_digest, write_digest
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
digests = "out/data/leaderboard"
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


def test_end_to_end_resumable_digested_and_regenerated_whole(tmp_path, corridor):
    spec = load_spec(_spec(tmp_path))
    runs = tmp_path / "runs"
    empty = render(spec, collect(spec), generator="test")
    assert empty.count(" not run |") == 5 * 6  # five tables of six cells
    run(spec, runs, engine="local", workers=1, only=["short"])
    outcomes = run(spec, runs, engine="local", workers=1, only=["short"])
    assert all(o.skipped for o in outcomes)  # finished cells are not played again
    written = digest(spec, runs)
    assert sorted(p.name for p in written) == [f"short-{m}-s0.jsonl" for m in
                                               ("deltamem", "long-context", "none")]
    rec = read_digest(written[0])
    assert str(rec.cfg.run_dir) == "runs/leaderboard/short-none-s0"  # not this machine's
    page, entries = write(spec, generator="python scripts/leaderboard.py X", plots=False)
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
    assert "`out/data/leaderboard`" in text
    # a fresh clone: the digests alone give the same page
    shutil.rmtree(runs)
    assert write(spec, generator="python scripts/leaderboard.py X",
                 plots=False)[0].read_text(encoding="utf-8") == text


def _fixture_digests(spec, folder: Path, outcomes: dict[str, list[int]]) -> None:
    """A digest per cell named in ``outcomes`` (the cell's configuration, one row per game:
    its success), as a finished run would leave it."""
    for p in cells(spec, "runs/leaderboard"):
        won = outcomes.get(p.cell.name)
        if won is None:
            continue
        rows = tuple({"phase": "online", "index": i, "position": i, "task_id": f"g{i}",
                      "success": bool(w), "reward": float(w), "steps": 2 + i, "tokens": 0,
                      "wall_s": 0.1, "bank_units": str(i + 1), "search": None,
                      "recall_tokens": 10 * i, "bank_tokens": 7 * (i + 1)}
                     for i, w in enumerate(won))
        write_digest(RunRecord(name=p.cell.name, cfg=p.cell.config, rows=rows,
                               commit="abcdef1", date="2026-11-29"),
                     folder / f"{p.cell.name}.jsonl")


def test_the_page_from_fixture_digests(tmp_path):
    spec = load_spec(_spec(tmp_path))
    folder = tmp_path / "out" / "data" / "leaderboard"
    _fixture_digests(spec, folder, {"short-none-s0": [0, 0, 1, 0],
                                    "short-deltamem-s0": [1, 1, 1, 0],
                                    "long-deltamem-s0": [1, 0, 1, 1]})
    page, entries = write(spec, generator="python scripts/leaderboard.py board.toml --no-run",
                          plots=False)
    by = {(e.setting, e.memory): e for e in entries}
    none, dm = by[("short", "none")], by[("short", "deltamem")]
    assert (none.success, dm.success, by[("long", "deltamem")].success) == (0.25, 0.75, 0.75)
    n, gain = none.versus["deltamem"]  # paired by game from the digests' outcomes
    assert n == 4 and gain.diff == pytest.approx(-0.5)
    assert dm.won_steps == pytest.approx((2 + 3 + 4) / 3)
    assert dm.memory_tokens == pytest.approx(15.0) and dm.bank_units == "4"
    assert dm.growth == [(1, 1, 7), (2, 2, 14), (3, 3, 21), (4, 4, 28)]
    assert by[("short", "long-context")].success is None
    text = page.read_text(encoding="utf-8")
    assert "| none | 25.0 [" in text and "| deltamem | 75.0 [" in text
    assert "-50.0 [" in text and "| deltamem | 1 / 7 | 2 / 14 | 3 / 21 | 4 / 28 |" in text
    assert "(abcdef1, 2026-11-29)" in text and " not run |" in text


def test_a_digest_of_another_configuration_is_left_off_and_named(tmp_path):
    spec = load_spec(_spec(tmp_path))
    folder = tmp_path / "out" / "data" / "leaderboard"
    _fixture_digests(spec, folder, {"short-none-s0": [1, 0, 0],
                                    "short-deltamem-s0": [1, 1, 1]})
    rec = read_digest(folder / "short-none-s0.jsonl")  # played with other settings
    write_digest(RunRecord(name=rec.name, cfg=rec.cfg.model_copy(update={"max_steps": 9}),
                           rows=rec.rows), folder / "short-none-s0.jsonl")
    stale: list[str] = []
    entries = collect(spec, stale=stale)
    assert stale == ["short-none-s0"]
    by = {(e.setting, e.memory): e for e in entries}
    assert by[("short", "none")].success is None and by[("short", "deltamem")].success == 1.0


def test_an_unfinished_cell_is_not_digested(tmp_path, corridor):
    text = SPEC.replace("systems = [\"none\", \"deltamem\", \"long-context\"]",
                        "systems = [\"none\"]")
    spec = load_spec(_spec(tmp_path, text))
    runs = tmp_path / "runs"
    run(spec, runs, engine="local", workers=1, only=["short"])
    log = runs / "short-none-s0" / "episodes.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))
    assert digest(spec, runs) == []


def test_plots(tmp_path, corridor):
    pytest.importorskip("matplotlib")
    spec = load_spec(_spec(tmp_path))
    runs = tmp_path / "runs"
    run(spec, runs, engine="local", workers=1, only=["short-none", "short-deltamem"])
    digest(spec, runs)
    page, _ = write(spec, generator="test")
    for name in ("heatmap.png", "intervals.png"):
        assert (page.parent / "leaderboard" / name).stat().st_size > 0
    assert "![heatmap](leaderboard/heatmap.png)" in page.read_text(encoding="utf-8")


def test_bank_tokens():
    assert bank_tokens({"units": 4, "avg_tokens": 10.5}) == 42
    assert bank_tokens({"avg_tokens": {"ROOT": 10.0, "RESIDUAL": 20.0},
                        "kind": {"task": {"ROOT": 2, "RESIDUAL": 1},
                                 "env": {"ROOT": 1}}}) == 50
    assert bank_tokens({}) == 0
