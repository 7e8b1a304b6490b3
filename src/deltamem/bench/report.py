"""Render a run directory into ``report.md`` (and PNG plots when matplotlib is installed).

The report has, per phase: episodes, success rate, mean reward with a 95 %
percentile-bootstrap interval (seeded, so the same log gives the same
report), mean steps and invalid actions, LLM tokens per episode by purpose, the run's
tokens in and out per phase and purpose and their price (:mod:`deltamem.bench.cost`),
and the bank size and stats after the phase's last episode. Plots:

* ``success_rate.png``: running mean of success over the episodes of each phase;
* ``bank_size.png``: bank size (``units``/``nodes`` of ``memory.stats()``) over episodes;
* ``depth_<phase>.png``: depth histogram per tree, when the final stats carry a
  ``depth_histogram`` (``{depth: count}``, either per tree or at the top).

Without matplotlib the report says so and names the extra to install
(``pip install 'deltamem[plots]'``); everything else is still written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem.bench.config import CONFIG_FILE
from deltamem.bench.cost import PriceTable, find_price_table, run_cost, write_cost
from deltamem.bench.results import EPISODES_FILE, bank_size, per_game, read_episodes
from deltamem.bench.stats import bootstrap_ci, running_mean
from deltamem.errors import InvalidInputError

__all__ = ["REPORT_FILE", "depth_histograms", "report"]

log = logging.getLogger(__name__)

REPORT_FILE = "report.md"
MATPLOTLIB_MISSING = (
    "Plots were not drawn: matplotlib is not installed "
    "(install it with `pip install 'deltamem[plots]'`)."
)
_CONFIG_KEYS = (
    "env", "split", "seed", "episodes", "protocol", "train_split", "train_episodes", "eval_modes",
    "frozen", "init_bank", "memory", "memory_options", "llm", "llm_options", "embedder",
    "extractor", "constrained", "domain", "max_steps", "history_chars", "repeat_limit",
    "max_listed_actions", "cue_at",
)


def report(run_dir: str | Path, *, plots: bool = True, seed: int = 0, n_boot: int = 2000,
           prices: str | Path | PriceTable | None = None) -> Path:
    """Write ``report.md`` (and plots) into ``run_dir`` and return its path.

    The report's "Cost" section adds up the LLM tokens in and out per phase and purpose
    and, with a price table (``prices``: a :class:`~deltamem.bench.cost.PriceTable` or its
    TOML file; else :func:`~deltamem.bench.cost.find_price_table`), the money; the same
    figures go to ``cost.json``.

    Raises :class:`InvalidInputError` when the directory holds no recorded episode.
    """
    run_dir = Path(run_dir)
    records = read_episodes(run_dir / EPISODES_FILE)
    if not records:
        raise InvalidInputError(f"{run_dir} holds no recorded episode ({EPISODES_FILE})")
    phases = _group(records)
    lines = [f"# Run report: {run_dir.name}", ""]
    lines += _config_section(run_dir)
    lines += _results_section(phases, seed=seed, n_boot=n_boot)
    lines += _tokens_section(phases)
    table = prices if isinstance(prices, PriceTable) else find_price_table(run_dir, prices)
    cost = run_cost(records, _run_model(run_dir), table)
    write_cost(run_dir, cost)
    lines += cost.markdown()
    lines += _recall_section(phases)
    lines += _bank_section(phases)
    if plots:
        lines += ["## Plots", ""]
        try:
            from matplotlib.figure import Figure
        except ImportError:
            log.warning(MATPLOTLIB_MISSING)
            lines += [MATPLOTLIB_MISSING, ""]
        else:
            images = _plot(run_dir, phases, Figure)
            lines += [f"![{name}]({name})" for name in images] + [""]
    path = run_dir / REPORT_FILE
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path


def _run_model(run_dir: Path) -> str:
    """The run's ``llm`` spec, from its config.json (``unknown`` without one)."""
    path = run_dir / CONFIG_FILE
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("llm") or "unknown")
    except (OSError, ValueError):
        return "unknown"


