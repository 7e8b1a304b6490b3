"""A finished run as the results page reads it, and its compact committed copy (a *digest*).

A run directory (``config.json``, ``episodes.jsonl``, ``trajectories.jsonl``, an LLM cache, a
bank) is megabytes and lives outside the repository; the results page needs a few numbers per
evaluation episode. :func:`from_run_dir` reads a run directory into a :class:`RunRecord`;
:func:`write_digest` keeps it as one small JSONL file (``docs/data/runs/NAME.jsonl``: a header
line with the run's configuration and the acting model's recorded settings, then one line per
evaluation episode), and :func:`read_digest` reads it back, so ``docs/results.md`` can be
regenerated on a fresh clone and a test can check that it was.

Per episode a digest keeps what the tables show: ``phase``, ``index``, ``position``,
``task_id``, ``success``, ``reward``, ``steps``, ``tokens`` (prompt + completion, every
purpose), ``wall_s``, ``bank_units`` (the bank's size after the episode, as the table prints
it) and ``search`` (steps before the goal's object was first picked up,
:func:`deltamem.analysis.trajectories.search_steps`; ``null`` when it never was, or when the
run kept no trajectories, which the header's ``trajectories`` says), and, since version 2,
what the leaderboard (:mod:`deltamem.analysis.leaderboard`) shows besides: ``recall_tokens``
(whitespace tokens of the recalled text the agent was shown; ``null`` without trajectories)
and ``bank_tokens`` (the tokens the bank's memory units hold after the episode,
:func:`bank_tokens`). Build-phase episodes are counted in the header, not kept; so are the
source commit and the day the run was first played (``versions.json``; a ``+`` after the
commit: the source had local changes). A version-1 digest still reads, its two newer fields
``null``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.analysis.trajectories import search_steps
from deltamem.bench import read_episodes
from deltamem.bench.config import RunConfig
from deltamem.bench.cost import run_cost
from deltamem.bench.results import read_trajectories
from deltamem.errors import ConfigError

__all__ = ["DIGEST_VERSION", "EVAL_PHASES", "RunRecord", "bank_tokens", "from_run_dir",
           "read_digest", "write_digest"]

#: the digest format's version, the header's ``digest`` field
DIGEST_VERSION = 2

#: the versions :func:`read_digest` reads
_READS = (1, 2)

#: the phases whose episodes the page tables (a ``build`` phase only fills the bank)
EVAL_PHASES = ("online", "frozen", "unfrozen")

_ROW_KEYS = ("phase", "index", "position", "task_id", "success", "reward", "steps", "tokens",
             "wall_s", "bank_units", "search")
#: row keys added by version 2 (``None`` when a version-1 digest is read)
_ROW_KEYS_2 = ("recall_tokens", "bank_tokens")


@dataclass(frozen=True)
class RunRecord:
    """One finished run: its configuration, one row per evaluation episode (the keys of the
    module doc), the acting model's settings as one phrase (``None``: not recorded), whether
    the run kept trajectories, and its name (the run directory's or the digest's)."""

    name: str
    cfg: RunConfig
    rows: tuple[dict[str, Any], ...]
    model: str | None = None
    trajectories: bool = False
    build_episodes: int = 0
    #: the row's name on the page (default: the memory, with the run's name when two runs
    #: of a table have the same memory) and the command shown for it (default: the one
    #: rebuilt from ``cfg``); a manifest may set both
    label: str | None = None
    command: str | None = None
    #: where and when it was played: the source commit and the day its first session
    #: started (``versions.json``; ``None``: not recorded)
    commit: str | None = None
    date: str | None = None
    #: what the run's LLM calls cost (:func:`run_cost_summary`; ``None``: not recorded)
    cost: dict[str, Any] | None = None

    def phase(self, phase: str) -> list[dict[str, Any]]:
        """The rows of one evaluation phase, in the order they were played."""
        return [r for r in self.rows if r["phase"] == phase]


def _tokens(rec: dict[str, Any]) -> int:
    usage = rec.get("usage") or {}
    return sum(int(v.get("prompt_tokens", 0)) + int(v.get("completion_tokens", 0))
               for v in usage.values() if isinstance(v, dict))


def _bank_units(rec: dict[str, Any]) -> str:
    bank = rec.get("bank") or {}
    for key in ("nodes", "units", "items", "size"):
        if isinstance(bank.get(key), int):
            return str(bank[key])
    trees = [v for k, v in bank.items() if k.endswith("_nodes") and isinstance(v, int)]
    return str(sum(trees)) if trees else "-"


def bank_tokens(bank: Mapping[str, Any]) -> int:
    """The whitespace tokens a bank's memory units hold, from its ``stats()``: ``units``
    × ``avg_tokens`` (DeltaMem: per node kind, ``kind`` counts × ``avg_tokens``)."""
    avg = bank.get("avg_tokens")
    if isinstance(avg, Mapping):
        counts: dict[str, int] = {}
        for per_tree in (bank.get("kind") or {}).values():
            for k, v in per_tree.items():
                counts[k] = counts.get(k, 0) + int(v)
        return round(sum(counts.get(k, 0) * float(v) for k, v in avg.items()))
    if isinstance(avg, (int, float)) and isinstance(bank.get("units"), int):
        return round(bank["units"] * float(avg))
    return 0


def model_settings(run_dir: Path) -> str | None:
    """The acting LLM's settings a run recorded in ``versions.json`` (its first session that
    has them; a run refuses to resume under others), as one phrase. Runs recorded before
    that field existed give the model name their LLM cache's first answer was recorded
    under (it carries the weight type), else ``None``."""
    try:
        sessions = json.loads((run_dir / "versions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        sessions = []
    llm = next((s.get("llm") for s in sessions if isinstance(s, dict) and s.get("llm")), None)
    if not isinstance(llm, dict) or "name" not in llm:
        try:
            with open(run_dir / "llm-cache.jsonl", encoding="utf-8") as f:
                model = json.loads(f.readline()).get("model")
        except (OSError, ValueError, AttributeError):
            return None
        return f"`{model}`" if isinstance(model, str) else None
    extra = [f"{k} {json.dumps(llm[k])}" for k in ("flash_attn", "n_ubatch")
             if k in llm and llm[k] is not None]
    return f"`{llm['name']}`" + (f" ({', '.join(extra)})" if extra else "")


def _played(run_dir: Path) -> tuple[str | None, str | None]:
    """(source commit, day) of a run's first recorded session."""
    try:
        sessions = json.loads((run_dir / "versions.json").read_text(encoding="utf-8"))
        first = sessions[0]
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return None, None
    if not isinstance(first, dict):
        return None, None
    source = first.get("source") if isinstance(first.get("source"), dict) else {}
    commit = source.get("commit")
    commit = commit[:7] + ("+" if source.get("modified") else "") if isinstance(commit, str) \
        else None
    day = first.get("started_at")
    return commit, day[:10] if isinstance(day, str) else None


