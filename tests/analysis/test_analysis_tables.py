"""Tables 2, 3 and 5 against hand computation from the episode logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.analysis.ablation import VARIANTS, table3
from deltamem.analysis.token_stats import table5, token_rows
from deltamem.analysis.transfer import table2
from deltamem.bench import read_episodes
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import InvalidInputError
from deltamem.memories import register_memory

from .analysis_toys import MakeRun, as_dicts, make_lessons, md_tables


def _reward_cell(records: list[dict], seed: int = 0, n_boot: int = 300) -> str:
    rewards = [r["reward"] for r in records]
    lo, hi = bootstrap_ci(rewards, seed=seed, n_boot=n_boot)
    return f"{sum(rewards) / len(rewards):.3f} [{lo:.3f}, {hi:.3f}]"


def _unbold(cell: str) -> str:
    return cell.removeprefix("**").removesuffix("**")


# -- Table 2 ------------------------------------------------------------------------------------


def test_table2_frozen_and_unfrozen_per_system(make_run: MakeRun, tmp_path: Path) -> None:
    kw = {"protocol": "train-to-test", "train_episodes": 4, "episodes": 5}
    runs = {"none": make_run("none", **kw), "deltamem": make_run("dm", memory="deltamem", **kw)}
    grid, details = md_tables(table2(list(runs.values()), tmp_path, n_boot=300).read_text())
    assert grid[0] == ["method", "corridor/test"]
    cells = {r[0]: _unbold(r[1]) for r in grid[1:]}
    assert set(cells) == {"none (F)", "none (U)", "deltamem (F)", "deltamem (U)"}
    for name, run_dir in runs.items():
        recs = read_episodes(run_dir / "episodes.jsonl")
        for mode, tag in (("frozen", "F"), ("unfrozen", "U")):
            assert cells[f"{name} ({tag})"] == _reward_cell(
                [r for r in recs if r["phase"] == mode])
    rows = as_dicts(details)
    dm_frozen = next(r for r in rows if r["run"] == "dm" and r["mode"] == "frozen")
    recs = read_episodes(runs["deltamem"] / "episodes.jsonl")
    build = [r for r in recs if r["phase"] == "build"]
    assert dm_frozen["build split: episodes"] == "train: 4"
    assert dm_frozen["bank after build"] == str(build[-1]["bank"]["units"])
    # a frozen bank does not grow
    assert dm_frozen["bank at end"] == dm_frozen["bank after build"]
    best = max(float(c.split()[0]) for c in cells.values())
    bold = [r[0] for r in grid[1:] if r[1].startswith("**")]
    assert bold and all(float(cells[b].split()[0]) == best for b in bold)


def test_table2_needs_train_to_test_runs(make_run: MakeRun, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="train-to-test"):
        table2([make_run("online")], tmp_path)


# -- Table 3 ------------------------------------------------------------------------------------


def test_table3_detects_variants_in_any_order(make_run: MakeRun, tmp_path: Path) -> None:
    env_only = make_run("env", memory="deltamem", memory_options={"use_task_tree": False})
    full = make_run("full", memory="deltamem")
    task_only = make_run("task", memory="deltamem", memory_options={"use_env_tree": False},
                         episodes=4)
    grid, details = md_tables(table3([env_only, full, task_only], tmp_path, n_boot=300)
                              .read_text())
    assert [r[0] for r in grid[1:]] == list(VARIANTS)
    cells = {r[0]: _unbold(r[1]) for r in grid[1:]}
    for variant, run_dir in zip(VARIANTS, (full, task_only, env_only), strict=True):
        assert cells[variant] == _reward_cell(read_episodes(run_dir / "episodes.jsonl"))
    assert {r["run"]: r["variant"] for r in as_dicts(details)} == {
        "env": "Env Tree Only", "full": VARIANTS[0], "task": "Task Tree Only"}


def test_table3_refuses_other_systems_and_duplicates(make_run: MakeRun, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="deltamem runs"):
        table3([make_run("none")], tmp_path)
    a = make_run("a", memory="deltamem")
    b = make_run("b", memory="deltamem", memory_options={"tau_task": 0.5})
    with pytest.raises(InvalidInputError, match="both"):
        table3([a, b], tmp_path)


# -- Table 5 ------------------------------------------------------------------------------------


def test_table5_reads_float_and_per_kind_averages(make_run: MakeRun, tmp_path: Path) -> None:
    register_memory("test-lessons", make_lessons)
    lessons = make_run("lessons", memory="test-lessons")
    dm = make_run("dm", memory="deltamem")
    none = make_run("none")
    (table,) = md_tables(table5([lessons, dm, none], tmp_path).read_text())
    rows = as_dicts(table)
    by = {(r["run"], r["method"]): r for r in rows}
    # every corridor goal has 7 words: "lesson: <goal>" has 8
    assert by[("lessons", "test-lessons")]["avg tokens / unit"] == "8.0"
    assert by[("lessons", "test-lessons")]["units"] == "6"
    stats = read_episodes(dm / "episodes.jsonl")[-1]["bank"]
    for kind in ("ROOT", "RESIDUAL"):
        row = by[("dm", f"deltamem ({kind.title()})")]
        assert row["avg tokens / unit"] == f"{stats['avg_tokens'][kind]:.1f}"
        assert row["units"] == str(sum(stats["kind"][t].get(kind, 0) for t in ("task", "env")))
    assert by[("none", "none")]["avg tokens / unit"] == "-"
    assert by[("none", "none")]["units"] == "0"


def test_token_rows_rejects_a_malformed_average() -> None:
    assert token_rows("x", None) == [("x", "", None, None)]
    assert token_rows("x", {"units": 2, "avg_tokens": 3}) == [("x", "", 2, 3.0)]
    # an empty bank reports 0.0; Table 5 shows no average for it
    assert token_rows("x", {"units": 0, "avg_tokens": 0.0}) == [("x", "", 0, None)]
    with pytest.raises(InvalidInputError, match="avg_tokens"):
        token_rows("x", {"avg_tokens": "many"})


def test_deltamem_rows_root_first_and_empty_kinds_have_no_average() -> None:
    stats = {"avg_tokens": {"RESIDUAL": 0.0, "ROOT": 61.9},
             "kind": {"task": {"ROOT": 4}, "env": {"ROOT": 3}}}
    assert token_rows("dm", stats) == [("dm (Root)", "ROOT", 7, 61.9),
                                       ("dm (Residual)", "RESIDUAL", 0, None)]
