"""The results of a run: the episode log (``episodes.jsonl``) and summaries of it.

``episodes.jsonl`` holds one JSON object per finished episode, in order. Its
fields (written by :mod:`deltamem.bench.runner`):

==================  ==========================================================
``index``           position in the whole run (0, 1, 2, ... without gaps)
``phase``           ``online``, ``build``, ``frozen`` or ``unfrozen``
``position``        position within the phase
``task_id``         the environment's task id; ``split`` its split
``agent``           the policy that played it: ``react`` (the LLM agent) or a
                    demonstration policy ``expert`` / ``expert:noise=P`` (absent in
                    older runs)
``episode_id``      :attr:`Episode.id`
``success``         bool; ``reward`` the final normalised score
``steps``           steps taken; ``invalid_actions`` of which were not admissible
``usage``           LLM usage of the episode (recall, play and learn) by purpose:
                    ``{purpose: {calls, prompt_tokens, completion_tokens, attempts,
                    retries, retry_wait}}``: requests sent, retries among them and
                    seconds waited between them (absent in older runs: 0)
``learned``         whether ``learn`` was called; ``changes`` its
                    :meth:`Changes.to_list` (``null`` when unknown, see ``recovered``)
``recall``          ``{"chars": n, "items": [{source, id, score, role}, ...]}``
``bank``            ``memory.stats()`` after the episode
``wall_s``          wall time of the episode in seconds
``attempt``         with ``attempts`` > 1: the attempt (1, 2, ...) of an evaluated
                    phase's episode (absent otherwise)
``recovered``       present when the line was completed after a crash: how
==================  ==========================================================

Only the last line may be torn (the process died while writing it); readers
drop it. Any other unreadable line is an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.errors import StoreError
from deltamem.types import Step, Task

__all__ = [
    "EPISODES_FILE",
    "TRAJECTORIES_FILE",
    "EpisodeLog",
    "PhaseSummary",
    "RunResult",
    "append_trajectory",
    "bank_size",
    "per_game",
    "read_episodes",
    "read_trajectories",
    "summarize",
]

EPISODES_FILE = "episodes.jsonl"


def _parse(data: bytes, path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records and the byte length of the intact part of the log.

    Bytes after the last newline are a torn write and are ignored, as is an
    unreadable last complete line; an unreadable earlier line is an error.
    """
    *complete, _tail = data.split(b"\n")
    records: list[dict[str, Any]] = []
    good_end = 0
    for i, chunk in enumerate(complete):
        end = good_end + len(chunk) + 1
        if chunk.strip():
            try:
                rec = json.loads(chunk)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if i == len(complete) - 1:
                    break
                raise StoreError(f"{path}: unreadable line {i + 1}") from None
            if not isinstance(rec, dict) or rec.get("index") != len(records):
                raise StoreError(
                    f"{path}: line {i + 1} is not record {len(records)} of a run's sequence"
                )
            records.append(rec)
        good_end = end
    return records, good_end


