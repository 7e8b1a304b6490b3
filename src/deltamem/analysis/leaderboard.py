"""One leaderboard: every system on every setting the project measures, from one spec
(issue 49).

A leaderboard spec (TOML) names the systems, the seeds (chosen before any run) and the
settings; each setting is an existing run configuration (``config``, a path relative to
the spec's folder; the files of ``benchmarks/configs``, not a copy of them), with
``[settings.NAME.run]`` fields over it and the evaluation ``phase`` its column reads::

    page = "../../docs/leaderboard.md"     # relative to the spec's folder
    systems = ["none", "deltamem", "awm", "long-context", "ace", "memp", "macla"]
    seeds = [0]
    versus = ["deltamem", "awm"]           # paired differences against these

    [settings.household-frozen]
    title = "Household, frozen bank"
    config = "r29/household_scripted.toml"
    phase = "frozen"

    [settings.own-play]
    config = "r27/ownplay_scripted.toml"
    phase = "unfrozen"
    run = { seed = 0 }                     # fields over the config (not memory / run_dir)

Every system × setting × seed is one cell, a resumable run directory ``RUNS/<setting>-
<memory>-s<seed>`` run by :func:`deltamem.bench.cells.run_cells` (Ray tasks when Ray is
installed, else local processes; a finished cell is skipped: ``leaderboard-cells.json``).
:func:`digest` keeps each finished cell as a run digest (:mod:`deltamem.analysis.run_digest`,
the format the results page's runs use) in the spec's ``digests`` folder (committed,
``docs/data/leaderboard/<cell>.jsonl``); the page is built from the digests alone, so a fresh
clone regenerates it. :func:`collect` reads the digests (a digest whose configuration is not
the cell's any more is left off, and said), :func:`render` writes the page whole (cells
with no digest are shown as not run): success with its 95 % bootstrap interval over games,
the paired success difference against each ``versus`` system (same games, same order), the
mean steps of won episodes, the bank's size (memory units, the system's own) at the end of
the phase, and the memory tokens per episode (whitespace tokens of the recalled text the
agent was shown, mean over the phase's episodes). :func:`draw` writes the heat-map and the
interval plot (matplotlib).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deltamem.analysis.results_page import command, paired
from deltamem.analysis.run_digest import (
    RunRecord,
    bank_tokens,
    from_run_dir,
    read_digest,
    write_digest,
)
from deltamem.analysis.sweep import read_spec
from deltamem.bench.cells import Cell, CellOutcome, Engine, run_cells
from deltamem.bench.config import RunConfig, load_config
from deltamem.bench.gain import Gain
from deltamem.bench.results import per_game
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import ConfigError

__all__ = ["Entry", "LeaderboardSpec", "bank_tokens", "cells", "collect", "digest", "draw",
           "load_spec", "page_text", "plot_paths", "render", "run", "write"]

STATE_FILE = "leaderboard-cells.json"

#: the run directory a digest names (the command shown for a cell writes it there)
DIGEST_RUNS = Path("runs/leaderboard")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Setting(_Spec):
    """One column: a run configuration, fields over it, the phase it reads."""

    title: str = ""
    config: Path
    phase: Literal["frozen", "unfrozen", "online"] = "frozen"
    run: dict[str, Any] = Field(default_factory=dict)
    note: str = ""


class Resources(_Spec):
    cpus: int = Field(default=1, ge=1)
    retries: int = Field(default=1, ge=0)


class LeaderboardSpec(_Spec):
    """A leaderboard (module doc). Paths are relative to the spec's folder (``root``)."""

    page: Path = Path("leaderboard.md")
    plots: str = "leaderboard"
    #: the folder of the cells' run digests, the page's only input
    digests: Path = Path("leaderboard-digests")
    #: paragraphs put under the page's "Notes" heading (how a choice was made, ...)
    notes: list[str] = Field(default_factory=list)
    systems: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    versus: list[str] = Field(default_factory=lambda: ["deltamem"])
    settings: dict[str, Setting] = Field(min_length=1)
    resources: Resources = Field(default_factory=Resources)
    root: Path = Path(".")


