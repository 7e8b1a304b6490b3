"""Is memory better than no memory? The difference of two success rates with a 95 % interval.

Pure functions over the per-episode outcomes of two runs (no I/O). When both runs
played the same tasks in the same order — the case of every comparison the project
makes, since task streams are a function of ``(split, seed)`` — the bootstrap
resamples *tasks* and keeps each task's pair of outcomes together (a paired
bootstrap), which removes the between-task variance from the difference. Otherwise
each run is resampled on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deltamem.errors import InvalidInputError
from deltamem.seeding import check_generator

__all__ = ["Gain", "gain", "phase_outcomes"]


@dataclass(frozen=True)
class Gain:
    """``b - a`` of two mean outcomes, its percentile-bootstrap interval and how it was drawn."""

    diff: float
    low: float
    high: float
    paired: bool
    n_a: int
    n_b: int

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below 0."""
        return self.low > 0 or self.high < 0

    def describe(self) -> str:
        how = "paired by task" if self.paired else "independent"
        return (f"{self.diff:+.1%} (95% CI {self.low:+.1%} to {self.high:+.1%}, "
                f"bootstrap {how})")


def gain(a: Sequence[float], b: Sequence[float], *, ids_a: Sequence[str] | None = None,
         ids_b: Sequence[str] | None = None, level: float = 0.95, n_boot: int = 4000,
         seed: int = 0) -> Gain:
    """Mean of ``b`` minus mean of ``a`` with a bootstrap interval (same seed, same interval).

    Paired when ``ids_a`` and ``ids_b`` are given and equal (same tasks, same order).
    """
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.ndim != 1 or xb.ndim != 1 or not xa.size or not xb.size:
        raise InvalidInputError("gain needs two non-empty 1-D sequences")
    if not 0 < level < 1 or n_boot < 1:
        raise InvalidInputError(f"need 0 < level < 1 and n_boot >= 1, got {level}, {n_boot}")
    paired = ids_a is not None and ids_b is not None and list(ids_a) == list(ids_b)
    rng = check_generator(seed)
    if paired:
        d = xb - xa
        draws = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    else:
        ma = xa[rng.integers(0, xa.size, size=(n_boot, xa.size))].mean(axis=1)
        mb = xb[rng.integers(0, xb.size, size=(n_boot, xb.size))].mean(axis=1)
        draws = mb - ma
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return Gain(float(xb.mean() - xa.mean()), float(lo), float(hi), paired, xa.size, xb.size)


def phase_outcomes(records: Sequence[Mapping[str, Any]], phase: str,
                   key: str = "success") -> tuple[list[str], list[float]]:
    """Task ids and outcomes (``success`` as 0/1, or ``reward``) of one phase's records."""
    rows = [r for r in records if r.get("phase") == phase]
    return [str(r["task_id"]) for r in rows], [float(r[key]) for r in rows]
