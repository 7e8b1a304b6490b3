"""Table 3: DeltaMem with both trees vs the Task-Tree only vs the Env-Tree only (paper §4.4).

The variant of each run is read from its configuration
(``memory_options.use_task_tree`` / ``use_env_tree``, both on by default), so
the run directories may be given in any order. Every run must be a
``deltamem`` run; each variant × env/split cell may be filled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deltamem.analysis.compare import render_grid
from deltamem.analysis.markdown import ci, table, write_markdown
from deltamem.analysis.runs import EVAL_PHASES, PhaseStats, Run, load_runs, phase_stats
from deltamem.errors import InvalidInputError

__all__ = ["TABLE3_FILE", "VARIANTS", "table3", "variant"]

TABLE3_FILE = "table3.md"
VARIANTS = ("DeltaMem (both trees)", "Task Tree Only", "Env Tree Only")


def variant(run: Run) -> str:
    """Which ablation a DeltaMem run is (one of :data:`VARIANTS`)."""
    if run.memory != "deltamem":
        raise InvalidInputError(f"{run.path} uses memory {run.memory!r}; Table 3 compares "
                                "deltamem runs")
    opts = run.memory_options
    task, env = bool(opts.get("use_task_tree", True)), bool(opts.get("use_env_tree", True))
    if task and env:
        return VARIANTS[0]
    if task:
        return VARIANTS[1]
    if env:
        return VARIANTS[2]
    raise InvalidInputError(f"{run.path} disables both trees")


def table3(
    run_dirs: Sequence[str | Path], out: str | Path, *, seed: int = 0, n_boot: int = 2000
) -> Path:
    """Write ``table3.md`` into directory ``out`` and return its path.

    Raises :class:`InvalidInputError` for a non-DeltaMem run or two runs of the
    same variant on the same env/split.
    """
    runs = load_runs(run_dirs)
    cells: dict[str, dict[str, tuple[Run, PhaseStats]]] = {}
    columns: list[str] = []
    details = []
    for run in runs:
        name = variant(run)
        for phase, records in run.phases().items():
            if phase not in EVAL_PHASES:
                continue
            st = phase_stats(records, seed=seed, n_boot=n_boot)
            col = run.column(phase)
            if col not in columns:
                columns.append(col)
            row = cells.setdefault(name, {})
            if col in row:
                raise InvalidInputError(f"{row[col][0].path} and {run.path} are both "
                                        f"{name!r} on {col}")
            row[col] = (run, st)
            details.append([run.name, name, col, st.episodes,
                            ci(st.success_rate, st.success_ci, pct=True),
                            ci(st.mean_reward, st.reward_ci), run.label()])
    grid = {v: cells[v] for v in VARIANTS if v in cells}
    lines = [
        "# Table 3: component ablation", "",
        *render_grid(grid, columns, row_label="method"), "",
        "Mean reward [95% CI]; best per column in bold. Variants are read from "
        "memory_options use_task_tree / use_env_tree.", "",
        "## Runs", "",
        *table(["run", "variant", "env/split", "episodes", "success rate [95% CI]",
                "mean reward [95% CI]", "memory options"], details), "",
        f"Intervals: 95% percentile bootstrap of the mean, {n_boot} resamples, seed {seed}.",
    ]
    return write_markdown(Path(out) / TABLE3_FILE, lines)
