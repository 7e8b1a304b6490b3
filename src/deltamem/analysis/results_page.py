"""The results page: one table per setting from finished run directories (``docs/results.md``).

Runs are grouped by setting (environment, evaluation split and seed, model, agent guide);
within a group, one row per memory system and evaluation phase: success and reward with 95 %
bootstrap intervals, the success difference to ``none`` in the same phase (paired by task
when both played the same games), LLM tokens and wall time per episode, and the bank size;
where the run kept ``trajectories.jsonl``, the mean steps of won episodes and the mean search
steps (steps before the goal's object was first picked up, over the episodes where it was,
with their count). The command that reproduces each run is rebuilt from its ``config.json``.
Systems named by ``expect`` with no run in a group are listed as missing, so the page says
what was not measured. A run that played each game several times (``attempts``) counts
per game: success and reward are a game's mean over its attempts, intervals and paired
differences are over games.

The tables are drawn from :class:`~deltamem.analysis.run_digest.RunRecord` s, read from run
directories or from their committed digests: :func:`tables` draws the tables of any records
(``deltamem.analysis.results_manifest`` uses it for each question of ``docs/results.md``);
:func:`build` is the page of a list of run directories (``deltamem sweep`` writes it for the
cells of a sweep; ``python scripts/results.py RUN_DIR…``), and :func:`splice` puts one named
section into an existing page.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from deltamem.analysis.run_digest import EVAL_PHASES, RunRecord, from_run_dir, model_settings
from deltamem.bench.config import RunConfig
from deltamem.bench.gain import Gain, gain
from deltamem.bench.results import per_game
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import ConfigError

__all__ = ["EVAL_PHASES", "PREAMBLE", "build", "command", "group_key", "paired", "splice",
           "tables"]

#: what every table's columns mean, said once at the top of a page
PREAMBLE = (
    "Success and reward in %, with 95 % percentile-bootstrap intervals {over}\n"
    "Δ vs none: the success difference to no memory in the same phase (a `none` run's\n"
    "frozen phase stands for its unfrozen one: it learns nothing), paired by task\n"
    "(the same games in the same order), with its 95 % bootstrap interval. A `none`\n"
    "run recalls nothing, so the agent's guide changes nothing for it: it is the\n"
    "baseline of every guide's table in its setting.")

#: kept for callers of the old name
_model_settings = model_settings


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(values: list[float]) -> str:
    lo, hi = bootstrap_ci(values)
    return f"[{_pct(lo)}, {_pct(hi)}]"




_ON_COMMAND_LINE = frozenset({
    "run_dir", "env", "split", "memory", "llm", "episodes", "seed", "embedder", "protocol",
    "train_agent", "train_episodes", "constrained", "guide", "repeat_limit", "max_steps",
    "memory_options", "env_options", "eval_modes", "init_bank", "frozen", "llm_options",
    "temperature", "attempts"})


def _episodes(rows: list[dict[str, Any]]) -> str:
    """The episode count, with games x attempts when games were played more than once."""
    games = len({r["task_id"] for r in rows})
    return str(len(rows)) if games == len(rows) else f"{len(rows)} ({games} games)"


def _won_steps(rows: list[dict[str, Any]]) -> str:
    """Mean steps of the won episodes."""
    won = [r["steps"] for r in rows if r["success"]]
    return f"{sum(won) / len(won):.1f}" if won else "-"


def _search(rec: RunRecord, rows: list[dict[str, Any]]) -> str:
    """Mean steps before the goal's object was first picked up, over the episodes where it
    was (``deltamem.analysis.trajectories.search_steps``), and in how many it was."""
    if not rec.trajectories or not rows:
        return "-"
    found = [r["search"] for r in rows if r.get("search") is not None]
    mean = f"{sum(found) / len(found):.1f}" if found else "-"
    return f"{mean} ({len(found)}/{len(rows)})"


def command(cfg: RunConfig) -> str:
    """The ``deltamem run`` command line that reproduces ``cfg``."""
    d = RunConfig.model_fields
    parts = ["python -m deltamem run", f"--run-dir {cfg.run_dir}", f"--env {cfg.env}",
             f"--split {cfg.split}", f"--memory {cfg.memory}", f"--llm {cfg.llm}"]
    if cfg.episodes is not None:
        parts.append(f"--episodes {cfg.episodes}")
    if cfg.seed != d["seed"].default:
        parts.append(f"--seed {cfg.seed}")
    if cfg.embedder:
        parts.append(f"--embedder {cfg.embedder}")
    if cfg.protocol != "online":
        parts.append(f"--protocol {cfg.protocol}")
        if cfg.train_agent:
            parts.append(f"--train-agent {cfg.train_agent}")
        if cfg.train_episodes:
            parts.append(f"--train-episodes {cfg.train_episodes}")
    parts.append("--constrained" if cfg.constrained else "--free")
    if cfg.guide != "off":
        parts.append(f"--guide {cfg.guide}")
    if cfg.repeat_limit:
        parts.append(f"--repeat-limit {cfg.repeat_limit}")
    if cfg.max_steps:
        parts.append(f"--max-steps {cfg.max_steps}")
    if cfg.temperature:
        parts.append(f"--temperature {cfg.temperature}")
    if cfg.attempts != 1:
        parts.append(f"--attempts {cfg.attempts}")
    parts += [f"-o {k}={json.dumps(v)}" for k, v in sorted(cfg.memory_options.items())]
    parts += [f"-e {k}={json.dumps(v)}" for k, v in sorted(cfg.env_options.items())]
    extra = []
    if cfg.protocol == "train-to-test" and tuple(cfg.eval_modes) != ("frozen", "unfrozen"):
        extra.append(f"eval_modes = {json.dumps(list(cfg.eval_modes))}")
    if cfg.init_bank is not None:
        extra.append(f"init_bank = {json.dumps(str(cfg.init_bank))}")
    if cfg.frozen:
        extra.append("frozen = true")
    if cfg.llm_options:
        opts = ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(cfg.llm_options.items()))
        extra.append(f"llm_options = {{ {opts} }}")
    # every other setting that differs from its default (history_chars, extractor, ...)
    for name, field in d.items():
        if name in _ON_COMMAND_LINE or field.is_required():
            continue
        value = getattr(cfg, name)
        default = field.get_default(call_default_factory=True)
        if value != default and value is not None:
            extra.append(f"{name} = {json.dumps(value, default=str)}")
    text = " ".join(parts)
    return text + (f"   # in a TOML file: {'; '.join(extra)}" if extra else "")




def _built_by(cfg: RunConfig) -> str:
    if cfg.memory == "none":
        return "-"
    if cfg.protocol == "train-to-test":
        return f"{cfg.train_agent or 'react'} x {cfg.train_episodes or 'all'} ({cfg.train_split})"
    if cfg.init_bank is not None:
        return f"given bank {cfg.init_bank}" + (" (frozen)" if cfg.frozen else "")
    return "online, learns while evaluated"


def group_key(cfg: RunConfig) -> tuple[str, ...]:
    """The setting a run's table is grouped by: environment, split, seed, model, guide."""
    return (cfg.env, cfg.split, str(cfg.seed), cfg.llm, cfg.guide)