def load_spec(path: str | Path) -> LeaderboardSpec:
    """Read and check a leaderboard spec; :class:`ConfigError` saying what is wrong."""
    spec = read_spec(path, LeaderboardSpec, "leaderboard", {"root": Path(path).parent})
    for name, s in spec.settings.items():
        bad = sorted(set(s.run) & {"memory", "run_dir"})
        if bad:
            raise ConfigError(f"setting {name!r} cannot set {', '.join(bad)}")
    return spec


@dataclass(frozen=True)
class Planned:
    """A cell and what it is a combination of."""

    setting: str
    memory: str
    seed: int
    cell: Cell


def cells(spec: LeaderboardSpec, runs: str | Path) -> list[Planned]:
    """Every system × setting × seed as a cell under ``runs``, its configuration checked."""
    out = []
    for sname, s in spec.settings.items():
        for memory in spec.systems:
            for seed in spec.seeds:
                name = f"{sname}-{memory}-s{seed}"
                config = load_config(spec.root / s.config, **{
                    **s.run, "memory": memory, "seed": seed, "run_dir": Path(runs) / name})
                out.append(Planned(sname, memory, seed,
                                   Cell(name, config, spec.resources.cpus)))
    return out


def run(spec: LeaderboardSpec, runs: str | Path, *, engine: Engine = "auto",
        workers: int | None = None, only: Sequence[str] = ()) -> list[CellOutcome]:
    """Run (or resume) the cells (``only``: those whose name contains one of these)."""
    planned = [p for p in cells(spec, runs)
               if not only or any(o in p.cell.name for o in only)]
    Path(runs).mkdir(parents=True, exist_ok=True)
    return run_cells([p.cell for p in planned], engine=engine, workers=workers,
                     retries=spec.resources.retries, state=Path(runs) / STATE_FILE)


# -- the figures ----------------------------------------------------------------------------

@dataclass
class Entry:
    """One system on one setting (one seed): the phase's figures, ``None`` when not run."""

    setting: str
    memory: str
    seed: int
    record: RunRecord | None = None
    games: dict[str, float] = field(default_factory=dict)
    success: float | None = None
    ci: tuple[float, float] | None = None
    won_steps: float | None = None
    bank_units: str = "-"
    memory_tokens: float | None = None
    episodes: int = 0
    versus: dict[str, tuple[int, Gain]] = field(default_factory=dict)
    #: a learning phase: (games played, memory units, their whitespace tokens) at each
    #: quarter of the stream
    growth: list[tuple[int, int, int]] = field(default_factory=list)


def _growth(rows: Sequence[Mapping[str, Any]]) -> list[tuple[int, int, int]]:
    n = len(rows)
    out = []
    for q in (1, 2, 3, 4):
        at = max(1, round(n * q / 4))
        units = str(rows[at - 1].get("bank_units", ""))
        out.append((at, int(units) if units.isdigit() else 0,
                    int(rows[at - 1].get("bank_tokens") or 0)))
    return out


def _finished(rec: RunRecord, phase: str) -> bool:
    rows = rec.phase(phase)
    return bool(rows) and (rec.cfg.episodes is None or len(rows) >= rec.cfg.episodes)


def _same(a: RunConfig, b: RunConfig) -> bool:
    """Two run configurations equal but for where they run."""
    return bool(a.model_copy(update={"run_dir": DIGEST_RUNS}) ==
                b.model_copy(update={"run_dir": DIGEST_RUNS}))


def digests_dir(spec: LeaderboardSpec) -> Path:
    """The spec's digest folder."""
    return spec.root / spec.digests


def digest(spec: LeaderboardSpec, runs: str | Path, *,
           into: Path | None = None) -> list[Path]:
    """Write the digest of every finished cell under ``runs`` (its phase complete) into the
    spec's digest folder (``into``: another), replacing the cell's old digest; unfinished
    and unplayed cells are left as they are."""
    out = []
    folder = into or digests_dir(spec)
    for p in cells(spec, runs):
        run_dir = Path(p.cell.config.run_dir)
        if not (run_dir / "episodes.jsonl").exists():
            continue
        try:
            rec = from_run_dir(run_dir)
        except ConfigError:
            continue
        if not _finished(rec, spec.settings[p.setting].phase):
            continue
        rec = replace(rec, name=p.cell.name,
                      cfg=rec.cfg.model_copy(update={"run_dir": DIGEST_RUNS / p.cell.name}))
        out.append(write_digest(rec, folder / f"{p.cell.name}.jsonl"))
    return out


