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

``python scripts/results.py`` writes ``docs/results.md`` with :func:`build` (and
:func:`splice` for one named section); ``deltamem sweep`` writes the same page for the cells
of a sweep.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from deltamem.analysis.trajectories import search_steps
from deltamem.bench import read_episodes
from deltamem.bench.config import RunConfig
from deltamem.bench.gain import Gain, gain
from deltamem.bench.results import per_game, read_trajectories
from deltamem.bench.stats import bootstrap_ci

__all__ = ["EVAL_PHASES", "build", "command", "splice"]

EVAL_PHASES = ("online", "frozen", "unfrozen")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(values: list[float]) -> str:
    lo, hi = bootstrap_ci(values)
    return f"[{_pct(lo)}, {_pct(hi)}]"


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


def _search(cfg: RunConfig, rows: list[dict[str, Any]]) -> str:
    """Mean steps before the goal's object was first picked up, over the episodes where it
    was (``deltamem.analysis.trajectories.search_steps``), and in how many it was."""
    trajs = read_trajectories(cfg.run_dir)
    found = []
    for r in rows:
        t = trajs.get(r["index"])
        if t is not None:
            n = search_steps(t["goal"], [s[0] for s in t["steps"] if s[2]])
            if n is not None:
                found.append(n)
    if not trajs or not rows:
        return "-"
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


def _model_settings(run_dir: Path) -> str | None:
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


def _built_by(cfg: RunConfig) -> str:
    if cfg.memory == "none":
        return "-"
    if cfg.protocol == "train-to-test":
        return f"{cfg.train_agent or 'react'} x {cfg.train_episodes or 'all'} ({cfg.train_split})"
    if cfg.init_bank is not None:
        return f"given bank {cfg.init_bank}" + (" (frozen)" if cfg.frozen else "")
    return "online, learns while evaluated"


def _group_key(cfg: RunConfig) -> tuple[str, ...]:
    return (cfg.env, cfg.split, str(cfg.seed), cfg.llm, cfg.guide)


def _labels(runs: list[tuple[RunConfig, list[dict[str, Any]]]]) -> dict[Path, str]:
    """Each run's row name: its memory, plus its run directory's name when two runs of a
    setting have the same memory (e.g. two agent versions)."""
    count: dict[str, int] = defaultdict(int)
    for cfg, _ in runs:
        count[cfg.memory] += 1
    return {cfg.run_dir: cfg.memory if count[cfg.memory] == 1
            else f"{cfg.memory} ({cfg.run_dir.name})" for cfg, _ in runs}


def _versus(runs: list[tuple[RunConfig, list[dict[str, Any]]]], mine: str) -> list[str]:
    """One line per (other memory, phase): ``mine`` minus the other's success, paired by task.

    Where the environment scores partial progress (a reward that is not the success, as
    ScienceWorld's 0-100 score), each line also gives the paired score difference, and the
    lines include ``none``: the table's "Δ vs none" column pairs success only."""
    label = _labels(runs)
    def outcomes(recs: list[dict[str, Any]], ph: str, key: str = "success") -> dict[str, float]:
        return per_game([r for r in recs if r["phase"] == ph], key)

    partial = any(float(r.get("reward", r["success"])) != float(r["success"])
                  for _, recs in runs for r in recs if r["phase"] in EVAL_PHASES)

    def interval(g: Gain) -> str:
        return (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, {g.high * 100:+.1f}]"
                + (" *" if g.excludes_zero else ""))

    lines = []
    for cfg_m, recs_m in runs:
        if cfg_m.memory != mine:
            continue
        for cfg, recs in runs:
            if (cfg.memory == "none" and not partial) or cfg.run_dir == cfg_m.run_dir or (
                    cfg.memory == mine and str(cfg.run_dir) < str(cfg_m.run_dir)):
                continue  # two runs of `mine`: one line, not one each way
            for ph in EVAL_PHASES:
                a, b = outcomes(recs, ph), outcomes(recs_m, ph)
                ids = [t for t in a if t in b]
                if not ids:
                    continue
                g = gain([a[t] for t in ids], [b[t] for t in ids], ids_a=ids, ids_b=ids)
                line = (f"* {label[cfg_m.run_dir]} − {label[cfg.run_dir]} ({ph}, "
                        f"{len(ids)} games): ")
                if partial:
                    ra, rb = outcomes(recs, ph, "reward"), outcomes(recs_m, ph, "reward")
                    s = gain([ra[t] for t in ids], [rb[t] for t in ids], ids_a=ids, ids_b=ids)
                    line += f"success {interval(g)}; score {interval(s)}"
                else:
                    line += interval(g)
                lines.append(line)
    return lines


