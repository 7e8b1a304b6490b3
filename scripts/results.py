"""Write docs/results.md from finished run directories (the only way that file is made).

    python scripts/results.py runs/results/*/ [--out docs/results.md] \
        [--expect none,synapse,awm,reasoningbank,deltamem] [--note "text"]

Every run directory holds ``config.json`` and ``episodes.jsonl`` (deltamem.bench). Runs
are grouped by setting (environment, evaluation split and seed, how the bank was built,
model, agent guide); within a group, one row per memory system and evaluation phase:
success and reward with 95 % bootstrap intervals, the success difference to ``none``
in the same phase (paired by task when both played the same games), LLM tokens and
wall time per episode, and the bank size. The command that reproduces each run is
rebuilt from its ``config.json``. Systems named by ``--expect`` with no run in a
group are listed as missing, so the page says what was not measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from deltamem.bench import read_episodes
from deltamem.bench.config import RunConfig
from deltamem.bench.gain import gain
from deltamem.bench.stats import bootstrap_ci

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
    if cfg.max_listed_actions != RunConfig.model_fields["max_listed_actions"].default:
        extra.append(f"max_listed_actions = {cfg.max_listed_actions}")
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
    """One line per (other memory, phase): ``mine`` minus the other's success, paired by task."""
    label = _labels(runs)
    def outcomes(recs: list[dict[str, Any]], ph: str) -> dict[str, float]:
        return {r["task_id"]: float(r["success"]) for r in recs if r["phase"] == ph}

    lines = []
    for cfg_m, recs_m in runs:
        if cfg_m.memory != mine:
            continue
        for cfg, recs in runs:
            if cfg.memory == "none" or cfg.run_dir == cfg_m.run_dir or (
                    cfg.memory == mine and str(cfg.run_dir) < str(cfg_m.run_dir)):
                continue  # two runs of `mine`: one line, not one each way
            for ph in EVAL_PHASES:
                a, b = outcomes(recs, ph), outcomes(recs_m, ph)
                ids = [t for t in a if t in b]
                if not ids:
                    continue
                g = gain([a[t] for t in ids], [b[t] for t in ids], ids_a=ids, ids_b=ids)
                lines.append(f"* {label[cfg_m.run_dir]} − {label[cfg.run_dir]} ({ph}, "
                             f"{len(ids)} games): "
                             f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, {g.high * 100:+.1f}]"
                             + (" *" if g.excludes_zero else ""))
    return lines


def build(run_dirs: list[Path], expect: list[str], note: str) -> str:
    groups: dict[tuple[str, ...], list[tuple[RunConfig, list[dict[str, Any]]]]] = defaultdict(list)
    skipped = []
    for d in run_dirs:
        if not (d / "config.json").exists() or not (d / "episodes.jsonl").exists():
            skipped.append(str(d))
            continue
        cfg = RunConfig.from_json_file(d / "config.json")
        groups[_group_key(cfg)].append((cfg, read_episodes(d / "episodes.jsonl")))
    # no memory, nothing recalled: the agent's guide changes nothing, so a `none` run is the
    # baseline of every guide's group in its setting
    for key, runs in groups.items():
        if not any(cfg.memory == "none" for cfg, _ in runs):
            runs[:0] = [r for k, rs in groups.items() if k[:4] == key[:4] and k != key
                        for r in rs if r[0].memory == "none"][:1]
    out = ["# Results", "",
           "Generated by `python scripts/results.py` from run directories; do not edit by hand.",
           "Success and reward in %, with 95 % percentile-bootstrap intervals over episodes;",
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
        out += [f"## {env}, split `{split}`, evaluation seed {seed}, model `{llm}`", "",
                f"Acting model: `{llm}`, agent guide `{guide}`, "
                f"embedder {', '.join(f'`{e}`' for e in embedders) or '-'} (memory options "
                "per run: see the commands).", ""]
        out += ["| memory | bank built by | phase | episodes | success | 95% CI | Δ vs none | "
                "reward | tokens/ep | wall s/ep | bank units |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        base: dict[str, tuple[list[str], list[float]]] = {}
        for cfg, recs in runs:
            if cfg.memory == "none":
                for ph in EVAL_PHASES:
                    rows = [r for r in recs if r["phase"] == ph]
                    if rows:
                        base[ph] = ([r["task_id"] for r in rows],
                                    [float(r["success"]) for r in rows])
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
                wins = [float(r["success"]) for r in rows]
                rewards = [float(r["reward"]) for r in rows]
                delta = "-"
                if cfg.memory != "none" and ph in base:
                    mine = {r["task_id"]: float(r["success"]) for r in rows}
                    both = [(t, w) for t, w in zip(*base[ph], strict=True) if t in mine]
                    if both:  # paired on the games both runs finished
                        ids = [t for t, _ in both]
                        g = gain([w for _, w in both], [mine[t] for t in ids], ids_a=ids,
                                 ids_b=ids)
                        delta = (f"{g.diff * 100:+.1f} [{g.low * 100:+.1f}, "
                                 f"{g.high * 100:+.1f}]" + (" *" if g.excludes_zero else "")
                                 + (f" (on {len(ids)})" if len(ids) != len(rows) else ""))
                out.append(
                    f"| {label[cfg.run_dir]} | {_built_by(cfg)} | {ph} | {len(rows)} | "
                    f"{_pct(sum(wins) / len(wins))} | "
                    f"{_ci(wins)} | {delta} | {_pct(sum(rewards) / len(rewards))} | "
                    f"{sum(map(_tokens, rows)) / len(rows):.0f} | "
                    f"{sum(float(r.get('wall_s', 0)) for r in rows) / len(rows):.1f} | "
                    f"{_bank_units(rows[-1])} |")
        present = {cfg.memory for cfg, _ in runs}
        missing = [m for m in expect if m not in present]
        out.append("")
        out.append("`*`: the interval of the difference excludes 0.")
        versus = _versus(runs, "deltamem")
        if versus:
            out += ["", "DeltaMem against each other memory, same phase, paired on the games "
                    "both played:", "", *versus]
        if missing:
            out.append(f"Not measured in this setting: {', '.join(missing)}.")
        out += ["", "Commands:", "", "```bash"]
        out += [command(cfg) for cfg, _ in runs]
        out += ["```", ""]
    if skipped:
        out += ["Skipped (no config.json or episodes.jsonl): " + ", ".join(skipped), ""]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--out", type=Path, default=Path("docs/results.md"))
    ap.add_argument("--expect", default="none,synapse,awm,reasoningbank,deltamem",
                    help="comma-separated memory systems each setting should have")
    ap.add_argument("--note", default="", help="a paragraph put under the title")
    args = ap.parse_args(argv)
    text = build(sorted(args.runs), [m for m in args.expect.split(",") if m], args.note)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
