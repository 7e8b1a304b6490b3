"""Figure 4: a DeltaMem parameter grid over (τ_task, τ_env) × K_cons, run in parallel processes.

Every cell is an ordinary online run (:func:`deltamem.bench.run`) in its own
directory under ``out`` (``tt0.7_te0.8_k3``; ``k-inf`` is K_cons = ∞, i.e.
``consolidation = false``), so an interrupted grid resumes where each cell
stopped and a finished one is only re-read. The grid is a sweep of one system
(DeltaMem) and one seed over a grid of memory settings: its cells run through
:func:`deltamem.bench.cells.run_cells`, in local ``spawn`` processes (``engine
="local"``, the default: each worker builds its own LLM, embedder and
environment from the specs, or from the given factories, which must then be
picklable: module-level functions or classes) or as Ray tasks (``engine="ray"``,
``address`` to join a cluster), and ``deltamem sweep`` with a ``[sweep.grid]``
table writes these same outputs. A script that calls :func:`grid` with
``workers > 1`` needs the usual ``if __name__ == "__main__":`` guard (``spawn``
re-imports the main module); the ``deltamem`` command and ``python -m deltamem``
are safe.

Outputs in ``out``: ``grid.md`` (one success-rate table per K_cons with the
best cell marked, and every cell's numbers), ``grid.json``,
``grid_heatmap.png`` (one heatmap per K_cons, best cell boxed in red and starred) and the
Figure 5 depth bars through the overall best cell (``depth_k``,
``depth_tau_task``, ``depth_tau_env``: one parameter varied, the others at the
best cell's values).

The best cell of a K_cons is the one with the highest success rate, then the
highest mean reward; remaining ties go to the first cell in grid order.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.analysis.depth import depth_bars
from deltamem.analysis.markdown import ci, table, write_markdown
from deltamem.analysis.plotting import figure_class
from deltamem.analysis.runs import load_run, phase_stats
from deltamem.bench.cells import Engine
from deltamem.errors import ConfigError, InvalidInputError

__all__ = [
    "GRID_FILE",
    "CellResult",
    "GridCell",
    "best_cell",
    "best_cells",
    "cell_result",
    "draw_heatmaps",
    "grid",
    "grid_cell_configs",
    "grid_cells",
    "parse_floats",
    "parse_k_values",
    "run_grid",
    "write_grid",
]

log = logging.getLogger(__name__)

GRID_FILE = "grid.md"
HEATMAP_FILE = "grid_heatmap.png"


@dataclass(frozen=True)
class GridCell:
    """One parameter setting; ``k_cons=None`` means K_cons = ∞ (no consolidation)."""

    tau_task: float
    tau_env: float
    k_cons: int | None

    @property
    def k_label(self) -> str:
        return "∞" if self.k_cons is None else str(self.k_cons)

    @property
    def dirname(self) -> str:
        k = "inf" if self.k_cons is None else str(self.k_cons)
        return f"tt{self.tau_task:g}_te{self.tau_env:g}_k{k}"

    def memory_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"tau_task": self.tau_task, "tau_env": self.tau_env}
        if self.k_cons is None:
            opts["consolidation"] = False
        else:
            opts["k_cons"] = self.k_cons
        return opts


@dataclass(frozen=True)
class CellResult:
    """A finished cell: its run directory and the numbers of its learning phase
    (:data:`GRID_PHASES`)."""

    cell: GridCell
    run_dir: Path
    episodes: int
    success_rate: float
    success_ci: tuple[float, float]
    mean_reward: float
    reward_ci: tuple[float, float]
    bank_size: int | None
    phase: str = "online"

    def to_dict(self) -> dict[str, Any]:
        return {"tau_task": self.cell.tau_task, "tau_env": self.cell.tau_env,
                "k_cons": self.cell.k_cons, "run_dir": str(self.run_dir),
                "episodes": self.episodes, "success_rate": self.success_rate,
                "success_ci": list(self.success_ci), "mean_reward": self.mean_reward,
                "reward_ci": list(self.reward_ci), "bank_size": self.bank_size,
                "phase": self.phase}


def parse_floats(text: str) -> list[float]:
    """``"0.7,0.75"`` → ``[0.7, 0.75]`` (a CLI list)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise ConfigError("expected at least one number")
    return values


