"""Table 5: average whitespace tokens per stored memory unit, per system (paper Appendix B).

Read from ``memory.stats()`` after each run's last recorded episode:
``avg_tokens`` is a number for one-unit-kind systems (Synapse, AWM,
ReasoningBank: the systems define their unit as the paper does) and, for
DeltaMem, ``{"ROOT": x, "RESIDUAL": y}``, which gives two rows. The unit
counts come from ``units`` (DeltaMem: its ``kind`` counts per tree, ROOT row
first). An average over no unit (``none``, a tree with no RESIDUAL yet) is
listed as ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem.analysis.markdown import table, write_markdown
from deltamem.analysis.runs import load_runs
from deltamem.errors import InvalidInputError

__all__ = ["TABLE5_FILE", "TokenRow", "table5", "token_rows"]

TABLE5_FILE = "table5.md"

#: (method, unit kind or "", number of units or None, avg tokens or None)
TokenRow = tuple[str, str, int | None, float | None]


def token_rows(memory: str, stats: Mapping[str, Any] | None) -> list[TokenRow]:
    """The Table 5 rows of one bank's stats (see the module docstring)."""
    if not isinstance(stats, Mapping):
        return [(memory, "", None, None)]
    avg = stats.get("avg_tokens")
    units = stats.get("units")
    units = units if isinstance(units, int) and not isinstance(units, bool) else None
    if isinstance(avg, Mapping):
        kinds = stats.get("kind") if isinstance(stats.get("kind"), Mapping) else {}
        rows: list[TokenRow] = []
        rank = {"ROOT": 0, "RESIDUAL": 1}
        for kind in sorted(avg, key=lambda k: (rank.get(str(k), 2), str(k))):
            value = avg[kind]
            count = sum(int(per_tree.get(kind, 0)) for per_tree in kinds.values()
                        if isinstance(per_tree, Mapping)) if kinds else None
            mean = None if value is None or count == 0 else float(value)
            rows.append((f"{memory} ({str(kind).title()})", str(kind), count, mean))
        return rows
    if isinstance(avg, int | float) and not isinstance(avg, bool):
        # a bank with no unit reports 0.0; there is no average to show
        return [(memory, "", units, None if units == 0 else float(avg))]
    if avg is None:
        return [(memory, "", units, None)]
    raise InvalidInputError(f"{memory}: avg_tokens must be a number or a mapping, got {avg!r}")


def table5(run_dirs: Sequence[str | Path], out: str | Path) -> Path:
    """Write ``table5.md`` into directory ``out`` and return its path."""
    runs = load_runs(run_dirs)
    body = []
    for run in runs:
        last = run.records[-1]
        where = f"{run.env}/{last.get('split', run.split)} ({last['phase']})"
        for method, _kind, count, avg in token_rows(run.label(), run.last_bank()):
            body.append([method, run.name, where, "-" if count is None else count,
                         "-" if avg is None else f"{avg:.1f}"])
    lines = [
        "# Table 5: average tokens per memory unit", "",
        *table(["method", "run", "env/split (phase)", "units", "avg tokens / unit"], body), "",
        "Whitespace tokens of the stored text, averaged over the units in the bank after the "
        "run's last episode (memory.stats()['avg_tokens']). DeltaMem counts ROOT and RESIDUAL "
        "nodes separately, over both trees.",
    ]
    return write_markdown(Path(out) / TABLE5_FILE, lines)
