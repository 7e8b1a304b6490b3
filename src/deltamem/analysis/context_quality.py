"""Context quality vs improvement (decocted experience, paper §4): does a better context
(Q = Rel + λ·Div, :mod:`deltamem.memories.decocted.quality`) help more?

:func:`correlation_report` reads two run directories (one with a decocted memory, one
with ``none``), computes the per-task improvement Δavg(x) = mean reward with context −
mean reward without, and the Pearson r between Q and Δavg, also as a function of λ (the
memories log Rel and Div separately, so Q can be recomputed for any λ).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.results import EPISODES_FILE, read_episodes
from deltamem.errors import InvalidInputError
from deltamem.memories.decocted.quality import DEFAULT_LAMBDA

__all__ = ["CorrelationReport", "TaskPoint", "correlation_report", "pearson"]


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation of two equally long sequences; ``None`` when undefined
    (fewer than 2 points or a constant sequence)."""
    if len(xs) != len(ys):
        raise InvalidInputError(f"pearson needs equal lengths, got {len(xs)} and {len(ys)}")
    if len(xs) < 2:
        return None
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if den == 0.0:
        return None
    return float(dx @ dy) / den


# -- Q vs improvement over no memory -------------------------------------------------------


@dataclass(frozen=True)
class TaskPoint:
    """One task of the correlation: mean Rel/Div of its recalls and Δavg reward."""

    task_id: str
    rel: float
    div: float
    delta: float
    n_context: int
    n_vanilla: int


@dataclass(frozen=True)
class CorrelationReport:
    """Pearson r between Q and Δavg over tasks, at ``lam`` and over a λ grid."""

    points: tuple[TaskPoint, ...]
    lam: float
    r: float | None
    r_by_lambda: tuple[tuple[float, float | None], ...] = field(default=())
    skipped_no_quality: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": len(self.points),
            "lambda": self.lam,
            "r": self.r,
            "r_by_lambda": [[lam, r] for lam, r in self.r_by_lambda],
            "undefined_reason": self.undefined_reason(),
            "skipped_no_quality": self.skipped_no_quality,
            "points": [p.__dict__ for p in self.points],
        }

    def undefined_reason(self) -> str | None:
        """Why :attr:`r` is undefined (``None`` when it is defined)."""
        if self.r is not None:
            return None
        if len(self.points) < 2:
            return f"{len(self.points)} task(s) with both runs and a logged quality; r needs 2"
        deltas = {p.delta for p in self.points}
        if len(deltas) == 1:
            return (f"Δavg is {next(iter(deltas)):+g} on every task (the memory changed no "
                    "task's reward), so it does not vary")
        return "Q is the same on every task"

    def markdown(self) -> str:
        """The report as a small Markdown section."""
        def fmt(r: float | None) -> str:
            return "undefined" if r is None else f"{r:+.3f}"

        lines = [
            "## Context quality vs improvement over no memory", "",
            f"{len(self.points)} tasks; Pearson r(Q, Δavg) at λ = {self.lam:g}: "
            f"**{fmt(self.r)}**", "",
            "| λ | r |", "|---|---|",
            *(f"| {lam:g} | {fmt(r)} |" for lam, r in self.r_by_lambda),
        ]
        why = self.undefined_reason()
        if why:
            lines += ["", f"r is undefined: {why}."]
        if self.skipped_no_quality:
            lines += ["", f"{self.skipped_no_quality} episodes had no logged quality "
                          "(empty recall) and were left out."]
        return "\n".join(lines) + "\n"


def _records(run_dir: Path) -> list[dict[str, Any]]:
    records = read_episodes(run_dir / EPISODES_FILE)
    if not records:
        raise InvalidInputError(f"{run_dir} holds no recorded episode ({EPISODES_FILE})")
    return records


def _quality_of(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    recall = record.get("recall") or {}
    details = recall.get("details") if isinstance(recall, Mapping) else None
    if not isinstance(details, Mapping):
        return None
    q = details.get("quality")
    return q if isinstance(q, Mapping) else None


def correlation_report(
    run_dir: str | Path,
    baseline_dir: str | Path,
    *,
    lam: float = DEFAULT_LAMBDA,
    lambdas: Iterable[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0),
    phase: str | None = None,
) -> CorrelationReport:
    """Correlate Q of each task's recalls with its improvement over a no-memory run.

    ``run_dir`` is a run of one of the decocted memories (its
    ``episodes.jsonl`` records must carry ``recall.details.quality``);
    ``baseline_dir`` a run of the same tasks with memory ``none``. Tasks are
    matched by ``task_id``; a task's Δavg is its mean reward in ``run_dir``
    minus its mean reward in ``baseline_dir``; its Rel and Div are the means
    over its recalls that retrieved something. ``phase`` limits both runs to
    one phase (default: every phase).

    Raises :class:`InvalidInputError` when a directory has no episodes, when no
    record of ``run_dir`` carries a logged quality (the runner must log
    ``recall.details``), or when no task occurs in both runs.
    """
    runs = _records(Path(run_dir))
    base = _records(Path(baseline_dir))
    if phase is not None:
        runs = [r for r in runs if r.get("phase") == phase]
        base = [r for r in base if r.get("phase") == phase]
    vanilla: dict[str, list[float]] = {}
    for r in base:
        vanilla.setdefault(str(r["task_id"]), []).append(float(r["reward"]))
    rewards: dict[str, list[float]] = {}
    rels: dict[str, list[float]] = {}
    divs: dict[str, list[float]] = {}
    skipped = 0
    any_quality = False
    for r in runs:
        tid = str(r["task_id"])
        rewards.setdefault(tid, []).append(float(r["reward"]))
        q = _quality_of(r)
        if q is None:
            skipped += 1
            continue
        any_quality = True
        rels.setdefault(tid, []).append(float(q["rel"]))
        divs.setdefault(tid, []).append(float(q["div"]))
    if not any_quality:
        raise InvalidInputError(
            f"no episode of {run_dir} carries recall.details.quality: run one of the decocted "
            "memories (lessons, lessons-raw, lessons-kmeans, concept-tree) with a runner that "
            "logs recall details"
        )
    points = []
    for tid in sorted(rels):
        if tid not in vanilla:
            continue
        points.append(TaskPoint(
            task_id=tid,
            rel=float(np.mean(rels[tid])),
            div=float(np.mean(divs[tid])),
            delta=float(np.mean(rewards[tid]) - np.mean(vanilla[tid])),
            n_context=len(rewards[tid]),
            n_vanilla=len(vanilla[tid]),
        ))
    if not points:
        raise InvalidInputError(f"no task of {run_dir} with a logged quality was also played in "
                                f"{baseline_dir}")
    deltas = [p.delta for p in points]

    def r_at(x: float) -> float | None:
        return pearson([p.rel + x * p.div for p in points], deltas)

    grid = sorted({float(x) for x in lambdas} | {float(lam)})
    return CorrelationReport(points=tuple(points), lam=float(lam), r=r_at(lam),
                             r_by_lambda=tuple((x, r_at(x)) for x in grid),
                             skipped_no_quality=skipped)