def _entry(p: Planned, phase: str, folder: Path, stale: list[str]) -> Entry:
    e = Entry(p.setting, p.memory, p.seed)
    path = folder / f"{p.cell.name}.jsonl"
    if not path.exists():
        return e
    rec = read_digest(path)
    if not _same(rec.cfg, p.cell.config):
        stale.append(p.cell.name)
        return e
    if not _finished(rec, phase):
        return e  # unfinished: not on the board
    rows = rec.phase(phase)
    e.record = rec
    e.episodes = len(rows)
    e.games = per_game(rows)
    values = list(e.games.values())
    e.success = sum(values) / len(values)
    e.ci = bootstrap_ci(values)
    won = [r["steps"] for r in rows if r["success"]]
    e.won_steps = sum(won) / len(won) if won else None
    e.bank_units = str(rows[-1].get("bank_units", "-"))
    tokens = [r["recall_tokens"] for r in rows if r.get("recall_tokens") is not None]
    e.memory_tokens = sum(tokens) / len(tokens) if tokens else None
    if phase != "frozen":
        e.growth = _growth(rows)
    return e


def collect(spec: LeaderboardSpec, digests: Path | None = None,
            stale: list[str] | None = None) -> list[Entry]:
    """The figures of every cell with a digest (the spec's folder, or ``digests``); an entry
    with ``success=None`` for the others. A digest whose configuration is no longer its
    cell's (the spec or a configuration changed since it was played) is not shown: its
    cell's name is appended to ``stale``."""
    folder = digests or digests_dir(spec)
    stale = [] if stale is None else stale
    entries = [_entry(p, spec.settings[p.setting].phase, folder, stale)
               for p in cells(spec, DIGEST_RUNS)]
    index = {(e.setting, e.memory, e.seed): e for e in entries}
    for e in entries:
        if e.success is None:
            continue
        for ref in spec.versus:
            other = index.get((e.setting, ref, e.seed))
            if ref == e.memory or other is None or other.success is None:
                continue
            got = paired(other.games, e.games)
            if got is not None:
                e.versus[ref] = got
    return entries


# -- the page -------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _delta(g: tuple[int, Gain] | None) -> str:
    if g is None:
        return "—"
    _n, d = g
    return (f"{d.diff * 100:+.1f} [{d.low * 100:+.1f}, {d.high * 100:+.1f}]"
            + (" *" if d.excludes_zero else ""))


def _grid(spec: LeaderboardSpec, entries: Sequence[Entry], seed: int, cell: Any) -> list[str]:
    by = {(e.setting, e.memory): e for e in entries if e.seed == seed}
    head = "| system | " + " | ".join(spec.settings) + " |"
    lines = [head, "|---|" + "---|" * len(spec.settings)]
    for m in spec.systems:
        vals = []
        for s in spec.settings:
            e = by.get((s, m))
            vals.append("not run" if e is None or e.success is None else cell(e))
        lines.append(f"| {m} | " + " | ".join(vals) + " |")
    return lines