def _paired(a: dict[str, float], b: dict[str, float]) -> tuple[int, str] | None:
    """``b − a`` on the games both played: (games, "Δ [low, high]" with a star)."""
    ids = [t for t in a if t in b]
    if not ids:
        return None
    g = gain([a[t] for t in ids], [b[t] for t in ids], ids_a=ids, ids_b=ids)
    return len(ids), (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, {g.high * 100:+.1f}]"
                      + (" *" if g.excludes_zero else ""))


def _within(runs: list[tuple[RunConfig, list[dict[str, Any]]]], versus: str) -> list[str]:
    """Paired differences the DeltaMem lines do not give: each run's unfrozen minus its
    frozen phase (Table 2: what learning from its own play did), and two runs of the same
    memory (e.g. two agent versions, or an option on and off) against each other."""
    label = _labels(runs)

    def outcomes(recs: list[dict[str, Any]], ph: str) -> dict[str, float]:
        return per_game([r for r in recs if r["phase"] == ph])

    lines = []
    for cfg, recs in runs:
        got = _paired(outcomes(recs, "frozen"), outcomes(recs, "unfrozen"))
        if got is not None:
            lines.append(f"* {label[cfg.run_dir]}: unfrozen − frozen ({got[0]} games): {got[1]}")
    for i, (cfg_a, recs_a) in enumerate(runs):
        for cfg_b, recs_b in runs[i + 1:]:
            if cfg_a.memory != cfg_b.memory or cfg_a.memory in (versus, "none"):
                continue
            for ph in EVAL_PHASES:
                got = _paired(outcomes(recs_a, ph), outcomes(recs_b, ph))
                if got is not None:
                    lines.append(f"* {label[cfg_b.run_dir]} − {label[cfg_a.run_dir]} ({ph}, "
                                 f"{got[0]} games): {got[1]}")
    return lines