def parse_k_values(text: str) -> list[int | None]:
    """``"3,inf"`` → ``[3, None]`` (``inf``/``∞`` = no consolidation)."""
    out: list[int | None] = []
    for v in (v.strip().lower() for v in text.split(",")):
        if not v:
            continue
        if v in ("inf", "∞", "none"):
            out.append(None)
            continue
        try:
            out.append(int(v))
        except ValueError:
            raise ConfigError(f"K_cons values are integers or inf, got {v!r}") from None
    if not out:
        raise ConfigError("expected at least one K_cons value")
    return out


def grid_cells(
    tau_task: Sequence[float], tau_env: Sequence[float], k_cons: Sequence[int | None]
) -> list[GridCell]:
    """Every (τ_task, τ_env, K_cons) combination, K-major, validated."""
    for name, values in (("tau_task", tau_task), ("tau_env", tau_env), ("k_cons", k_cons)):
        if not values:
            raise ConfigError(f"{name} needs at least one value")
        if len(set(values)) != len(values):
            raise ConfigError(f"{name} lists a value twice: {list(values)}")
    for t in (*tau_task, *tau_env):
        if not (-1.0 <= t <= 1.0) or math.isnan(t):
            raise ConfigError(f"thresholds are cosine similarities in [-1, 1], got {t}")
    for k in k_cons:
        if k is not None and k < 1:
            raise ConfigError(f"K_cons must be >= 1 or inf, got {k}")
    return [GridCell(float(tt), float(te), k) for k in k_cons for tt in tau_task for te in tau_env]


def grid_cell_configs(
    out: Path,
    cells: Sequence[GridCell],
    *,
    env: str,
    split: str,
    episodes: int | None,
    llm: str,
    embedder: str | None,
    seed: int,
    options: Mapping[str, Any] | None,
    run_options: Mapping[str, Any] | None,
) -> dict[GridCell, Any]:
    """The :class:`~deltamem.bench.RunConfig` of every cell (directory ``out/<cell>``)."""
    from deltamem.bench import RunConfig

    base_opts = dict(options or {})
    clash = sorted(set(base_opts) & {"tau_task", "tau_env", "k_cons", "consolidation"})
    if clash:
        raise ConfigError(f"options {clash} are set by the grid itself")
    run_opts = dict(run_options or {})
    configs = {}
    for cell in cells:
        try:
            configs[cell] = RunConfig(**{**run_opts, "run_dir": out / cell.dirname, "env": env,
                                         "split": split, "seed": seed, "episodes": episodes,
                                         "memory": "deltamem", "llm": llm, "embedder": embedder,
                                         "memory_options": {**base_opts,
                                                            **cell.memory_options()}})
        except ValueError as e:
            raise ConfigError(f"invalid grid run configuration: {e}") from e
    return configs


def run_grid(
    out: str | Path,
    *,
    env: str,
    split: str,
    episodes: int | None,
    tau_task: Sequence[float],
    tau_env: Sequence[float],
    k_cons: Sequence[int | None],
    workers: int = 2,
    llm: str = "local",
    embedder: str | None = "minilm",
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    run_options: Mapping[str, Any] | None = None,
    env_factory: Callable[[], Any] | None = None,
    llm_factory: Callable[[], Any] | None = None,
    embedder_factory: Callable[[], Any] | None = None,
    on_cell: Callable[[CellResult], None] | None = None,
    engine: Engine = "local",
    address: str | None = None,
    cpus: int = 1,
) -> list[CellResult]:
    """Run (or resume) every cell and return the results in grid order.

    ``options`` are further DeltaMem options of every cell; ``run_options``
    further :class:`~deltamem.bench.RunConfig` fields (``constrained``,
    ``extractor``, ``llm_options``, ...). ``workers=1`` runs the cells one after the
    other in this process (local engine). ``engine``/``address``: see
    :func:`deltamem.bench.cells.run_cells`; ``cpus``: cores per cell (a local-model
    cell: its threads). ``on_cell`` is called as each cell finishes. When cells fail,
    the others still run; then the first failure is re-raised (finished cells are
    kept: run again to resume).
    """
    from deltamem.bench.cells import Cell, CellFailed, cell_cpus, run_cells

    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    cells = grid_cells(tau_task, tau_env, k_cons)
    out = Path(out)
    configs = grid_cell_configs(out, cells, env=env, split=split, episodes=episodes, llm=llm,
                                embedder=embedder, seed=seed, options=options,
                                run_options=run_options)
    out.mkdir(parents=True, exist_ok=True)
    by_name = {c.dirname: c for c in cells}
    jobs = [Cell(c.dirname, configs[c], *cell_cpus(configs[c], cpus=cpus)) for c in cells]
    results: dict[GridCell, CellResult] = {}

    def finish(outcome: Any) -> None:
        cell = by_name[outcome.cell.name]
        results[cell] = cell_result(cell, out / cell.dirname)
        if on_cell is not None:
            on_cell(results[cell])

    try:
        run_cells(jobs, engine=engine, address=address, workers=workers,
                  factories=(env_factory, llm_factory, embedder_factory), on_cell=finish)
    except CellFailed as failed:
        first = failed.failures[0][1]
        first.add_note(f"{len(failed.failures)} of {len(cells)} grid cells failed "
                       f"({', '.join(c.name for c, _ in failed.failures)}); finished cells "
                       "are kept, run the grid again to resume")
        raise first from None
    return [results[c] for c in cells]