def _labels(runs: list[RunRecord]) -> dict[str, str]:
    """Each run's row name by run name: its label when it has one, else its memory, plus
    its run's name when two runs of a table have the same memory (e.g. two agent
    versions)."""
    count: dict[str, int] = defaultdict(int)
    for rec in runs:
        count[rec.cfg.memory] += 1
    return {rec.name: rec.label or (rec.cfg.memory if count[rec.cfg.memory] == 1
                                    else f"{rec.cfg.memory} ({rec.name})") for rec in runs}


def _interval(g: Gain) -> str:
    return (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, {g.high * 100:+.1f}]"
            + (" *" if g.excludes_zero else ""))


def paired(a: dict[str, float], b: dict[str, float]) -> tuple[int, Gain] | None:
    """``b − a`` on the games both played (per game values, as
    :func:`deltamem.bench.results.per_game` gives them): (games, the paired gain), or
    ``None`` when they share no game."""
    ids = [t for t in a if t in b]
    if not ids:
        return None
    return len(ids), gain([a[t] for t in ids], [b[t] for t in ids], ids_a=ids, ids_b=ids)


def _versus(runs: list[RunRecord], mine: str) -> list[str]:
    """One line per (other memory, phase): ``mine`` minus the other's success, paired by task.

    Where the environment scores partial progress (a reward that is not the success, as
    ScienceWorld's 0-100 score), each line also gives the paired score difference, and the
    lines include ``none``: the table's "Δ vs none" column pairs success only."""
    label = _labels(runs)
    partial = any(float(r["reward"]) != float(r["success"])
                  for rec in runs for r in rec.rows)
    lines = []
    for m in runs:
        if m.cfg.memory != mine:
            continue
        for o in runs:
            if (o.cfg.memory == "none" and not partial) or o.name == m.name or (
                    o.cfg.memory == mine and o.name < m.name):
                continue  # two runs of `mine`: one line, not one each way
            for ph in EVAL_PHASES:
                got = paired(per_game(o.phase(ph)), per_game(m.phase(ph)))
                if got is None:
                    continue
                n, g = got
                line = f"* {label[m.name]} − {label[o.name]} ({ph}, {n} games): "
                if partial:
                    s = paired(per_game(o.phase(ph), "reward"), per_game(m.phase(ph), "reward"))
                    assert s is not None
                    line += f"success {_interval(g)}; score {_interval(s[1])}"
                else:
                    line += _interval(g)
                lines.append(line)
    return lines


