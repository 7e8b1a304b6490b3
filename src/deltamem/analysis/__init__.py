"""Analyses of finished runs: the paper's tables and figures as Markdown (+ PNG).

Each function reads run directories made by :func:`deltamem.bench.run`, writes
its Markdown (and figures, with matplotlib) into an output directory and
returns the Markdown's path:

* :func:`compare`: runs side by side, shape of Table 1 (``compare.md``);
* :func:`table2`: train-to-test Frozen vs Unfrozen (``table2.md``);
* :func:`table3`: DeltaMem both trees vs one tree (``table3.md``);
* :func:`table5`: average tokens per memory unit (``table5.md``);
* :func:`grid`: Figure 4, a parallel (τ_task, τ_env) × K_cons grid of runs with
  heatmaps, plus Figure 5 depth bars (``grid.md``);
* :func:`depth_bars`: Figure 5, node counts per depth as stacked bars;
* :func:`calibrate`: τ per tree from the similarity distribution of sampled tasks;
* :mod:`deltamem.analysis.infogain`: information gain of a recalled context (decocted
  experience, Proposition 4.1), from a model that samples with log-probabilities.

The matching CLI commands are :mod:`deltamem.cli.analysis`.
"""

from deltamem.analysis.ablation import table3
from deltamem.analysis.calibrate import (
    Calibration,
    TreeCalibration,
    calibrate,
    calibrate_tasks,
    calibrate_tree,
    write_calibration,
)
from deltamem.analysis.compare import compare
from deltamem.analysis.depth import depth_bars
from deltamem.analysis.grid import CellResult, GridCell, best_cells, grid, run_grid
from deltamem.analysis.runs import PhaseStats, Run, load_run, load_runs, phase_stats
from deltamem.analysis.token_stats import table5
from deltamem.analysis.transfer import table2

__all__ = [
    "Calibration",
    "CellResult",
    "GridCell",
    "PhaseStats",
    "Run",
    "TreeCalibration",
    "best_cells",
    "calibrate",
    "calibrate_tasks",
    "calibrate_tree",
    "compare",
    "depth_bars",
    "grid",
    "load_run",
    "load_runs",
    "phase_stats",
    "run_grid",
    "table2",
    "table3",
    "table5",
    "write_calibration",
]