def _group(records: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        out.setdefault(str(r["phase"]), []).append(r)
    return out


def _config_section(run_dir: Path) -> list[str]:
    path = run_dir / CONFIG_FILE
    if not path.exists():
        return [f"_No {CONFIG_FILE} in this run directory._", ""]
    cfg = json.loads(path.read_text(encoding="utf-8"))
    rows = [f"| {k} | `{json.dumps(cfg[k])}` |" for k in _CONFIG_KEYS if k in cfg]
    decoding = ("constrained: the agent picks among the admissible actions"
                if cfg.get("constrained") else "free generation: the agent writes its action")
    return ["## Configuration", "", f"Action decoding: {decoding}.", "",
            "| setting | value |", "|---|---|", *rows, ""]


def _results_section(
    phases: Mapping[str, Sequence[Mapping[str, Any]]], *, seed: int, n_boot: int
) -> list[str]:
    out = [
        "## Results", "",
        "| phase | split | episodes | success rate | mean reward [95% CI] | mean steps "
        "| invalid actions / episode | bank size |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in phases.items():
        n = len(rs)
        rewards = [float(r["reward"]) for r in rs]
        games = per_game(rs, "reward")  # a game played in several attempts counts once
        lo, hi = bootstrap_ci(list(games.values()), seed=seed, n_boot=n_boot)
        succ = sum(bool(r["success"]) for r in rs) / n
        steps = sum(int(r["steps"]) for r in rs) / n
        invalid = sum(int(r.get("invalid_actions", 0)) for r in rs) / n
        size = bank_size(rs[-1].get("bank"))
        out.append(
            f"| {name} | {rs[0].get('split', '')} | "
            f"{n if len(games) == n else f'{n} ({len(games)} games)'} | {succ:.1%} | "
            f"{sum(rewards) / n:.3f} [{lo:.3f}, {hi:.3f}] | {steps:.1f} | {invalid:.2f} | "
            f"{'-' if size is None else size} |"
        )
    out += ["", f"CI: percentile bootstrap of the mean, {n_boot} resamples, seed {seed}; over "
            "games (a game played in several attempts counts as the mean of its attempts).", ""]
    return out


def _tokens_section(phases: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    out = [
        "## LLM usage per episode", "",
        "| phase | purpose | calls | prompt tokens | completion tokens | total tokens "
        "| retries (phase total) | retry wait s (phase total) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rs in phases.items():
        sums: dict[str, list[float]] = {}
        for r in rs:
            for purpose, c in (r.get("usage") or {}).items():
                s = sums.setdefault(purpose, [0, 0, 0, 0, 0.0])
                s[0] += int(c.get("calls", 0))
                s[1] += int(c.get("prompt_tokens", 0))
                s[2] += int(c.get("completion_tokens", 0))
                s[3] += int(c.get("retries", 0))
                s[4] += float(c.get("retry_wait", 0.0))
        n = len(rs)
        if not sums:
            out.append(f"| {name} | - | 0 | 0 | 0 | 0 | 0 | 0 |")
        for purpose, (calls, p, c, retries, wait) in sorted(sums.items()):
            out.append(f"| {name} | {purpose} | {calls / n:.1f} | {p / n:.0f} | {c / n:.0f} "
                       f"| {(p + c) / n:.0f} | {retries:.0f} | {wait:.1f} |")
    return [*out, ""]


def _recall_section(phases: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Warm recalls per tree: episodes whose recall accepted a match (DeltaMem's trees)."""
    counts: dict[str, dict[str, int]] = {}
    for name, rs in phases.items():
        for r in rs:
            details = ((r.get("recall") or {}).get("details") or {})
            for tree in ("task", "env"):
                d = details.get(tree)
                if isinstance(d, Mapping) and "accepted" in d:
                    c = counts.setdefault(name, {}).setdefault(tree, 0)
                    counts[name][tree] = c + bool(d["accepted"])
    if not counts:
        return []
    out = ["## Warm recalls", "", "| phase | episodes | Task-Tree warm | Env-Tree warm |",
           "|---|---|---|---|"]
    for name, c in counts.items():
        n = len(phases[name])
        out.append(f"| {name} | {n} | {c.get('task', '-')} | {c.get('env', '-')} |")
    return [*out, ""]


def _bank_section(phases: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    out = ["## Bank after each phase", ""]
    for name, rs in phases.items():
        out += [f"**{name}**: `{json.dumps(rs[-1].get('bank'), sort_keys=True)}`", ""]
    return out


def depth_histograms(stats: Any, _label: str = "") -> dict[str, dict[int, int]]:
    """Every ``depth_histogram`` found in ``stats``, keyed by tree name.

    A histogram is ``{depth: count}`` (JSON keys may be strings). It may sit
    under a tree (``{"task": {"depth_histogram": {...}}}``) or hold one
    histogram per tree (``{"depth_histogram": {"task": {...}, "env": {...}}}``).
    """
    found: dict[str, dict[int, int]] = {}
    if not isinstance(stats, Mapping):
        return found
    for key, value in stats.items():
        if key == "depth_histogram" and isinstance(value, Mapping):
            if value and all(isinstance(v, Mapping) for v in value.values()):
                for tree, hist in value.items():
                    found[str(tree)] = {int(d): int(c) for d, c in hist.items()}
            else:
                found[_label or "bank"] = {int(d): int(c) for d, c in value.items()}
        elif isinstance(value, Mapping):
            found.update(depth_histograms(value, f"{_label}.{key}" if _label else str(key)))
    return found


def _plot(
    run_dir: Path, phases: Mapping[str, Sequence[Mapping[str, Any]]], Figure: Any
) -> list[str]:
    """Draw the PNGs with matplotlib's ``Figure`` class (no pyplot, no global state)."""
    from matplotlib.ticker import MaxNLocator

    names = []
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for name, rs in phases.items():
        ys = running_mean([float(bool(r["success"])) for r in rs])
        ax.plot(range(1, len(ys) + 1), ys, label=name)
    ax.set(xlabel="episode", ylabel="success rate (running mean)", ylim=(-0.02, 1.02))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(run_dir / "success_rate.png", dpi=100)
    names.append("success_rate.png")

    sizes = {name: [bank_size(r.get("bank")) for r in rs] for name, rs in phases.items()}
    if any(s is not None for ss in sizes.values() for s in ss):
        fig = Figure(figsize=(7, 4))
        ax = fig.add_subplot()
        for name, ss in sizes.items():
            pts = [(i + 1, s) for i, s in enumerate(ss) if s is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), label=name)
        ax.set(xlabel="episode", ylabel="bank size (units)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(run_dir / "bank_size.png", dpi=100)
        names.append("bank_size.png")

    for name, rs in phases.items():
        hists = depth_histograms(rs[-1].get("bank"))
        if not hists:
            continue
        fig = Figure(figsize=(3.5 * len(hists), 3.2))
        for i, (tree, hist) in enumerate(sorted(hists.items()), start=1):
            ax = fig.add_subplot(1, len(hists), i)
            depths = sorted(hist)
            ax.bar(depths, [hist[d] for d in depths])
            ax.set(title=f"{tree} tree", xlabel="depth", ylabel="nodes")
            ax.set_xticks(depths)
        fig.tight_layout()
        fname = f"depth_{name}.png"
        fig.savefig(run_dir / fname, dpi=100)
        names.append(fname)
    return names