def _within(runs: list[RunRecord], versus: str) -> list[str]:
    """Paired differences the DeltaMem lines do not give: each run's unfrozen minus its
    frozen phase (Table 2: what learning from its own play did), and two runs of the same
    memory (e.g. two agent versions, or an option on and off) against each other."""
    label = _labels(runs)
    lines = []
    for rec in runs:
        got = paired(per_game(rec.phase("frozen")), per_game(rec.phase("unfrozen")))
        if got is not None:
            lines.append(f"* {label[rec.name]}: unfrozen − frozen ({got[0]} games): "
                         f"{_interval(got[1])}")
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if a.cfg.memory != b.cfg.memory or a.cfg.memory in (versus, "none"):
                continue
            for ph in EVAL_PHASES:
                got = paired(per_game(a.phase(ph)), per_game(b.phase(ph)))
                if got is not None:
                    lines.append(f"* {label[b.name]} − {label[a.name]} ({ph}, {got[0]} games): "
                                 f"{_interval(got[1])}")
    return lines


def _curves(runs: list[RunRecord], size: int, label: dict[str, str], plot: Path | None,
            key: tuple[str, ...]) -> list[str]:
    """Success per block of ``size`` consecutive evaluation games (learning curves), one
    row per run and phase; with ``plot``, the curves as a PNG beside it (one per group)."""
    curves: list[tuple[str, list[float]]] = []
    for rec in runs:
        for ph in EVAL_PHASES:
            rows = sorted(rec.phase(ph), key=lambda r: r["position"])
            if len(rows) < size:
                continue
            n = len(rows) // size
            curves.append((f"{label[rec.name]} ({ph})",
                           [sum(float(r["success"]) for r in rows[b * size:(b + 1) * size])
                            / size for b in range(n)]))
    if not curves:
        return []
    width = max(len(c) for _, c in curves)
    out = [f"Success (%) per block of {size} games, in the order played:", "",
           "| run (phase) | " + " | ".join(f"{b * size + 1}–{(b + 1) * size}"
                                        for b in range(width)) + " |",
           "|---|" + "---|" * width]
    for name, c in curves:
        out.append(f"| {name} | " + " | ".join(_pct(x) for x in c)
                   + " |" + " - |" * (width - len(c)))
    if plot is not None:
        from deltamem.analysis.plotting import figure_class

        fig = figure_class()(figsize=(7, 4))
        ax = fig.subplots()
        for name, c in curves:
            ax.plot([(b + 1) * size for b in range(len(c))], [x * 100 for x in c],
                    marker="o", label=name)
        ax.set_xlabel("games played")
        ax.set_ylabel(f"success per block of {size} (%)")
        ax.set_ylim(-5, 105)
        ax.set_title(" / ".join(key[:4]), fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        target = plot.with_name(f"{plot.stem}-{'-'.join(key[:3])}{plot.suffix}")
        fig.savefig(target, dpi=110)
        out += ["", f"![learning curves]({target.name})"]
    return out


def _tokens_k(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _costs(runs: list[RunRecord]) -> list[str]:
    """One line per run that recorded its cost: tokens in/out per purpose, and the money."""
    label = _labels(runs)
    out = []
    for rec in runs:
        c = rec.cost
        if not c or not c.get("by_purpose"):
            continue
        parts = [f"{p} {_tokens_k(v['input_tokens'])} in / {_tokens_k(v['output_tokens'])} "
                 f"out ({v['calls']} calls)" for p, v in sorted(c["by_purpose"].items())]
        money = (f"{c['money']:.4g} {c.get('currency') or ''}".rstrip()
                 if c.get("money") is not None else "no price for this model")
        out.append(f"* {label[rec.name]}: {'; '.join(parts)}; money: {money}")
    return out


def _with_none_baseline(groups: dict[tuple[str, ...], list[RunRecord]]) -> None:
    """No memory, nothing recalled: the agent's guide changes nothing, so a `none` run is the
    baseline of every guide's group in its setting (added to groups that lack one)."""
    for key, runs in groups.items():
        if not any(rec.cfg.memory == "none" for rec in runs):
            runs[:0] = [r for k, rs in groups.items() if k[:4] == key[:4] and k != key
                        for r in rs if r.cfg.memory == "none"][:1]


def _table(runs: list[RunRecord], expect: list[str]) -> list[str]:
    """The group's table: one row per run and evaluation phase."""
    out = ["| memory | bank built by | phase | episodes | success | 95% CI | Δ vs none | "
           "reward | steps (won) | search steps | tokens/ep | wall s/ep | bank units |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base: dict[str, dict[str, float]] = {}
    for rec in runs:
        if rec.cfg.memory == "none":
            for ph in EVAL_PHASES:
                if rec.phase(ph):
                    base[ph] = per_game(rec.phase(ph))
    # no memory learns nothing, so its frozen and unfrozen phases are the same games
    # played the same way: either is the baseline of both train-to-test phases
    for a, b in (("frozen", "unfrozen"), ("unfrozen", "frozen")):
        if a not in base and b in base:
            base[a] = base[b]
    order = {m: i for i, m in enumerate(expect)}
    label = _labels(runs)
    for rec in sorted(runs, key=lambda x: (order.get(x.cfg.memory, 99), x.cfg.memory)):
        for ph in EVAL_PHASES:
            rows = rec.phase(ph)
            if not rows:
                continue
            # per game (the mean of its attempts): the interval is over games
            mine = per_game(rows)
            wins = list(mine.values())
            rewards = list(per_game(rows, "reward").values())
            delta = "-"
            if rec.cfg.memory != "none" and ph in base:
                got = paired(base[ph], mine)
                if got is not None:  # paired on the games both runs finished
                    delta = _interval(got[1]) + (f" (on {got[0]})" if got[0] != len(mine)
                                                 else "")
            out.append(
                f"| {label[rec.name]} | {_built_by(rec.cfg)} | {ph} | {_episodes(rows)} | "
                f"{_pct(sum(wins) / len(wins))} | {_ci(wins)} | {delta} | "
                f"{_pct(sum(rewards) / len(rewards))} | {_won_steps(rows)} | "
                f"{_search(rec, rows)} | {sum(r['tokens'] for r in rows) / len(rows):.0f} | "
                f"{sum(float(r['wall_s']) for r in rows) / len(rows):.1f} | "
                f"{rows[-1]['bank_units']} |")
    return out


def tables(runs: list[RunRecord], expect: list[str], *, versus: str = "deltamem",
           blocks: int = 0, plot: Path | None = None, level: int = 2,
           title: bool = True, provenance: bool = False) -> list[str]:
    """The tables of ``runs``, one per setting (:func:`group_key`), as Markdown lines: a
    heading of ``level`` (with ``title``), what acted, the table, ``versus`` against each
    other memory and the other paired differences, the systems of ``expect`` not measured,
    optional learning curves per block of ``blocks`` games, and the commands; with
    ``provenance``, when and at which commit the runs were played."""
    groups: dict[tuple[str, ...], list[RunRecord]] = defaultdict(list)
    for rec in runs:
        groups[group_key(rec.cfg)].append(rec)
    _with_none_baseline(groups)
    out: list[str] = []
    for key, group in groups.items():
        env, split, seed, llm, guide = key
        embedders = sorted({rec.cfg.embedder for rec in group if rec.cfg.embedder})
        settings = sorted({rec.model for rec in group if rec.model})
        recorded = (f" Model settings recorded with the runs: {'; '.join(settings)}."
                    if settings else "")
        played = sorted({f"{rec.date or 'an unrecorded day'} at "
                         f"{'`' + rec.commit + '`' if rec.commit else 'an unrecorded commit'}"
                         for rec in group})
        if provenance:
            recorded += f" Played {', '.join(played)}."
        if title:
            out += [f"{'#' * level} {env}, split `{split}`, evaluation seed {seed}, "
                    f"model `{llm}`", ""]
        out += [f"Acting model: `{llm}`, agent guide `{guide}`, "
                f"embedder {', '.join(f'`{e}`' for e in embedders) or '-'} (memory options "
                f"per run: see the commands).{recorded}", ""]
        out += _table(group, expect)
        out += ["", "`*`: the interval of the difference excludes 0."]
        pairs = _versus(group, versus)
        if pairs:
            name = "DeltaMem" if versus == "deltamem" else f"`{versus}`"
            out += ["", f"{name} against each other memory, same phase, paired on the games "
                    "both played:", "", *pairs]
        within = _within(group, versus)
        if within:
            out += ["", "Other paired differences (same games):", "", *within]
        present = {rec.cfg.memory for rec in group}
        missing = [m for m in expect if m not in present]
        if missing:
            out += ["", f"Not measured in this setting: {', '.join(missing)}."]
        if blocks:
            out += ["", *_curves(group, blocks, _labels(group), plot, key)]
        costs = _costs(group)
        if costs:
            out += ["", "What the runs cost (every phase, build included; tokens as the "
                    "acting model's client counted them):", "", *costs]
        out += ["", "Commands:", "", "```bash"]
        out += [rec.command or command(rec.cfg) for rec in group]
        out += ["```", ""]
    return out


def build(run_dirs: list[Path], expect: list[str], note: str, *,
          versus: str = "deltamem", blocks: int = 0, plot: Path | None = None,
          generator: str = "python scripts/results.py") -> str:
    """The page for ``run_dirs`` (see the module doc); ``generator`` names the command that
    wrote it, in its first line. Directories without ``config.json`` or ``episodes.jsonl``
    are listed as skipped."""
    runs, skipped = [], []
    for d in run_dirs:
        try:
            runs.append(from_run_dir(d))
        except ConfigError:
            skipped.append(str(d))
    names = [rec.name for rec in runs]
    if len(set(names)) != len(names):  # runs/a/x and runs/b/x: named by their paths
        runs = [replace(rec, name=str(rec.cfg.run_dir)) for rec in runs]
    over = ("over games (a game played in several attempts counts as the mean of its "
            "attempts);" if any(rec.cfg.attempts > 1 for rec in runs) else "over episodes;")
    out = ["# Results", "",
           f"Generated by `{generator}` from run directories; do not edit by hand.",
           PREAMBLE.format(over=over), ""]
    if note:
        out += [note, ""]
    out += tables(runs, expect, versus=versus, blocks=blocks, plot=plot)
    if skipped:
        out += ["Skipped (no config.json or episodes.jsonl): " + ", ".join(skipped), ""]
    return "\n".join(out).rstrip() + "\n"


def splice(existing: str, title: str, generated: str) -> str:
    """``existing`` with the section ``title`` replaced by ``generated`` (appended when the
    file has no such section). The generated page's headings move one level down under a
    ``## title`` heading; the section is delimited by HTML comments naming it."""
    start, end = f"<!-- section: {title} -->", f"<!-- end of section: {title} -->"
    body = []
    for line in generated.splitlines():
        if line.startswith("# Results"):
            line = f"## {title}"
        elif line.startswith("#"):
            line = "#" + line
        body.append(line)
    block = "\n".join([start, *body, end])
    if start in existing and end in existing:
        head, rest = existing.split(start, 1)
        return head + block + rest.split(end, 1)[1]
    return existing.rstrip() + "\n\n" + block + "\n"
