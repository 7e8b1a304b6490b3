"""Table 2: train-to-test transfer, Frozen vs Unfrozen, for every memory system (paper §4.3).

Each run must use the ``train-to-test`` protocol: a ``build`` phase on the
training split, then ``frozen`` and/or ``unfrozen`` evaluations of the same
split from copies of the built bank (phases are the ``phase`` field of the
episode records). Rows are ``<memory> (F)`` / ``<memory> (U)``, columns the
evaluated env/split, cells the mean reward with its 95 % bootstrap interval,
each column's best in bold.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deltamem.analysis.compare import render_grid
from deltamem.analysis.markdown import ci, table, write_markdown
from deltamem.analysis.runs import PhaseStats, Run, load_runs, phase_stats
from deltamem.errors import InvalidInputError

__all__ = ["TABLE2_FILE", "table2"]

TABLE2_FILE = "table2.md"
_MODES = {"frozen": "F", "unfrozen": "U"}


def table2(
    run_dirs: Sequence[str | Path], out: str | Path, *, seed: int = 0, n_boot: int = 2000
) -> Path:
    """Write ``table2.md`` into directory ``out`` and return its path.

    Raises :class:`InvalidInputError` when a run is not a train-to-test run, has
    no evaluation phase yet, or two runs fill the same cell.
    """
    runs = load_runs(run_dirs)
    grid: dict[str, dict[str, tuple[Run, PhaseStats]]] = {}
    columns: list[str] = []
    details = []
    for run in runs:
        if run.protocol != "train-to-test":
            raise InvalidInputError(
                f"{run.path} uses protocol {run.protocol!r}; Table 2 needs train-to-test runs"
            )
        phases = run.phases()
        modes = [m for m in _MODES if m in phases]
        if not modes:
            raise InvalidInputError(f"{run.path} has no frozen/unfrozen episode yet")
        build = phase_stats(phases["build"], seed=seed, n_boot=n_boot) if "build" in phases \
            else None
        for mode in modes:
            st = phase_stats(phases[mode], seed=seed, n_boot=n_boot)
            col = f"{run.env}/{st.split}"
            if col not in columns:
                columns.append(col)
            row = grid.setdefault(f"{run.label()} ({_MODES[mode]})", {})
            if col in row:
                raise InvalidInputError(f"{row[col][0].path} and {run.path} both give "
                                        f"{run.label()} ({mode}) on {col}")
            row[col] = (run, st)
            details.append([
                run.name, run.label(), mode, f"{run.env}/{st.split}",
                "-" if build is None else f"{build.split}: {build.episodes}",
                "-" if build is None or build.bank_size is None else build.bank_size,
                st.episodes, ci(st.success_rate, st.success_ci, pct=True),
                ci(st.mean_reward, st.reward_ci),
                "-" if st.bank_size is None else st.bank_size,
            ])
    lines = [
        "# Table 2: train-to-test transfer (F = frozen bank, U = unfrozen)", "",
        *render_grid(grid, columns, row_label="method"), "",
        "Mean reward [95% CI]; best per column in bold.", "",
        "## Runs", "",
        *table(["run", "memory", "mode", "env/split", "build split: episodes",
                "bank after build", "episodes", "success rate [95% CI]",
                "mean reward [95% CI]", "bank at end"], details), "",
        f"Intervals: 95% percentile bootstrap of the mean, {n_boot} resamples, seed {seed}.",
    ]
    return write_markdown(Path(out) / TABLE2_FILE, lines)
