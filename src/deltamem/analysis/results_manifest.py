"""``docs/results.md`` as a reference: regenerated whole from one manifest of runs.

The manifest (``docs/results.toml``) holds one section per question a user asks (does
memory help; DeltaMem against each baseline; what each mechanism adds; each domain; the
bundled model against model-free play), each listing the runs that answer it, a
one-paragraph reading and, optionally, an interval plot::

    title = "Results"
    intro = "What the page is."
    digests = "data/runs"           # run digests, relative to the manifest
    plots = "data/plots"            # the plots, relative to the page
    notebook = "notebook.md"        # the lab notebook (superseded tables, history)

    [[question]]
    id = "memory-helps"             # the plot's file name
    title = "Does memory help?"
    reading = "One paragraph: what the tables say."
    headline = true                 # a row of the headline table on top
    plot = true                     # success with 95 % intervals, one bar per run
    runs = [{ name = "hh-none" }, { name = "hh-deltamem", phase = ["frozen"] }]

    [[question.runs]]               # the same, one table per run (TOML 1.0: an inline
    name = "hh-awm"                 # table stays on one line)
    label = "awm, 60 games"

A run is named by its digest (``NAME.jsonl`` under ``digests``,
:mod:`deltamem.analysis.run_digest`); ``label`` renames its row, ``phase`` keeps only
some of its evaluation phases, ``group`` puts it in a table of its own under that heading
within the question, and ``command`` replaces the command rebuilt from its configuration. A
question's ``see`` lists other questions (by id) whose tables also answer it.
The tables are :func:`deltamem.analysis.results_page.tables`; the page opens with a
contents list and a headline table (per headline question: no memory, DeltaMem, the best
other system, and DeltaMem's paired difference to no memory). :func:`render` is pure
text, so a test can check that the committed page is what the manifest and the digests
give; :func:`draw_plots` writes the PNGs (matplotlib, the ``plots`` extra).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deltamem.analysis.results_page import EVAL_PHASES, PREAMBLE, paired, tables
from deltamem.analysis.run_digest import RunRecord, read_digest
from deltamem.bench.results import per_game
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import ConfigError

__all__ = ["GENERATOR", "Manifest", "ManifestRun", "Question", "draw_plots", "load_manifest",
           "load_runs", "render", "slug"]

#: the command that writes the page, named in its first lines
GENERATOR = "python scripts/results.py --manifest docs/results.toml"


class ManifestRun(BaseModel):
    """One run of a question: its digest's name and how to show it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    label: str | None = None
    phase: list[str] | None = None
    group: str | None = None
    command: str | None = None


class Question(BaseModel):
    """One section of the page: a question, its runs, what they say."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    title: str
    reading: str
    runs: list[ManifestRun] = []
    see: list[str] = []
    headline: bool = False
    plot: bool = False
    versus: str = "deltamem"
    expect: list[str] = ["none", "synapse", "awm", "reasoningbank", "deltamem"]
    blocks: int = 0


class Manifest(BaseModel):
    """The whole page: a title, an introduction, where digests and plots live, questions."""

    model_config = ConfigDict(extra="forbid")

    title: str = "Results"
    intro: str = ""
    digests: str = "data/runs"
    plots: str = "data/plots"
    notebook: str | None = None
    question: list[Question]


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate a manifest; raises :class:`~deltamem.errors.ConfigError`."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        manifest = Manifest.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as e:
        raise ConfigError(f"cannot read results manifest {path}: {e}") from e
    ids = [q.id for q in manifest.question]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: two questions share an id")
    unknown = sorted({s for q in manifest.question for s in q.see} - set(ids))
    if unknown:
        raise ConfigError(f"{path}: `see` names no question: {unknown}")
    for q in manifest.question:
        for run in q.runs:
            bad = [p for p in run.phase or () if p not in EVAL_PHASES]
            if bad:
                raise ConfigError(f"{path}: run {run.name}: unknown phase {bad}")
    return manifest


def load_runs(manifest: Manifest, digest_dir: Path) -> dict[str, RunRecord]:
    """Every digest the manifest names, by name; raises
    :class:`~deltamem.errors.ConfigError` when one is missing."""
    names = sorted({r.name for q in manifest.question for r in q.runs})
    return {n: read_digest(digest_dir / f"{n}.jsonl") for n in names}


def slug(title: str) -> str:
    """GitHub's anchor for a heading (without the ``-N`` suffix of a repeated one)."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _shown(run: ManifestRun, rec: RunRecord) -> RunRecord:
    """``rec`` as the manifest shows it: its phases, label and command."""
    rows = rec.rows if run.phase is None else tuple(r for r in rec.rows
                                                   if r["phase"] in run.phase)
    return replace(rec, rows=rows, label=run.label, command=run.command)