def read_episodes(path: str | Path) -> list[dict[str, Any]]:
    """The records of an ``episodes.jsonl`` (a torn last line is dropped, not repaired)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e}") from e
    return _parse(data, path)[0]


TRAJECTORIES_FILE = "trajectories.jsonl"
"""Per episode: what was recalled (text) and every step (action, observation, valid)."""

OBSERVATION_CHARS = 600
"""Observations longer than this are cut in ``trajectories.jsonl``."""


def append_trajectory(path: str | Path, index: int, phase: str, task: Task, recall_text: str,
                      steps: Sequence[Step]) -> None:
    """Append one episode's trajectory line (for analysis; not needed to resume a run).

    After a crash an episode may be written twice: :func:`read_trajectories` keeps the
    last line of each index."""
    line = {"index": index, "phase": phase, "task_id": task.id, "goal": task.goal,
            "recall": recall_text,
            "steps": [[s.action, s.observation[:OBSERVATION_CHARS], bool(s.valid)]
                      for s in steps]}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")


def read_trajectories(run_dir: str | Path) -> dict[int, dict[str, Any]]:
    """The trajectories of a run directory by episode index (``{}`` when none were kept);
    a torn last line is ignored."""
    path = Path(run_dir) / TRAJECTORIES_FILE
    out: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return out
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("index"), int):
            out[rec["index"]] = rec
    return out


class EpisodeLog:
    """The append-only episode log of a run directory.

    Opening it drops a torn last line from the file (truncating to the last
    complete line), so appends continue a clean sequence. :meth:`append`
    writes one line and fsyncs before returning.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        self.records, good_end = _parse(data, self.path)
        self.dropped_torn_line = good_end < len(data) and bool(data[good_end:].strip())
        if good_end < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())

    @property
    def next_index(self) -> int:
        """Index of the next episode to record."""
        return len(self.records)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (its ``index`` must be :attr:`next_index`) durably."""
        if record.get("index") != self.next_index:
            raise StoreError(
                f"refusing to append index {record.get('index')!r} to {self.path}; "
                f"next is {self.next_index}"
            )
        line = json.dumps(dict(record), sort_keys=True, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.records.append(dict(record))


def bank_size(stats: Mapping[str, Any] | None) -> int | None:
    """Total stored units from ``memory.stats()``: its ``units``, else ``nodes``, else the sum
    of nested ``units``/``nodes`` counts; ``None`` when the stats report none."""
    if not isinstance(stats, Mapping):
        return None
    for key in ("units", "nodes"):
        v = stats.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    nested = [bank_size(v) for v in stats.values() if isinstance(v, Mapping)]
    found = [n for n in nested if n is not None]
    return sum(found) if found else None


def per_game(records: Sequence[Mapping[str, Any]], key: str = "success") -> dict[str, float]:
    """``key`` per game (task id, in first-played order): the mean over the game's attempts
    (a run with ``attempts`` > 1 plays each game several times; one attempt: its value)."""
    values: dict[str, list[float]] = {}
    for r in records:
        values.setdefault(r["task_id"], []).append(float(r[key]))
    return {t: sum(v) / len(v) for t, v in values.items()}


@dataclass(frozen=True)
class PhaseSummary:
    """Headline numbers of one phase of a run.

    ``wall_s`` is the time the phase's episodes took when they were played (the sum of
    their recorded ``wall_s``: recall, play and learn), not the time it took to read
    them again, so a finished run re-read later still shows what it cost. It does not
    take part in equality (a replayed run has the same outcome in another time).
    """

    phase: str
    split: str
    episodes: int
    successes: int
    mean_reward: float
    mean_steps: float
    bank_size: int | None
    wall_s: float = field(default=0.0, compare=False)  # timing: not part of the outcome

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


@dataclass(frozen=True)
class RunResult:
    """What :func:`deltamem.bench.run` returns.

    ``episodes`` counts the lines of the log (all sessions); ``resumed_from``
    is the index this session started at (0 for a fresh run).
    """

    run_dir: Path
    episodes_path: Path
    episodes: int
    resumed_from: int
    phases: tuple[PhaseSummary, ...]

    def phase(self, name: str) -> PhaseSummary:
        """The summary of phase ``name`` (``KeyError`` if the run has none)."""
        for p in self.phases:
            if p.phase == name:
                return p
        raise KeyError(name)


def summarize(records: Sequence[Mapping[str, Any]]) -> tuple[PhaseSummary, ...]:
    """Per-phase summaries, in the order the phases appear in ``records``."""
    order: list[str] = []
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if r["phase"] not in groups:
            order.append(r["phase"])
            groups[r["phase"]] = []
        groups[r["phase"]].append(r)
    out = []
    for name in order:
        rs = groups[name]
        n = len(rs)
        out.append(PhaseSummary(
            phase=name,
            split=str(rs[0].get("split", "")),
            episodes=n,
            successes=sum(bool(r["success"]) for r in rs),
            mean_reward=sum(float(r["reward"]) for r in rs) / n,
            mean_steps=sum(int(r["steps"]) for r in rs) / n,
            bank_size=bank_size(rs[-1].get("bank")),
            wall_s=round(sum(float(r.get("wall_s") or 0.0) for r in rs), 3),
        ))
    return tuple(out)