def _curves(runs: list[tuple[RunConfig, list[dict[str, Any]]]], size: int,
            label: dict[Path, str], plot: Path | None, key: tuple[str, ...]) -> list[str]:
    """Success per block of ``size`` consecutive evaluation games (learning curves), one
    row per run and phase; with ``plot``, the curves as a PNG beside it (one per group)."""
    curves: list[tuple[str, list[float]]] = []
    for cfg, recs in runs:
        for ph in EVAL_PHASES:
            rows = sorted((r for r in recs if r["phase"] == ph), key=lambda r: r["position"])
            if len(rows) < size:
                continue
            n = len(rows) // size
            curves.append((f"{label[cfg.run_dir]} ({ph})",
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
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
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
        plt.close(fig)
        out += ["", f"![learning curves]({target.name})"]
    return out


def build(run_dirs: list[Path], expect: list[str], note: str, *,
          versus: str = "deltamem", blocks: int = 0, plot: Path | None = None,
          generator: str = "python scripts/results.py") -> str:
    """The page for ``run_dirs`` (see the module doc); ``generator`` names the command that
    wrote it, in its first line. Directories without ``config.json`` or ``episodes.jsonl``
    are listed as skipped."""
    groups: dict[tuple[str, ...], list[tuple[RunConfig, list[dict[str, Any]]]]] = defaultdict(list)
    skipped = []
    for d in run_dirs:
        if not (d / "config.json").exists() or not (d / "episodes.jsonl").exists():
            skipped.append(str(d))
            continue
        cfg = RunConfig.from_json_file(d / "config.json")
        if Path(cfg.run_dir) != d:  # moved or read from elsewhere: where it is now
            cfg = cfg.model_copy(update={"run_dir": d})
        groups[_group_key(cfg)].append((cfg, read_episodes(d / "episodes.jsonl")))
    # no memory, nothing recalled: the agent's guide changes nothing, so a `none` run is the
    # baseline of every guide's group in its setting
    for key, runs in groups.items():
        if not any(cfg.memory == "none" for cfg, _ in runs):
            runs[:0] = [r for k, rs in groups.items() if k[:4] == key[:4] and k != key
                        for r in rs if r[0].memory == "none"][:1]
    over = ("over games (a game played in several attempts counts as the mean of its "
            "attempts);" if any(cfg.attempts > 1 for rs in groups.values() for cfg, _ in rs)
            else "over episodes;")
    out = ["# Results", "",
           f"Generated by `{generator}` from run directories; do not edit by hand.",
           f"Success and reward in %, with 95 % percentile-bootstrap intervals {over}",
           "Δ vs none: the success difference to no memory in the same phase (a `none` run's",
           "frozen phase stands for its unfrozen one: it learns nothing), paired by task",
           "(the same games in the same order), with its 95 % bootstrap interval. A `none`",
           "run recalls nothing, so the agent's guide changes nothing for it: it is the",
           "baseline of every guide's table in its setting.", ""]
    if note:
        out += [note, ""]
    for key, runs in groups.items():
        env, split, seed, llm, guide = key
        embedders = sorted({cfg.embedder for cfg, _ in runs if cfg.embedder})
        settings = sorted({m for cfg, _ in runs if (m := _model_settings(Path(cfg.run_dir)))})
        recorded = (f" Model settings recorded with the runs: {'; '.join(settings)}."
                    if settings else "")
        out += [f"## {env}, split `{split}`, evaluation seed {seed}, model `{llm}`", "",
                f"Acting model: `{llm}`, agent guide `{guide}`, "
                f"embedder {', '.join(f'`{e}`' for e in embedders) or '-'} (memory options "
                f"per run: see the commands).{recorded}", ""]
        out += ["| memory | bank built by | phase | episodes | success | 95% CI | Δ vs none | "
                "reward | steps (won) | search steps | tokens/ep | wall s/ep | bank units |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        base: dict[str, tuple[list[str], list[float]]] = {}
        for cfg, recs in runs:
            if cfg.memory == "none":
                for ph in EVAL_PHASES:
                    rows = [r for r in recs if r["phase"] == ph]
                    if rows:
                        per = per_game(rows)
                        base[ph] = (list(per), list(per.values()))
        # no memory learns nothing, so its frozen and unfrozen phases are the same games
        # played the same way: either is the baseline of both train-to-test phases
        for a, b in (("frozen", "unfrozen"), ("unfrozen", "frozen")):
            if a not in base and b in base:
                base[a] = base[b]
        order = {m: i for i, m in enumerate(expect)}
        label = _labels(runs)
        for cfg, recs in sorted(runs, key=lambda x: (order.get(x[0].memory, 99), x[0].memory)):
            for ph in EVAL_PHASES:
                rows = [r for r in recs if r["phase"] == ph]
                if not rows:
                    continue
                # per game (the mean of its attempts): the interval is over games
                mine = per_game(rows)
                wins = list(mine.values())
                rewards = list(per_game(rows, "reward").values())
                delta = "-"
                if cfg.memory != "none" and ph in base:
                    both = [(t, w) for t, w in zip(*base[ph], strict=True) if t in mine]
                    if both:  # paired on the games both runs finished
                        ids = [t for t, _ in both]
                        g = gain([w for _, w in both], [mine[t] for t in ids], ids_a=ids,
                                 ids_b=ids)
                        delta = (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, "
                                 f"{g.high * 100:+.1f}]" + (" *" if g.excludes_zero else "")
                                 + (f" (on {len(ids)})" if len(ids) != len(mine) else ""))
                out.append(
                    f"| {label[cfg.run_dir]} | {_built_by(cfg)} | {ph} | {_episodes(rows)} | "
                    f"{_pct(sum(wins) / len(wins))} | "
                    f"{_ci(wins)} | {delta} | {_pct(sum(rewards) / len(rewards))} | "
                    f"{_won_steps(rows)} | {_search(cfg, rows)} | "
                    f"{sum(map(_tokens, rows)) / len(rows):.0f} | "
                    f"{sum(float(r.get('wall_s', 0)) for r in rows) / len(rows):.1f} | "
                    f"{_bank_units(rows[-1])} |")
        present = {cfg.memory for cfg, _ in runs}
        missing = [m for m in expect if m not in present]
        out.append("")
        out.append("`*`: the interval of the difference excludes 0.")
        pairs = _versus(runs, versus)
        if pairs:
            name = "DeltaMem" if versus == "deltamem" else f"`{versus}`"
            out += ["", f"{name} against each other memory, same phase, paired on the games "
                    "both played:", "", *pairs]
        within = _within(runs, versus)
        if within:
            out += ["", "Other paired differences (same games):", "", *within]
        if missing:
            out.append(f"Not measured in this setting: {', '.join(missing)}.")
        if blocks:
            out += ["", *_curves(runs, blocks, label, plot, key)]
        out += ["", "Commands:", "", "```bash"]
        out += [command(cfg) for cfg, _ in runs]
        out += ["```", ""]
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
