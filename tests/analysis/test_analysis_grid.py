"""Figure 4: the parameter grid, its best cells and heatmaps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.analysis.grid import (
    CellResult,
    GridCell,
    best_cell,
    best_cells,
    draw_heatmaps,
    grid,
    grid_cells,
    parse_floats,
    parse_k_values,
    run_grid,
)
from deltamem.bench import read_episodes
from deltamem.errors import ConfigError
from tests.bench.bench_toys import CorridorEnv

from .analysis_toys import east_llm, md_tables


def _result(tt: float, te: float, k: int | None, success: float, reward: float) -> CellResult:
    return CellResult(GridCell(tt, te, k), Path(f"c-{tt}-{te}-{k}"), 10, success,
                      (success, success), reward, (reward, reward), 3)


def test_parsers_and_cells() -> None:
    assert parse_floats("0.7, 0.75,0.8") == [0.7, 0.75, 0.8]
    assert parse_k_values("3,inf,5") == [3, None, 5]
    with pytest.raises(ConfigError):
        parse_k_values("3,x")
    with pytest.raises(ConfigError):
        parse_floats("a")
    cells = grid_cells([0.7, 0.8], [0.9], [3, None])
    assert [c.dirname for c in cells] == ["tt0.7_te0.9_k3", "tt0.8_te0.9_k3",
                                          "tt0.7_te0.9_kinf", "tt0.8_te0.9_kinf"]
    assert cells[2].memory_options() == {"tau_task": 0.7, "tau_env": 0.9, "consolidation": False}
    assert cells[0].memory_options() == {"tau_task": 0.7, "tau_env": 0.9, "k_cons": 3}
    for bad in (([], [0.9], [3]), ([0.7, 0.7], [0.9], [3]), ([1.5], [0.9], [3]),
                ([0.7], [0.9], [0])):
        with pytest.raises(ConfigError):
            grid_cells(*bad)


def test_best_cell_order_success_then_reward_then_grid_order() -> None:
    rs = [_result(0.7, 0.8, 3, 0.5, 0.6), _result(0.8, 0.8, 3, 0.7, 0.1),
          _result(0.9, 0.8, 3, 0.7, 0.4), _result(0.7, 0.8, None, 0.2, 0.2),
          _result(0.8, 0.8, None, 0.2, 0.2)]
    best = best_cells(rs)
    assert best[3] is rs[2]  # ties on success broken by reward
    assert best[None] is rs[3]  # full tie: the first in grid order
    assert best_cell(rs) is rs[2]


def test_heatmap_boxes_each_best_cell(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rs = [_result(tt, te, k, s, s) for k, base in ((3, 0.0), (None, 0.5))
          for tt in (0.7, 0.8) for te in (0.8, 0.9)
          for s in [base + (0.3 if (tt, te) == ((0.8, 0.8) if k else (0.7, 0.9)) else 0.1)]]
    fig = draw_heatmaps(rs, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    boxes = {}
    for ax in fig.axes:
        for patch in ax.patches:
            if patch.get_gid() == "best":
                boxes[ax.get_title()] = patch.get_xy()
    # x is the τ_env index, y the τ_task index (minus half a cell)
    assert boxes == {"K_cons = 3": (-0.5, 0.5), "K_cons = ∞": (0.5, -0.5)}


def _grid_kwargs(tmp_path: Path, workers: int) -> dict:
    return {"env": "corridor", "split": "test", "episodes": 4, "tau_task": [0.3, 0.95],
            "tau_env": [0.5], "k_cons": [2, None], "workers": workers, "llm": "scripted",
            "embedder": "hashing:64", "env_factory": CorridorEnv, "llm_factory": east_llm}


def test_grid_in_process_runs_every_cell_and_resumes(tmp_path: Path) -> None:
    seen: list[str] = []
    results = run_grid(tmp_path, **_grid_kwargs(tmp_path, 1),
                       on_cell=lambda r: seen.append(r.run_dir.name))
    assert seen == ["tt0.3_te0.5_k2", "tt0.95_te0.5_k2", "tt0.3_te0.5_kinf", "tt0.95_te0.5_kinf"]
    for r in results:
        recs = read_episodes(r.run_dir / "episodes.jsonl")
        assert r.episodes == len(recs) == 4
        assert r.success_rate == sum(x["success"] for x in recs) / 4
        cfg = json.loads((r.run_dir / "config.json").read_text())
        assert cfg["memory"] == "deltamem"
        assert cfg["memory_options"] == r.cell.memory_options()
    again = run_grid(tmp_path, **_grid_kwargs(tmp_path, 1))
    assert again == results
    assert all(len(read_episodes(r.run_dir / "episodes.jsonl")) == 4 for r in again)


def test_grid_refuses_options_it_sets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set by the grid"):
        run_grid(tmp_path, **_grid_kwargs(tmp_path, 1), options={"k_cons": 4})


@pytest.mark.slow
def test_grid_in_parallel_processes_writes_heatmaps_and_marks_best(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = grid(tmp_path, **_grid_kwargs(tmp_path, 2))
    assert path == tmp_path / "grid.md"
    assert (tmp_path / "grid_heatmap.png").stat().st_size > 1000
    data = json.loads((tmp_path / "grid.json").read_text())
    assert len(data["cells"]) == 4
    text = path.read_text()
    tables = md_tables(text)
    for k_table, best in zip(tables[:2], data["best"], strict=True):
        starred = [(row[0], h) for row in k_table[1:] for h, c in zip(k_table[0][1:], row[1:],
                                                                       strict=True) if "★" in c]
        assert starred == [(f"{best['tau_task']:g}", f"{best['tau_env']:g}")]
    for cell in data["cells"]:
        recs = read_episodes(Path(cell["run_dir"]) / "episodes.jsonl")
        assert cell["success_rate"] == sum(r["success"] for r in recs) / len(recs)
    assert (tmp_path / "depth_k.md").exists() and (tmp_path / "depth_tau_task.png").exists()
    assert not (tmp_path / "depth_tau_env.md").exists()  # one τ_env value: nothing to vary