def from_run_dir(run_dir: str | Path) -> RunRecord:
    """Read a finished run directory (``config.json`` and ``episodes.jsonl``; the
    trajectories and model settings when it kept them). A run that was moved is read
    where it is now. Raises :class:`~deltamem.errors.ConfigError` when either file is
    missing."""
    d = Path(run_dir)
    if not (d / "config.json").exists() or not (d / "episodes.jsonl").exists():
        raise ConfigError(f"{d} is not a run directory (no config.json or episodes.jsonl)")
    cfg = RunConfig.from_json_file(d / "config.json")
    if Path(cfg.run_dir) != d:  # moved or read from elsewhere: where it is now
        cfg = cfg.model_copy(update={"run_dir": d})
    episodes = read_episodes(d / "episodes.jsonl")
    trajs = read_trajectories(d)
    rows = []
    for r in episodes:
        if r["phase"] not in EVAL_PHASES:
            continue
        t = trajs.get(r["index"])
        search = (search_steps(t["goal"], [s[0] for s in t["steps"] if s[2]])
                  if t is not None else None)
        rows.append({"phase": r["phase"], "index": r["index"],
                     "position": r.get("position", r["index"]), "task_id": r["task_id"],
                     "success": bool(r["success"]), "reward": float(r.get("reward", 0.0)),
                     "steps": int(r.get("steps", 0)), "tokens": _tokens(r),
                     "wall_s": round(float(r.get("wall_s", 0.0)), 3),
                     "bank_units": _bank_units(r), "search": search,
                     "recall_tokens": (len(str(t.get("recall", "")).split())
                                       if t is not None else None),
                     "bank_tokens": bank_tokens(r.get("bank") or {})})
    commit, day = _played(d)
    return RunRecord(name=d.name, cfg=cfg, rows=tuple(rows), model=model_settings(d),
                     trajectories=bool(trajs),
                     build_episodes=sum(r["phase"] == "build" for r in episodes),
                     commit=commit, date=day,
                     cost=run_cost_summary(d, episodes, cfg.llm))