#: the phase a grid cell is read from, first found: the online protocol's, else a
#: train-to-test run's learning evaluation (``unfrozen``), else its frozen one
GRID_PHASES: tuple[str, ...] = ("online", "unfrozen", "frozen")


def cell_result(cell: GridCell, run_dir: Path) -> CellResult:
    """The numbers of a finished cell's learning phase (:data:`GRID_PHASES`)."""
    run = load_run(run_dir)
    phases = run.phases()
    phase = next((p for p in GRID_PHASES if p in phases), None)
    if phase is None:
        raise InvalidInputError(f"{run_dir} has no online, unfrozen or frozen phase "
                                f"(phases: {', '.join(phases) or 'none'})")
    st = phase_stats(phases[phase])
    return CellResult(cell, run_dir, st.episodes, st.success_rate, st.success_ci,
                      st.mean_reward, st.reward_ci, st.bank_size, phase)


def best_cell(results: Sequence[CellResult]) -> CellResult:
    """The best of ``results``: highest success rate, then mean reward, then grid order."""
    if not results:
        raise InvalidInputError("no grid cell to choose from")
    best = results[0]
    for r in results[1:]:
        if (r.success_rate, r.mean_reward) > (best.success_rate, best.mean_reward):
            best = r
    return best


def best_cells(results: Sequence[CellResult]) -> dict[int | None, CellResult]:
    """The best cell (:func:`best_cell`) of each K_cons."""
    groups: dict[int | None, list[CellResult]] = {}
    for r in results:
        groups.setdefault(r.cell.k_cons, []).append(r)
    return {k: best_cell(rs) for k, rs in groups.items()}


def _axes(results: Sequence[CellResult]) -> tuple[list[float], list[float], list[int | None]]:
    tt = sorted({r.cell.tau_task for r in results})
    te = sorted({r.cell.tau_env for r in results})
    ks: list[int | None] = []
    for r in results:
        if r.cell.k_cons not in ks:
            ks.append(r.cell.k_cons)
    return tt, te, ks


