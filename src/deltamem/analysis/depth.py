"""Figure 5: node counts per depth per tree, per parameter setting, as stacked bars.

Each run contributes one bar per tree: the ``depth_histogram`` of the bank
after its last episode (``memory.stats()``; see
:func:`deltamem.bench.report.depth_histograms`). Bars are labelled by the
memory options that differ between the given runs (``τ_task=0.7, K=3``), or
by the run directory's name when none differ. K_cons = ∞ is a run with
``consolidation = false``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem.analysis.markdown import table, write_markdown
from deltamem.analysis.plotting import figure_class
from deltamem.analysis.runs import Run, load_runs
from deltamem.bench.report import depth_histograms
from deltamem.errors import InvalidInputError

__all__ = ["depth_bars", "draw_depth_bars", "setting_labels"]

_NAMES = {"tau_task": "τ_task", "tau_env": "τ_env", "k_cons": "K"}


def _settings(run: Run) -> dict[str, Any]:
    opts = run.memory_options
    if opts.get("consolidation") is False:
        opts.pop("consolidation")
        opts["k_cons"] = "∞"
    return opts


def setting_labels(runs: Sequence[Run]) -> list[str]:
    """One label per run naming the memory options that differ between ``runs``."""
    settings = [_settings(r) for r in runs]
    keys = sorted({k for s in settings for k in s})
    varying = [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1]
    if not varying or len(runs) == 1:
        return [r.name for r in runs]
    return [", ".join(f"{_NAMES.get(k, k)}={s.get(k, 'default')}" for k in varying)
            for s in settings]


def depth_bars(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    name: str = "depth_bars",
    title: str = "Node counts by depth",
    labels: Sequence[str] | None = None,
    plots: bool = True,
) -> Path:
    """Write ``<name>.md`` (and ``<name>.png``) into ``out``; return the Markdown's path.

    Raises :class:`InvalidInputError` when a run's last bank stats hold no
    depth histogram, and :class:`~deltamem.errors.ConfigError` when ``plots``
    is on and matplotlib is missing (checked before anything is written).
    """
    Figure = figure_class() if plots else None
    runs = load_runs(run_dirs)
    if labels is not None and len(labels) != len(runs):
        raise InvalidInputError(f"{len(labels)} labels for {len(runs)} runs")
    labels = list(labels) if labels is not None else setting_labels(runs)
    counts = []
    for run in runs:
        hists = depth_histograms(run.last_bank())
        if not hists:
            raise InvalidInputError(f"{run.path}: the last bank stats have no depth histogram")
        counts.append(hists)
    trees = _tree_order({t for h in counts for t in h})
    depths = sorted({d for h in counts for hist in h.values() for d in hist})
    body = []
    for label, run, hists in zip(labels, runs, counts, strict=True):
        for tree in trees:
            hist = hists.get(tree, {})
            body.append([label, run.name, tree, *(hist.get(d, 0) for d in depths),
                         sum(hist.values())])
    out = Path(out)
    lines = [f"# {title}", "",
             *table(["setting", "run", "tree", *(f"depth {d}" for d in depths), "total"], body),
             ""]
    if Figure is not None:
        png = out / f"{name}.png"
        out.mkdir(parents=True, exist_ok=True)
        draw_depth_bars(labels, counts, png, Figure=Figure, title=title)
        lines += [f"![{title}]({png.name})", ""]
    return write_markdown(out / f"{name}.md", lines)


def draw_depth_bars(
    labels: Sequence[str],
    counts: Sequence[Mapping[str, Mapping[int, int]]],
    path: Path,
    *,
    Figure: Any = None,
    title: str = "",
) -> Any:
    """Draw one subplot per tree, one stacked bar per setting (segments: depths), save
    to ``path`` and return the figure."""
    Figure = Figure or figure_class()
    trees = _tree_order({t for h in counts for t in h})
    depths = sorted({d for h in counts for hist in h.values() for d in hist})
    fig = Figure(figsize=(max(4.0, 0.6 * len(labels) + 2) * len(trees), 4.2))
    colours = _colours(len(depths))
    x = list(range(len(labels)))
    for i, tree in enumerate(trees, start=1):
        ax = fig.add_subplot(1, len(trees), i)
        bottom = [0] * len(labels)
        for d, colour in zip(depths, colours, strict=True):
            heights = [h.get(tree, {}).get(d, 0) for h in counts]
            ax.bar(x, heights, bottom=bottom, color=colour, label=f"depth {d}")
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
        ax.set(title=f"{tree} tree", ylabel="nodes")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return fig


def _tree_order(trees: set[str]) -> list[str]:
    """Task-Tree first, then the Env-Tree, then any other, as in the paper."""
    rank = {"task": 0, "env": 1}
    return sorted(trees, key=lambda t: (rank.get(t, 2), t))


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(1, n - 1) * 0.9) for i in range(n)]