def run_cost_summary(run_dir: str | Path, episodes: Sequence[dict[str, Any]],
                     model: str) -> dict[str, Any] | None:
    """What a run cost: tokens in and out and calls per purpose over every phase (build
    included), added up from the episodes' usage (:func:`deltamem.bench.cost.run_cost`), and
    the money when the run's ``cost.json`` priced it. ``None`` when no episode recorded usage.
    """
    cost = run_cost(episodes, model)
    if not cost.lines:
        return None
    purposes = {p: {"calls": c, "input_tokens": i, "output_tokens": o}
                for p, (c, i, o) in cost.by_purpose().items()}
    money = currency = None
    try:
        raw = json.loads((Path(run_dir) / "cost.json").read_text(encoding="utf-8"))
        money, currency = raw.get("money"), raw.get("currency")
    except (OSError, ValueError):
        pass
    return {"model": model, "by_purpose": purposes, "input_tokens": cost.input_tokens,
            "output_tokens": cost.output_tokens, "money": money, "currency": currency}


def write_digest(record: RunRecord, path: str | Path) -> Path:
    """Write ``record`` as a digest file (JSONL: the header, then one line per episode)."""
    path = Path(path)
    header = {"digest": DIGEST_VERSION, "name": record.name,
              "config": record.cfg.model_dump(mode="json"), "model": record.model,
              "trajectories": record.trajectories, "build_episodes": record.build_episodes,
              "commit": record.commit, "date": record.date, "cost": record.cost}
    lines = [json.dumps(header, sort_keys=True)]
    lines += [json.dumps({k: r.get(k) for k in _ROW_KEYS + _ROW_KEYS_2}) for r in record.rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_digest(path: str | Path) -> RunRecord:
    """Read a digest file written by :func:`write_digest`. Raises
    :class:`~deltamem.errors.ConfigError` for a missing, unreadable or other-version file."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        rows = tuple(json.loads(ln) for ln in lines[1:] if ln.strip())
    except (OSError, IndexError, ValueError) as e:
        raise ConfigError(f"cannot read run digest {path}: {e}") from e
    if not isinstance(header, dict) or header.get("digest") not in _READS:
        raise ConfigError(f"{path} is not a run digest of version "
                          f"{' or '.join(map(str, _READS))}")
    keys = _ROW_KEYS + (_ROW_KEYS_2 if header["digest"] >= 2 else ())
    missing = [k for r in rows for k in keys if k not in r]
    if missing:
        raise ConfigError(f"{path}: episode rows lack {sorted(set(missing))}")
    rows = tuple({**dict.fromkeys(_ROW_KEYS_2), **r} for r in rows)
    cfg = RunConfig.model_validate(header["config"])
    return RunRecord(name=header["name"], cfg=cfg, rows=rows, model=header.get("model"),
                     trajectories=bool(header.get("trajectories")),
                     build_episodes=int(header.get("build_episodes", 0)),
                     commit=header.get("commit"), date=header.get("date"),
                     cost=header.get("cost"))