def draw_heatmaps(results: Sequence[CellResult], path: Path, *, Figure: Any = None) -> Any:
    """One success-rate heatmap per K_cons (rows τ_task, columns τ_env), the best cell of
    each boxed in red and starred (the box has gid ``"best"``); saved to ``path``, the figure
    returned."""
    Figure = Figure or figure_class()
    tt, te, ks = _axes(results)
    best = best_cells(results)
    by = {(r.cell.k_cons, r.cell.tau_task, r.cell.tau_env): r for r in results}
    fig = Figure(figsize=((max(2.2, 0.8 * len(te)) + 0.8) * len(ks) + 1.2, 0.6 * len(tt) + 2.2),
                 layout="constrained")
    image = None
    for n, k in enumerate(ks, start=1):
        ax = fig.add_subplot(1, len(ks), n)
        grid = [[by[(k, a, b)].success_rate if (k, a, b) in by else math.nan for b in te]
                for a in tt]
        image = ax.imshow(grid, origin="lower", vmin=0.0, vmax=1.0, cmap="viridis",
                          aspect="auto")
        for i, a in enumerate(tt):
            for j, b in enumerate(te):
                r = by.get((k, a, b))
                if r is not None:
                    star = " ★" if r is best[k] else ""
                    ax.text(j, i, f"{r.success_rate:.2f}{star}", ha="center", va="center",
                            color="white" if r.success_rate < 0.6 else "black", fontsize=8)
        b_cell = best[k].cell
        from matplotlib.patches import Rectangle

        rect = Rectangle((te.index(b_cell.tau_env) - 0.5, tt.index(b_cell.tau_task) - 0.5),
                         1, 1, fill=False, edgecolor="red", linewidth=3, gid="best")
        ax.add_patch(rect)
        ax.set_xticks(range(len(te)))
        ax.set_xticklabels([f"{b:g}" for b in te])
        ax.set_yticks(range(len(tt)))
        ax.set_yticklabels([f"{a:g}" for a in tt])
        ax.set(xlabel="τ_env", title=f"K_cons = {best[k].cell.k_label}")
        if n == 1:
            ax.set_ylabel("τ_task")
    if image is not None:
        fig.colorbar(image, ax=fig.axes, label="success rate", shrink=0.9)
    fig.savefig(path, dpi=100)
    return fig


_GRID_OWNED = ("run_dir", "memory")
_CELL_KEYS = ("env", "split", "episodes", "seed", "llm", "embedder")


