"""Downstream utility of candidate memories and preference pairs (§3.3, Eq. 3, 6).

For one trajectory τ the copilot's candidates m_1 … m_N are each shown to the frozen task
model, which replays the task; run i ends in success or failure after T_i steps:

    s(m_i) = 0                                          if the task fails,
    s(m_i) = 0.1 + 0.9 · (T_max − T_i) / (T_max − T_min)  otherwise            (Eq. 6)

with T_min, T_max over the successful replays of the same τ (when all successes took
equally long, each scores 1.0). The Top-K pairs (m⁺, m⁻) with the largest utility gaps
are kept for DPO (Eq. 7); :func:`selection_probabilities` is Eq. 3's softmax.

:class:`PairDataset` is the resumable JSONL data set in the run directory: one line per
pair (with the prompt, both completions and the scores) and one ``done`` line per
trajectory, so an interrupted build skips what it finished. Every line carries the data
set's schema version.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError, StoreError

__all__ = [
    "PAIRS_SCHEMA",
    "PairDataset",
    "Replay",
    "build_pairs",
    "preference_pairs",
    "selection_probabilities",
    "utilities",
]

PAIRS_SCHEMA = 1


@dataclass(frozen=True)
class Replay:
    """Outcome of replaying a task with one candidate memory shown."""

    success: bool
    steps: int


def utilities(replays: Sequence[Replay]) -> list[float]:
    """Eq. 6 for each replay of one trajectory's candidates."""
    lengths = [r.steps for r in replays if r.success]
    if any(r.steps < 0 for r in replays):
        raise ConfigError("replay step counts must be >= 0")
    if not lengths:
        return [0.0] * len(replays)
    t_min, t_max = min(lengths), max(lengths)
    out = []
    for r in replays:
        if not r.success:
            out.append(0.0)
        elif t_max == t_min:
            out.append(1.0)
        else:
            out.append(0.1 + 0.9 * (t_max - r.steps) / (t_max - t_min))
    return out


def preference_pairs(scores: Sequence[float], top_k: int, *, min_gap: float = 1e-9
                     ) -> list[tuple[int, int, float]]:
    """The Top-K ``(chosen, rejected, gap)`` index pairs by utility gap (ties: lower
    indices first); pairs whose gap is below ``min_gap`` are never returned."""
    if top_k < 0:
        raise ConfigError(f"top_k must be >= 0, got {top_k}")
    pairs = [(i, j, scores[i] - scores[j]) for i in range(len(scores))
             for j in range(len(scores)) if scores[i] - scores[j] >= min_gap]
    pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
    return pairs[:top_k]


def selection_probabilities(scores: Sequence[float], beta: float = 1.0) -> list[float]:
    """Eq. 3: softmax of β·s over one trajectory's candidates."""
    if beta <= 0:
        raise ConfigError(f"beta must be > 0, got {beta}")
    if not scores:
        return []
    m = max(scores)
    e = [math.exp(beta * (s - m)) for s in scores]
    z = sum(e)
    return [x / z for x in e]


class PairDataset:
    """Resumable JSONL preference data set (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _lines(self) -> Iterable[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    # a crash mid-write leaves at most a torn last line: ignore it
                    continue
                if row.get("schema") != PAIRS_SCHEMA:
                    raise StoreError(f"{self.path}:{n}: pair data set schema "
                                     f"{row.get('schema')!r}, this code reads {PAIRS_SCHEMA}")
                yield row

    def done(self) -> set[str]:
        """Trajectory keys already processed."""
        return {r["key"] for r in self._lines() if r.get("type") == "done"}

    def pairs(self, role: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self._lines() if r.get("type") == "pair"
                and (role is None or r["role"] == role)]

    def add(self, key: str, rows: Sequence[dict[str, Any]], info: dict[str, Any]) -> None:
        """Append one trajectory's pairs and its ``done`` marker (fsynced)."""
        torn = False
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
        with self.path.open("a", encoding="utf-8") as f:
            if torn:  # end the line a crash left half-written (it stays ignored)
                f.write("\n")
            for r in rows:
                f.write(json.dumps({"schema": PAIRS_SCHEMA, "type": "pair", "key": key, **r})
                        + "\n")
            f.write(json.dumps({"schema": PAIRS_SCHEMA, "type": "done", "key": key, **info})
                    + "\n")
            f.flush()
            os.fsync(f.fileno())


def build_pairs(
    dataset: PairDataset,
    trajectories: Sequence[tuple[str, str, str, Sequence[str], Sequence[str]]],
    replay: Callable[[str, str], Replay],
    *,
    top_k: int = 3,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Fill ``dataset`` from ``(key, role, prompt, answers, texts)`` rows.

    ``answers[i]`` is candidate i as the copilot writes it (the DPO completion) and
    ``texts[i]`` as the task model is shown it; ``replay(key, texts[i])`` plays the
    trajectory's task with it and returns its :class:`Replay`. Keys already in the data
    set are skipped (resume). Returns the number of pairs written by this call.
    """
    done = dataset.done()
    written = 0
    for key, role, prompt, answers, texts in trajectories:
        if key in done:
            continue
        if len(answers) != len(texts):
            raise ConfigError(f"{key}: {len(answers)} answers but {len(texts)} texts")
        replays = [replay(key, t) for t in texts]
        scores = utilities(replays)
        rows = [{"role": role, "prompt": prompt, "chosen": answers[i],
                 "rejected": answers[j], "gap": gap, "s_chosen": scores[i],
                 "s_rejected": scores[j]}
                for i, j, gap in preference_pairs(scores, top_k)]
        dataset.add(key, rows, {"role": role, "scores": scores,
                                "replays": [[r.success, r.steps] for r in replays]})
        written += len(rows)
        if progress:
            progress(f"{key}: scores {[round(s, 2) for s in scores]}, {len(rows)} pairs")
    return written