def render(spec: LeaderboardSpec, entries: Sequence[Entry], *, generator: str,
           plots: Sequence[Path] = (), digests: str = "") -> str:
    """The leaderboard page (Markdown), whole (``digests``: the digest folder it names)."""
    digests = digests or str(spec.digests)
    out = [
        "# Leaderboard",
        "",
        f"Generated by `{generator}` from the cells' run digests (`{digests}`, one per",
        "cell, committed); do not edit by hand.",
        "Every system plays every setting with the same model, embedder, agent and games;",
        "the settings are the project's measured ones (below, each with its configuration).",
        "Success in %, with its 95 % percentile-bootstrap interval over games. Δ: the",
        "success difference to the named system on the same games in the same order,",
        "paired by game, with its 95 % bootstrap interval (`*`: the interval excludes 0).",
        "A cell that was not run (or has not finished) says so; nothing is carried over",
        "from elsewhere.",
        "",
    ]
    for seed in spec.seeds:
        sfx = f" (seed {seed})" if len(spec.seeds) > 1 else ""
        out += [f"## Success{sfx}", ""]
        out += _grid(spec, entries, seed,
                     lambda e: f"{_pct(e.success)} [{_pct(e.ci[0])}, {_pct(e.ci[1])}]")
        for ref in spec.versus:
            out += ["", f"## Δ success vs {ref}{sfx}", ""]
            out += _grid(spec, entries, seed,
                         lambda e, r=ref: "—" if e.memory == r else _delta(e.versus.get(r)))
        out += ["", f"## Steps to success (mean steps of won episodes){sfx}", ""]
        out += _grid(spec, entries, seed,
                     lambda e: f"{e.won_steps:.1f}" if e.won_steps is not None else "-")
        out += ["", f"## Bank size (memory units at the end of the phase){sfx}", ""]
        out += _grid(spec, entries, seed, lambda e: e.bank_units)
        out += ["", f"## Memory tokens per episode (recalled text shown to the agent){sfx}",
                ""]
        out += _grid(spec, entries, seed,
                     lambda e: f"{e.memory_tokens:.0f}" if e.memory_tokens is not None
                     else "-")
        out.append("")
        learning = [s for s, st in spec.settings.items() if st.phase != "frozen"]
        for sname in learning:
            rows = [e for e in entries if e.setting == sname and e.seed == seed and e.growth]
            if not rows:
                continue
            marks = [str(at) for at, _u, _t in rows[0].growth]
            out += [f"## Bank growth on {sname}: memory units / their tokens after N games"
                    f"{sfx}", "", "| system | " + " | ".join(marks) + " |",
                    "|---|" + "---|" * len(marks)]
            out += [f"| {e.memory} | " + " | ".join(f"{u} / {t}" for _a, u, t in e.growth)
                    + " |" for e in rows]
            out.append("")
    if plots:
        out += ["## Plots", ""]
        out += [f"![{p.stem}]({p.parent.name}/{p.name})" for p in plots]
        out.append("")
    if spec.notes:
        out += ["## Notes", ""]
        for para in spec.notes:
            out += [para.strip(), ""]
    out += ["## Settings", ""]
    for name, s in spec.settings.items():
        out.append(f"* **{name}**: {s.title or name} — phase `{s.phase}`, configuration "
                   f"`{s.config}`" + (f" with {json.dumps(s.run)}" if s.run else "")
                   + (f". {s.note}" if s.note else ""))
    out += ["", "## Commands", "",
            "Each cell is one run; the command that replays it (resumable), and the source",
            "commit and day it was played (`+`: the source had local changes):", ""]
    for e in entries:
        if e.record is not None:
            played = ", ".join(x for x in (e.record.commit, e.record.date) if x) \
                or "not recorded"
            out.append(f"* `{e.setting}` / `{e.memory}` / seed {e.seed} ({played}): "
                       f"`{command(e.record.cfg)}`")
    return "\n".join(out).rstrip() + "\n"