def grid_settings(
    config: str | Path | None = None,
    /,
    *,
    options: Mapping[str, Any] | None = None,
    **flags: Any,
) -> dict[str, Any]:
    """Keyword arguments for :func:`grid` from a TOML run configuration and CLI flags.

    The TOML file is the one ``deltamem run -c`` reads; flags that are not
    ``None`` override it. ``run_dir`` and ``memory`` are the grid's own;
    ``memory_options`` become ``options`` (the grid's τ/K keys are refused later
    by :func:`run_grid`); every other field is passed on to each cell's
    :class:`~deltamem.bench.RunConfig`. Defaults: ``llm="local"``,
    ``embedder="minilm"``, ``seed=0``, ``extractor="structural"``, and
    ``constrained`` as for a run (on for a local model, off for an API model).
    Raises :class:`ConfigError` for an unreadable file, a grid-owned key in it, or a
    missing ``env``/``split``.
    """
    import tomllib

    data: dict[str, Any] = {}
    if config is not None:
        try:
            with open(config, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read config file {config}: {e}") from e
    owned = sorted(set(data) & set(_GRID_OWNED))
    if owned:
        raise ConfigError(f"{config}: {', '.join(owned)} cannot be set for a grid")
    for key, value in flags.items():
        if value is not None:
            data[key] = value
    data.setdefault("llm", "local")
    data.setdefault("embedder", "minilm")
    data.setdefault("seed", 0)
    data.setdefault("extractor", "structural")
    if data.get("constrained") is None:
        from deltamem.bench.config import is_local_llm

        data["constrained"] = is_local_llm(str(data["llm"]))
    missing = [k for k in ("env", "split") if not data.get(k)]
    if missing:
        raise ConfigError(f"the grid needs {' and '.join(missing)} (flag "
                          f"{' and '.join('--' + k for k in missing)}, or the config file)")
    merged_options = {**dict(data.pop("memory_options", None) or {}), **dict(options or {})}
    out: dict[str, Any] = {k: data.pop(k, None) for k in _CELL_KEYS}
    out["options"] = merged_options or None
    out["run_options"] = data
    return out


def grid(
    out: str | Path,
    *,
    env: str,
    split: str,
    episodes: int | None,
    tau_task: Sequence[float],
    tau_env: Sequence[float],
    k_cons: Sequence[int | None],
    workers: int = 2,
    plots: bool = True,
    **kwargs: Any,
) -> Path:
    """Run (or resume) the grid (:func:`run_grid`; ``kwargs`` go there), then write
    ``grid.md``, ``grid.json``, the heatmaps and the depth bars; return ``grid.md``'s path.

    With ``plots`` on, a missing matplotlib raises
    :class:`~deltamem.errors.ConfigError` before any cell runs.
    """
    Figure = figure_class() if plots else None
    out = Path(out)
    results = run_grid(out, env=env, split=split, episodes=episodes, tau_task=tau_task,
                       tau_env=tau_env, k_cons=k_cons, workers=workers, **kwargs)
    return write_grid(results, out, title=f"{env}/{split}", plots=plots, Figure=Figure)


def write_grid(results: Sequence[CellResult], out: str | Path, *, title: str,
               plots: bool = True, Figure: Any = None) -> Path:
    """Write ``grid.md`` (``title`` in its heading), ``grid.json``, the heatmaps and the
    depth bars of finished cells into ``out``; return ``grid.md``'s path. The cells' run
    directories may be anywhere (a sweep keeps them beside its other cells)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if plots and Figure is None:
        Figure = figure_class()
    best = best_cells(results)
    overall = best_cell(results)
    tt, te, ks = _axes(results)
    by = {(r.cell.k_cons, r.cell.tau_task, r.cell.tau_env): r for r in results}
    lines = [f"# Parameter grid: {title}, {results[0].episodes} episodes per cell", "",
             "Success rate per cell (rows τ_task, columns τ_env); ★ and bold: the best cell of "
             "each K_cons (highest success rate, then mean reward).", ""]
    for k in ks:
        rows = []
        for a in tt:
            row: list[object] = [f"{a:g}"]
            for b in te:
                r = by.get((k, a, b))
                text = "-" if r is None else f"{r.success_rate:.1%}"
                row.append(f"**{text} ★**" if r is not None and r is best[k] else text)
            rows.append(row)
        lines += [f"## K_cons = {best[k].cell.k_label}", "",
                  *table(["τ_task \\ τ_env", *(f"{b:g}" for b in te)], rows), ""]
    c = overall.cell
    lines += [f"Overall best: τ_task={c.tau_task:g}, τ_env={c.tau_env:g}, K_cons={c.k_label} "
              f"(success {overall.success_rate:.1%}, mean reward {overall.mean_reward:.3f}).", "",
              "## All cells", "",
              *table(["τ_task", "τ_env", "K_cons", "episodes", "success rate [95% CI]",
                      "mean reward [95% CI]", "bank size", "run"],
                     [[f"{r.cell.tau_task:g}", f"{r.cell.tau_env:g}", r.cell.k_label,
                       r.episodes, ci(r.success_rate, r.success_ci, pct=True),
                       ci(r.mean_reward, r.reward_ci),
                       "-" if r.bank_size is None else r.bank_size, r.run_dir.name]
                      for r in results]), ""]
    (out / "grid.json").write_text(json.dumps({
        "cells": [r.to_dict() for r in results],
        "best": [best[k].to_dict() for k in ks],
        "overall_best": overall.to_dict(),
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if plots:
        draw_heatmaps(results, out / HEATMAP_FILE, Figure=Figure)
        lines += ["## Heatmaps", "", f"![success rate heatmaps]({HEATMAP_FILE})", ""]
    lines += _depth_slices(results, overall, out, plots=plots)
    return write_markdown(out / GRID_FILE, lines)


def _depth_slices(
    results: Sequence[CellResult], overall: CellResult, out: Path, *, plots: bool
) -> list[str]:
    """Figure 5's three panels through the best cell: vary K, τ_task, τ_env in turn."""
    anchor = overall.cell
    slices = {
        "depth_k": ("K_cons varied", lambda c: c.tau_task == anchor.tau_task
                    and c.tau_env == anchor.tau_env),
        "depth_tau_task": ("τ_task varied", lambda c: c.tau_env == anchor.tau_env
                           and c.k_cons == anchor.k_cons),
        "depth_tau_env": ("τ_env varied", lambda c: c.tau_task == anchor.tau_task
                          and c.k_cons == anchor.k_cons),
    }
    lines = []
    for name, (title, keep) in slices.items():
        members = [r for r in results if keep(r.cell)]
        if len(members) < 2:
            continue
        path = depth_bars([r.run_dir for r in members], out, name=name,
                          title=f"Node counts by depth, {title}", plots=plots)
        lines.append(f"- [{title}]({path.name})")
    return ["## Depth distributions (Figure 5)", "", *lines, ""] if lines else []