def _question_runs(q: Question, records: dict[str, RunRecord]) -> dict[str, list[RunRecord]]:
    groups: dict[str, list[RunRecord]] = {}
    for run in q.runs:
        groups.setdefault(run.group or "", []).append(_shown(run, records[run.name]))
    return groups


def _first_phase(rec: RunRecord) -> str | None:
    return next((ph for ph in EVAL_PHASES if rec.phase(ph)), None)


def _rate(rec: RunRecord, phase: str) -> float:
    per = per_game(rec.phase(phase))
    return sum(per.values()) / len(per)


def _setting(rec: RunRecord, phase: str) -> str:
    cfg = rec.cfg
    model = "model-free (`scripted`)" if cfg.llm == "scripted" else f"`{cfg.llm}`"
    games = len(per_game(rec.phase(phase)))
    return f"{cfg.env} `{cfg.split}`, seed {cfg.seed}, {model}, {games} games, {phase}"


def _headline_row(q: Question, runs: list[RunRecord]) -> list[str] | None:
    """question | setting | none | DeltaMem | best other | DeltaMem − none (paired)."""
    mine = next((r for r in runs if r.cfg.memory == q.versus), None)
    if mine is None or (phase := _first_phase(mine)) is None:
        return None
    same = [r for r in runs if r.phase(phase) and r.cfg.env == mine.cfg.env
            and r.cfg.seed == mine.cfg.seed and r.cfg.llm == mine.cfg.llm]
    none = next((r for r in same if r.cfg.memory == "none"), None)
    others = [(_rate(r, phase), r.label or r.cfg.memory) for r in same
              if r.cfg.memory not in ("none", q.versus)]
    top = max((rate for rate, _ in others), default=None)
    best = None if top is None else (top, ", ".join(n for rate, n in others if rate == top))
    diff = "-"
    if none is not None:
        got = paired(per_game(none.phase(phase)), per_game(mine.phase(phase)))
        if got is not None:
            g = got[1]
            diff = (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, {g.high * 100:+.1f}]"
                    + (" *" if g.excludes_zero else ""))
    return [f"[{q.title}](#{slug(q.title)})", _setting(mine, phase),
            f"{_rate(none, phase) * 100:.1f}" if none is not None else "-",
            f"{_rate(mine, phase) * 100:.1f}",
            f"{best[1]} {best[0] * 100:.1f}" if best is not None else "-", diff]


def _plot_name(q: Question) -> str:
    return f"{q.id}.png"


