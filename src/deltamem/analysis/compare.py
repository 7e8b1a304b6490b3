"""``compare``: runs side by side in the shape of paper Table 1.

For every evaluation phase of every run (``online``, ``frozen``,
``unfrozen``; the ``build`` phase of a train-to-test run is listed too, marked
as such) one row: memory system, env/split, episodes, success rate and mean
reward each with a 95 % bootstrap interval, mean steps, LLM tokens per episode
by purpose and the bank size after the phase. Then the Table-1 layout: one
row per memory system, one column per env/split, mean reward with its
interval, the best mean of each column in bold. Last, when any run retried an
LLM request, the requests each phase needed per purpose: attempts, retries and
seconds waited between them (a flaky endpoint shows up here, not as a silent
slowdown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from deltamem.analysis.markdown import ci, table, write_markdown
from deltamem.analysis.runs import EVAL_PHASES, PhaseStats, Run, load_runs, phase_stats
from deltamem.errors import InvalidInputError

__all__ = ["COMPARE_FILE", "compare", "pivot"]

COMPARE_FILE = "compare.md"


def compare(
    run_dirs: Sequence[str | Path], out: str | Path, *, seed: int = 0, n_boot: int = 2000
) -> Path:
    """Write ``compare.md`` for ``run_dirs`` into directory ``out`` and return its path.

    Raises :class:`InvalidInputError` for a directory that is not a finished
    run (no ``config.json`` or no episode).
    """
    runs = load_runs(run_dirs)
    rows: list[tuple[Run, PhaseStats]] = []
    for run in runs:
        for records in run.phases().values():
            rows.append((run, phase_stats(records, seed=seed, n_boot=n_boot)))
    purposes = sorted({p for _, st in rows for p in st.tokens})
    headers = ["run", "memory", "env/split", "phase", "episodes", "success rate [95% CI]",
               "mean reward [95% CI]", "mean steps",
               *(f"tokens/ep {p}" for p in purposes), "tokens/ep total", "bank size"]
    body = []
    for run, st in rows:
        body.append([
            run.name, run.label(), f"{run.env}/{st.split}", st.phase, st.episodes,
            ci(st.success_rate, st.success_ci, pct=True), ci(st.mean_reward, st.reward_ci),
            f"{st.mean_steps:.1f}", *(f"{st.tokens.get(p, 0.0):.0f}" for p in purposes),
            f"{st.total_tokens:.0f}", "-" if st.bank_size is None else st.bank_size,
        ])
    lines = [
        "# Comparison of runs", "",
        *table(headers, body), "",
        f"Intervals: 95% percentile bootstrap of the mean, {n_boot} resamples, seed {seed} "
        "(success counted as 0/1). Tokens: prompt + completion per episode, by purpose. "
        "Bank size: stored units after the phase's last episode.", "",
        "## Mean reward by memory system (Table 1 layout)", "",
        *pivot((run, st) for run, st in rows if st.phase in EVAL_PHASES), "",
        *retry_table(runs),
    ]
    return write_markdown(Path(out) / COMPARE_FILE, lines)


def retry_table(runs: Iterable[Run]) -> list[str]:
    """LLM attempts, retries and retry wait (seconds) per run, phase and purpose (totals);
    no table when no run retried anything."""
    body = []
    for run in runs:
        for phase, records in run.phases().items():
            sums: dict[str, list[float]] = {}
            for r in records:
                for purpose, c in (r.get("usage") or {}).items():
                    s = sums.setdefault(purpose, [0, 0, 0, 0.0])
                    s[0] += int(c.get("calls", 0))
                    s[1] += int(c.get("attempts", c.get("calls", 0)))
                    s[2] += int(c.get("retries", 0))
                    s[3] += float(c.get("retry_wait", 0.0))
            for purpose, (calls, attempts, retries, wait) in sorted(sums.items()):
                body.append([run.name, phase, purpose, f"{calls:.0f}", f"{attempts:.0f}",
                             f"{retries:.0f}", f"{wait:.1f}"])
    if not any(row[5] != "0" for row in body):
        return []  # no retries anywhere: nothing to show
    return ["## LLM requests and retries", "",
            *table(["run", "phase", "purpose", "calls", "attempts", "retries", "retry wait s"],
                   body), ""]


def pivot(cells: Iterable[tuple[Run, PhaseStats]], *, row_label: str = "memory") -> list[str]:
    """Rows: memory systems (:meth:`Run.label`); columns: :meth:`Run.column`; cells: mean
    reward [95% CI], the best mean per column in bold. Two runs landing on the same cell
    raise :class:`InvalidInputError`."""
    grid: dict[str, dict[str, tuple[Run, PhaseStats]]] = {}
    columns: list[str] = []
    for run, st in cells:
        col = run.column(st.phase)
        if col not in columns:
            columns.append(col)
        row = grid.setdefault(run.label(), {})
        if col in row:
            raise InvalidInputError(
                f"{row[col][0].path} and {run.path} are both {run.label()!r} on {col}; "
                "compare them with separate commands"
            )
        row[col] = (run, st)
    return render_grid(grid, columns, row_label=row_label)


def render_grid(
    grid: dict[str, dict[str, tuple[Run, PhaseStats]]], columns: Sequence[str], *,
    row_label: str,
) -> list[str]:
    """A rows × columns table of mean reward [CI] with each column's best mean in bold."""
    best = {
        c: max((cell[1].mean_reward for row in grid.values() if (cell := row.get(c))),
               default=None)
        for c in columns
    }
    body = []
    for label, row in grid.items():
        line: list[object] = [label]
        for c in columns:
            cell = row.get(c)
            if cell is None:
                line.append("-")
                continue
            st = cell[1]
            text = ci(st.mean_reward, st.reward_ci)
            line.append(f"**{text}**" if st.mean_reward == best[c] else text)
        body.append(line)
    return table([row_label, *columns], body)
