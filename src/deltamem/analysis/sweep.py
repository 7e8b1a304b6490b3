"""Sweeps: systems × environments × seeds × settings from one TOML spec, each cell a run.

The paper's tables are grids of runs (Table 1: benchmarks × systems; Figure 4: τ_task × τ_env ×
K_cons; Table 2: frozen vs unfrozen; Table 3: which trees). A sweep spec names the axes once::

    out = "runs/sweep"                  # the cells' run directories and the tables

    [run]                               # what every cell shares: RunConfig fields, as in
    split = "unseen"                    # `deltamem run -c FILE`
    llm = "scripted"
    embedder = "hashing:256"
    episodes = 6

    [sweep]
    env = ["household"]                 # environments (default: [run] env)
    memory = ["deltamem", "synapse"]    # systems (default: [run] memory)
    seed = [0, 1]                       # task-order seeds (default: [run] seed)

    [sweep.settings.off]                # named settings: RunConfig fields over [run]
    guide = "off"                       # (memory_options are merged, not replaced)
    [sweep.settings.prior]
    guide = "prior"

    [sweep.grid]                        # Figure 4: DeltaMem cells get one setting per
    tau_task = [0.7, 0.8]               # (τ_task, τ_env, K_cons), named as `deltamem grid`
    tau_env = [0.8, 0.9]                # names them (tt0.7_te0.8_k3); other systems
    k_cons = [3, "inf"]                 # are run once per named setting

    [resources]
    cpus = 1                            # cores a cell takes (Ray's num_cpus)
    llm_threads = 2                     # cores (= threads) of a local-model cell
    retries = 3                         # runs of a cell again after its worker died

Every combination is one cell, one resumable run directory ``out/<env>-<split>-<memory>-s<seed>
[-<setting>]`` (:func:`deltamem.bench.cells.run_cells` runs them: Ray tasks when Ray is
installed or an ``address`` is given, else local processes). At the end come the outputs the
project already has, not a second format: ``results.md``, the results page of
``scripts/results.py`` (:func:`deltamem.analysis.results_page.build`) over every cell, and with
a grid, for each system × environment × seed × setting of DeltaMem, ``grid.md``, ``grid.json``,
the heatmaps and the depth bars of ``deltamem grid`` (:func:`deltamem.analysis.grid.write_grid`)
in ``out/grid-<env>-<split>-s<seed>[-<setting>]/``. ``sweep.json`` lists where and how each
cell ran; ``cells.json`` the cells finished (a second call skips them).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deltamem.analysis.grid import CellResult, GridCell, cell_result, grid_cells, write_grid
from deltamem.analysis.results_page import build
from deltamem.bench.cells import Cell, CellOutcome, Engine, cell_cpus, run_cells
from deltamem.bench.config import RunConfig
from deltamem.errors import ConfigError

__all__ = ["SweepResult", "SweepSpec", "load_spec", "sweep", "sweep_cells"]

RESULTS_FILE = "results.md"
STATE_FILE = "cells.json"
SWEEP_FILE = "sweep.json"
_OWNED = ("run_dir",)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GridAxes(_Spec):
    """Figure 4's axes: DeltaMem's thresholds and K_cons (``"inf"``: no consolidation)."""

    tau_task: list[float] = Field(min_length=1)
    tau_env: list[float] = Field(min_length=1)
    k_cons: list[int | str] = Field(min_length=1)

    def cells(self) -> list[GridCell]:
        from deltamem.analysis.grid import parse_k_values

        ks = parse_k_values(",".join(str(k) for k in self.k_cons))
        return grid_cells(self.tau_task, self.tau_env, ks)


class Axes(_Spec):
    env: list[str] | None = None
    memory: list[str] | None = None
    seed: list[int] | None = None
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    grid: GridAxes | None = None


class Resources(_Spec):
    cpus: int = Field(default=1, ge=1)
    llm_threads: int | None = Field(default=None, ge=1)
    retries: int = Field(default=3, ge=0)


class SweepSpec(_Spec):
    """A sweep (see the module doc): ``out``, ``[run]``, ``[sweep]`` axes, ``[resources]``."""

    out: Path | None = None
    run: dict[str, Any] = Field(default_factory=dict)
    sweep: Axes = Field(default_factory=Axes)
    resources: Resources = Field(default_factory=Resources)


M = TypeVar("M", bound=BaseModel)


def read_spec(path: str | Path, model: type[M], kind: str,
              extra: dict[str, Any] | None = None) -> M:
    """A TOML spec file checked as ``model`` (``extra`` fields added to what the file says);
    :class:`ConfigError` naming the ``kind`` of spec and what is wrong."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read {kind} spec {path}: {e}") from e
    try:
        return model.model_validate({**data, **(extra or {})})
    except ValidationError as e:
        first = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
                          for err in e.errors()[:3])
        raise ConfigError(f"{kind} spec {path}: {first}") from None


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec (TOML); :class:`ConfigError` saying what is wrong."""
    return read_spec(path, SweepSpec, "sweep")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


@dataclass(frozen=True)
class _Planned:
    """A cell with what it is a combination of (for the tables)."""

    cell: Cell
    env: str
    memory: str
    seed: int
    setting: str
    grid: GridCell | None


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = {**base, **over}
    if "memory_options" in base or "memory_options" in over:
        out["memory_options"] = {**dict(base.get("memory_options") or {}),
                                 **dict(over.get("memory_options") or {})}
    return out


def _plan(spec: SweepSpec, out: Path) -> list[_Planned]:
    run = dict(spec.run)
    owned = sorted(set(run) & set(_OWNED))
    if owned:
        raise ConfigError(f"[run] cannot set {', '.join(owned)}: each cell has its own")
    axes = spec.sweep
    envs = axes.env or [str(run.get("env", "household"))]
    memories = axes.memory or [str(run.get("memory", "none"))]
    seeds = axes.seed if axes.seed is not None else [int(run.get("seed", 0))]
    for name, values in (("env", envs), ("memory", memories), ("seed", seeds)):
        if len(set(values)) != len(values):
            raise ConfigError(f"[sweep] {name} lists a value twice: {values}")
    for name, setting in axes.settings.items():
        if _slug(name) != name:
            raise ConfigError(f"setting name {name!r}: use letters, digits, '.', '_' or '-'")
        bad = sorted(set(setting) & {"run_dir", "env", "memory", "seed"})
        if bad:
            raise ConfigError(f"setting {name!r} cannot set {', '.join(bad)}: they are axes")
    settings = list(axes.settings.items()) or [("", {})]
    grid = axes.grid.cells() if axes.grid is not None else []
    planned: list[_Planned] = []
    for env in envs:
        for memory in memories:
            for seed in seeds:
                for sname, over in settings:
                    variants: list[GridCell | None] = (
                        list(grid) if grid and memory == "deltamem" else [None])
                    for g in variants:
                        fields = _merge(run, over)
                        fields.update(env=env, memory=memory, seed=seed)
                        if g is not None:
                            clash = sorted(set(fields.get("memory_options") or {})
                                           & {"tau_task", "tau_env", "k_cons", "consolidation"})
                            if clash:
                                raise ConfigError(f"memory options {clash} are set by the grid")
                            fields = _merge(fields, {"memory_options": g.memory_options()})
                        split = str(fields.get("split", "seen"))
                        parts = [_slug(env), _slug(split), _slug(memory), f"s{seed}"]
                        parts += [p for p in (sname, g.dirname if g else "") if p]
                        name = "-".join(parts)
                        try:
                            config = RunConfig(**{**fields, "run_dir": out / name})
                        except (ValueError, TypeError) as e:
                            raise ConfigError(f"cell {name}: invalid run configuration: "
                                              f"{' '.join(str(e).split())[:300]}") from None
                        if memory == "deltamem":
                            from deltamem.memories.deltamem import check_bank_config

                            try:
                                check_bank_config(config.memory_options)
                            except ConfigError as e:
                                raise ConfigError(f"cell {name}: {e}") from None
                        cpus, threads = cell_cpus(config, cpus=spec.resources.cpus,
                                                  llm_threads=spec.resources.llm_threads)
                        planned.append(_Planned(Cell(name, config, cpus, threads), env, memory,
                                                seed, sname, g))
    return planned


def sweep_cells(spec: SweepSpec, out: str | Path | None = None) -> list[Cell]:
    """The cells of ``spec`` under ``out`` (default: the spec's ``out``), checked."""
    return [p.cell for p in _plan(spec, _out(spec, out))]


def _out(spec: SweepSpec, out: str | Path | None) -> Path:
    target = out if out is not None else spec.out
    if target is None:
        raise ConfigError("the sweep needs an output folder: `out = \"...\"` in the spec, or --out")
    return Path(target)


@dataclass
class SweepResult:
    """A finished sweep: its folder, every cell's outcome, the results page and the grid
    pages (one per DeltaMem group of a grid)."""

    out: Path
    outcomes: list[CellOutcome]
    results: Path
    grids: list[Path] = field(default_factory=list)


def sweep(
    spec: SweepSpec | str | Path,
    *,
    out: str | Path | None = None,
    engine: Engine = "auto",
    address: str | None = None,
    workers: int | None = None,
    plots: bool = True,
    on_cell: Callable[[CellOutcome], None] | None = None,
) -> SweepResult:
    """Run (or resume) every cell of ``spec`` (a :class:`SweepSpec` or a TOML path), then
    write the results page, the grid pages (with a ``[sweep.grid]``) and ``sweep.json``.

    ``engine``/``address``/``workers``: see :func:`deltamem.bench.cells.run_cells`. Cells that
    fail do not stop the others; :class:`~deltamem.bench.cells.CellFailed` is raised after
    them, and nothing is written (run again to resume).
    """
    source = str(spec) if not isinstance(spec, SweepSpec) else "a sweep spec"
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    target = _out(spec, out)
    planned = _plan(spec, target)
    if plots and any(p.grid is not None for p in planned):
        from deltamem.analysis.plotting import figure_class

        figure_class()  # a missing matplotlib fails before any cell runs
    target.mkdir(parents=True, exist_ok=True)
    outcomes = run_cells([p.cell for p in planned], engine=engine, address=address,
                         workers=workers, retries=spec.resources.retries,
                         state=target / STATE_FILE, on_cell=on_cell)
    memories = list(dict.fromkeys(p.memory for p in planned))
    note = (f"A sweep of {len(planned)} cells ({source}): "
            f"{', '.join(memories)} × {len({p.env for p in planned})} environment(s) × "
            f"{len({p.seed for p in planned})} seed(s) × "
            f"{len({(p.setting, p.grid) for p in planned})} setting(s).")
    page = target / RESULTS_FILE
    page.write_text(build([p.cell.config.run_dir for p in planned], memories, note,
                          generator=f"deltamem sweep {source}"), encoding="utf-8")
    grids = _grid_pages(planned, target, plots=plots)
    (target / SWEEP_FILE).write_text(json.dumps({
        "spec": source,
        "cells": [{"name": o.cell.name, "run_dir": str(o.cell.config.run_dir), "cpus": o.cell.cpus,
                   "host": o.host, "pid": o.pid, "start_index": o.start_index,
                   "episodes": o.episodes, "seconds": round(o.seconds, 3),
                   "skipped": o.skipped} for o in outcomes],
        "results": page.name, "grids": [str(g.relative_to(target)) for g in grids],
    }, indent=1) + "\n", encoding="utf-8")
    return SweepResult(target, outcomes, page, grids)


def _grid_pages(planned: Sequence[_Planned], out: Path, *, plots: bool) -> list[Path]:
    groups: dict[tuple[str, str, int, str], list[_Planned]] = {}
    for p in planned:
        if p.grid is not None:
            key = (p.env, p.cell.config.split, p.seed, p.setting)
            groups.setdefault(key, []).append(p)
    pages = []
    for (env, split, seed, setting), members in groups.items():
        results: list[CellResult] = [cell_result(p.grid, Path(p.cell.config.run_dir))
                                     for p in members if p.grid is not None]
        name = "-".join(["grid", _slug(env), _slug(split), f"s{seed}", *([setting] if setting
                                                                           else [])])
        title = f"{env}/{split}, seed {seed}" + (f", setting {setting}" if setting else "")
        pages.append(write_grid(results, out / name, title=title, plots=plots))
    return pages