def render(manifest: Manifest, records: dict[str, RunRecord]) -> str:
    """The page (Markdown) of ``manifest`` over ``records`` (:func:`load_runs`)."""
    attempts = any(rec.cfg.attempts > 1 for rec in records.values())
    over = ("over games (a game played in several attempts counts as the mean of its "
            "attempts);" if attempts else "over games;")
    out = [f"# {manifest.title}", "",
           f"Generated by `{GENERATOR}` from the manifest and the run digests in "
           f"`docs/{manifest.digests}/`; do not edit by hand.", ""]
    if manifest.intro:
        out += [manifest.intro.strip(), ""]
    if manifest.notebook:
        out += [f"Superseded tables and how each result was found: the "
                f"[lab notebook]({manifest.notebook}).", ""]
    out += ["## Contents", "", "* [Headline](#headline)",
            "* [How to read the tables](#how-to-read-the-tables)"]
    out += [f"* [{q.title}](#{slug(q.title)})" for q in manifest.question]
    head = []
    for q in manifest.question:
        if q.headline:
            runs = [r for rs in _question_runs(q, records).values() for r in rs]
            row = _headline_row(q, runs)
            if row is not None:
                head.append("| " + " | ".join(row) + " |")
    out += ["", "## Headline", "",
            "Success (%) of the evaluation games; the difference is paired by game, with its "
            "95 % bootstrap interval (`*`: it excludes 0).", "",
            "| question | setting | none | DeltaMem | best other system | DeltaMem − none |",
            "|---|---|---|---|---|---|", *head]
    out += ["", "## How to read the tables", "", PREAMBLE.format(over=over),
            "Each table's commands make its runs; `python scripts/results.py --digest RUN_DIR…` "
            "then writes their digests.", ""]
    for q in manifest.question:
        out += [f"## {q.title}", "", q.reading.strip(), ""]
        titles = {o.id: o.title for o in manifest.question}
        if q.see:
            out += ["Tables: " + ", ".join(f"[{titles[i]}](#{slug(titles[i])})" for i in q.see)
                    + ".", ""]
        groups = _question_runs(q, records)
        if not groups:
            if not q.see:
                out += ["No current run answers this yet.", ""]
            continue
        if q.plot:
            out += [f"![{q.title}: success with 95 % intervals]"
                    f"({manifest.plots}/{_plot_name(q)})", ""]
        for name, runs in groups.items():
            if name:
                out += [f"### {name}", ""]
            out += tables(runs, q.expect, versus=q.versus, level=4 if name else 3,
                          blocks=q.blocks, provenance=True)
    return "\n".join(out).rstrip() + "\n"


def draw_plots(manifest: Manifest, records: dict[str, RunRecord], plot_dir: Path) -> list[Path]:
    """For each question with ``plot``: success with its 95 % bootstrap interval (over games)
    per run and phase, one horizontal bar per row, written as ``plot_dir/ID.png``. Needs
    matplotlib (:func:`deltamem.analysis.plotting.figure_class`)."""
    from deltamem.analysis.plotting import figure_class

    written = []
    for q in manifest.question:
        if not q.plot or not q.runs:
            continue
        bars = []
        order = {m: i for i, m in enumerate(q.expect)}
        shown = [r for rs in _question_runs(q, records).values() for r in rs]
        several = len({r.cfg.env for r in shown}) > 1
        for rec in sorted(shown, key=lambda r: (order.get(r.cfg.memory, 99), r.cfg.memory)):
            for ph in EVAL_PHASES:
                if rec.phase(ph):
                    per = list(per_game(rec.phase(ph)).values())
                    lo, hi = bootstrap_ci(per)
                    name = (rec.label or rec.cfg.memory) + (f", {rec.cfg.env}" if several
                                                            else "")
                    bars.append((f"{name} ({ph})", sum(per) / len(per), lo, hi,
                                 rec.cfg.memory == q.versus))
        fig = figure_class()(figsize=(7, 0.9 + 0.35 * len(bars)))
        ax = fig.subplots()
        ys = list(range(len(bars)))[::-1]
        means = [b[1] * 100 for b in bars]
        for y, m, b in zip(ys, means, bars, strict=True):  # `versus` (DeltaMem) stands out
            ax.errorbar([m], [y], xerr=[[m - b[2] * 100], [b[3] * 100 - m]], fmt="o",
                        capsize=3, color="tab:red" if b[4] else "tab:blue")
        ax.set_yticks(ys, [b[0] for b in bars], fontsize=8)
        ax.set_xlim(-5, 105)
        ax.set_xlabel("success (%), 95 % bootstrap interval over games")
        ax.set_title(q.title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        plot_dir.mkdir(parents=True, exist_ok=True)
        target = plot_dir / _plot_name(q)
        fig.savefig(target, dpi=100)
        written.append(target)
    return written
