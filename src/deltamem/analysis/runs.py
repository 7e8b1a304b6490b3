"""Read finished run directories for the analyses: their config and per-phase numbers.

A run directory is what :func:`deltamem.bench.run` writes: ``config.json``
(the :class:`~deltamem.bench.RunConfig`) and ``episodes.jsonl`` (one record per
episode, see :mod:`deltamem.bench.results`). The config is read as plain JSON,
so runs made by older versions of the harness stay readable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.bench.config import CONFIG_FILE
from deltamem.bench.results import EPISODES_FILE, bank_size, read_episodes
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import InvalidInputError

__all__ = [
    "EVAL_PHASES",
    "PhaseStats",
    "Run",
    "default_out",
    "load_run",
    "load_runs",
    "phase_stats",
]

#: phases that evaluate (``build`` only fills the bank of a train-to-test run)
EVAL_PHASES = ("online", "frozen", "unfrozen")


@dataclass(frozen=True)
class Run:
    """One run directory: its saved configuration and episode records."""

    path: Path
    config: Mapping[str, Any]
    records: tuple[Mapping[str, Any], ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def memory(self) -> str:
        return str(self.config.get("memory", "?"))

    @property
    def memory_options(self) -> dict[str, Any]:
        return dict(self.config.get("memory_options") or {})

    @property
    def env(self) -> str:
        return str(self.config.get("env", "?"))

    @property
    def split(self) -> str:
        return str(self.config.get("split", "?"))

    @property
    def protocol(self) -> str:
        return str(self.config.get("protocol", "online"))

    def label(self) -> str:
        """The memory system with its options, e.g. ``deltamem [k_cons=3, tau_task=0.8]``,
        and who built the bank when it was not the acting agent (``(bank: expert)``)."""
        opts = self.memory_options
        built = self.config.get("train_agent") if self.protocol == "train-to-test" else None
        tail = f" (bank: {built})" if built else ""
        if not opts:
            return self.memory + tail
        inner = ", ".join(f"{k}={_short_value(v)}" for k, v in sorted(opts.items()))
        return f"{self.memory} [{inner}]{tail}"

    def column(self, phase: str) -> str:
        """The result column a phase of this run belongs to: ``env/split``, plus the phase
        when it is not ``online`` (``household/seen (frozen)``)."""
        split = self.split
        for r in self.records:
            if r["phase"] == phase:
                split = str(r.get("split", split))
                break
        base = f"{self.env}/{split}"
        return base if phase == "online" else f"{base} ({phase})"

    def phases(self) -> dict[str, list[Mapping[str, Any]]]:
        """Records grouped by phase, in the order the phases appear."""
        out: dict[str, list[Mapping[str, Any]]] = {}
        for r in self.records:
            out.setdefault(str(r["phase"]), []).append(r)
        return out

    def last_bank(self) -> Mapping[str, Any] | None:
        """``memory.stats()`` after the run's last recorded episode."""
        bank = self.records[-1].get("bank")
        return bank if isinstance(bank, Mapping) else None


def _short_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def load_run(path: str | Path) -> Run:
    """Read one run directory.

    Raises :class:`InvalidInputError` when it has no ``config.json`` or no
    recorded episode.
    """
    path = Path(path)
    cfg_path = path / CONFIG_FILE
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"{path} is not a run directory: no {CONFIG_FILE}") from None
    except (OSError, json.JSONDecodeError) as e:
        raise InvalidInputError(f"cannot read {cfg_path}: {e}") from e
    if not isinstance(config, dict):
        raise InvalidInputError(f"{cfg_path} does not hold a JSON object")
    records = read_episodes(path / EPISODES_FILE)
    if not records:
        raise InvalidInputError(f"{path} holds no recorded episode ({EPISODES_FILE})")
    return Run(path, config, tuple(records))


def load_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Read several run directories (at least one; the same one twice is an error)."""
    runs = [load_run(p) for p in paths]
    if not runs:
        raise InvalidInputError("no run directory given")
    seen: dict[Path, Path] = {}
    for r in runs:
        key = r.path.resolve()
        if key in seen:
            raise InvalidInputError(f"run directory {r.path} given twice")
        seen[key] = r.path
    return runs


def default_out(paths: Sequence[str | Path]) -> Path:
    """Where an analysis of ``paths`` goes by default: the run directory itself for one run,
    else the deepest directory containing all of them."""
    if not paths:
        raise InvalidInputError("no run directory given")
    if len(paths) == 1:
        return Path(paths[0])
    return Path(os.path.commonpath([os.path.abspath(p) for p in paths]))


@dataclass(frozen=True)
class PhaseStats:
    """Headline numbers of one phase with 95 % bootstrap intervals.

    ``tokens`` is LLM tokens (prompt + completion) per episode by purpose;
    ``bank`` the memory stats after the phase's last episode.
    """

    phase: str
    split: str
    episodes: int
    success_rate: float
    success_ci: tuple[float, float]
    mean_reward: float
    reward_ci: tuple[float, float]
    mean_steps: float
    tokens: dict[str, float] = field(default_factory=dict)
    bank_size: int | None = None
    bank: Mapping[str, Any] | None = None

    @property
    def total_tokens(self) -> float:
        return sum(self.tokens.values())


def phase_stats(
    records: Sequence[Mapping[str, Any]], *, seed: int = 0, n_boot: int = 2000
) -> PhaseStats:
    """Summarise the records of one phase; the intervals are percentile bootstraps of the
    mean (success as 0/1), seeded, so the same records give the same numbers."""
    if not records:
        raise InvalidInputError("phase_stats needs at least one record")
    n = len(records)
    wins = [float(bool(r["success"])) for r in records]
    rewards = [float(r["reward"]) for r in records]
    tokens: dict[str, float] = {}
    for r in records:
        for purpose, c in (r.get("usage") or {}).items():
            used = int(c.get("prompt_tokens", 0)) + int(c.get("completion_tokens", 0))
            tokens[purpose] = tokens.get(purpose, 0.0) + used
    bank = records[-1].get("bank")
    return PhaseStats(
        phase=str(records[0]["phase"]),
        split=str(records[0].get("split", "")),
        episodes=n,
        success_rate=sum(wins) / n,
        success_ci=bootstrap_ci(wins, seed=seed, n_boot=n_boot),
        mean_reward=sum(rewards) / n,
        reward_ci=bootstrap_ci(rewards, seed=seed, n_boot=n_boot),
        mean_steps=sum(int(r["steps"]) for r in records) / n,
        tokens={p: t / n for p, t in sorted(tokens.items())},
        bank_size=bank_size(bank if isinstance(bank, Mapping) else None),
        bank=bank if isinstance(bank, Mapping) else None,
    )
