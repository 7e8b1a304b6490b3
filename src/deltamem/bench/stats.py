"""Small statistics for reports: seeded bootstrap confidence intervals and running means."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from deltamem.errors import InvalidInputError
from deltamem.seeding import check_generator

__all__ = ["bootstrap_ci", "running_mean"]


def bootstrap_ci(
    values: Sequence[float], *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (same seed, same interval).

    >>> bootstrap_ci([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise InvalidInputError("bootstrap_ci needs a non-empty 1-D sequence")
    if not 0 < level < 1 or n_boot < 1:
        raise InvalidInputError(f"need 0 < level < 1 and n_boot >= 1, got {level}, {n_boot}")
    if x.size == 1:
        return float(x[0]), float(x[0])
    rng = check_generator(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def running_mean(values: Sequence[float]) -> list[float]:
    """Mean of the first k values, for k = 1..n."""
    x = np.asarray(values, dtype=float)
    return (np.cumsum(x) / np.arange(1, x.size + 1)).tolist() if x.size else []