def draw(spec: LeaderboardSpec, entries: Sequence[Entry], plot_dir: Path) -> list[Path]:
    """The heat-map (systems × settings success) and the interval plot (success with its
    95 % interval per system, one panel per setting), first seed. Needs matplotlib."""
    import numpy as np

    from deltamem.analysis.plotting import figure_class

    Figure = figure_class()
    seed = spec.seeds[0]
    by = {(e.setting, e.memory): e for e in entries if e.seed == seed}
    names, systems = list(spec.settings), list(spec.systems)
    grid = np.full((len(systems), len(names)), np.nan)
    for i, m in enumerate(systems):
        for j, s in enumerate(names):
            e = by.get((s, m))
            if e is not None and e.success is not None:
                grid[i, j] = 100 * e.success
    plot_dir.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(1.6 + 1.3 * len(names), 0.8 + 0.42 * len(systems)))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=100, cmap="viridis",
                   aspect="auto")
    for i in range(len(systems)):
        for j in range(len(names)):
            v = grid[i, j]
            ax.text(j, i, "–" if np.isnan(v) else f"{v:.0f}", ha="center", va="center",
                    fontsize=8, color="white" if np.isnan(v) or v < 60 else "black")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(systems)), systems, fontsize=8)
    fig.colorbar(im, ax=ax, label="success (%)")
    ax.set_title(f"success (%), seed {seed}", fontsize=9)
    fig.tight_layout()
    heat, intervals = plot_dir / "heatmap.png", plot_dir / "intervals.png"
    fig.savefig(heat, dpi=100)
    fig = Figure(figsize=(3.2 * len(names), 0.9 + 0.3 * len(systems)))
    axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
    ys = list(range(len(systems)))[::-1]
    for ax, s in zip(axes, names, strict=True):
        for y, m in zip(ys, systems, strict=True):
            e = by.get((s, m))
            if e is None or e.success is None or e.ci is None:
                continue
            v = 100 * e.success
            ax.errorbar([v], [y], xerr=[[v - 100 * e.ci[0]], [100 * e.ci[1] - v]], fmt="o",
                        capsize=3, color="tab:red" if m == spec.versus[0] else "tab:blue")
        ax.set_xlim(-5, 105)
        ax.set_title(s, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(ys, systems, fontsize=8)
    fig.supxlabel("success (%), 95 % bootstrap interval over games", fontsize=8)
    fig.tight_layout()
    fig.savefig(intervals, dpi=100)
    return [heat, intervals]


def page_text(spec: LeaderboardSpec, *, generator: str, plots: Sequence[Path] = (),
              page: Path | None = None, digests: Path | None = None,
              stale: list[str] | None = None) -> tuple[str, list[Entry]]:
    """The page (to be written at ``page``, default the spec's) from the cells' digests,
    linking ``plots``; and its entries."""
    entries = collect(spec, digests, stale)
    target = page or (spec.root / spec.page)
    return render(spec, entries, generator=generator, plots=plots,
                  digests=_shown(digests or digests_dir(spec), target.parent)), entries


def write(spec: LeaderboardSpec, *, generator: str, plots: bool = True,
          page: Path | None = None, digests: Path | None = None,
          stale: list[str] | None = None) -> tuple[Path, list[Entry]]:
    """Write the page (and its plots) whole from the cells' digests (the spec's folder, or
    ``digests``); the names of stale digests are appended to ``stale``."""
    target = page or (spec.root / spec.page)
    drawn: list[Path] = []
    if plots:
        drawn = draw(spec, collect(spec, digests), target.parent / spec.plots)
    text, entries = page_text(spec, generator=generator, plots=drawn, page=target,
                              digests=digests, stale=stale)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target, entries


def plot_paths(spec: LeaderboardSpec, page: Path | None = None) -> list[Path]:
    """The plots :func:`draw` writes beside the page."""
    folder = (page or (spec.root / spec.page)).parent / spec.plots
    return [folder / "heatmap.png", folder / "intervals.png"]


def _shown(folder: Path, page_dir: Path) -> str:
    """The digest folder as the page names it: relative to the repository (the page's
    folder's parent) when it is under it."""
    try:
        return str(folder.resolve().relative_to(page_dir.resolve().parent))
    except ValueError:
        return str(folder)


def summary(entries: Sequence[Entry]) -> Mapping[str, Any]:
    """The entries as JSON-able rows (for a notebook or a test)."""
    return {f"{e.setting}/{e.memory}/s{e.seed}": {
        "success": e.success, "ci": e.ci, "episodes": e.episodes,
        "versus": {k: {"diff": g.diff, "low": g.low, "high": g.high, "games": n}
                   for k, (n, g) in e.versus.items()},
        "won_steps": e.won_steps, "bank_units": e.bank_units,
        "memory_tokens": e.memory_tokens, "growth": e.growth} for e in entries}
