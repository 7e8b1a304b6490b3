"""The analyses' commands (:mod:`deltamem.analysis`); ``register(app)`` adds them.

Each command parses its arguments, calls the library function of the same
name and prints where the result went. Library errors
(:class:`~deltamem.errors.DeltaMemError`) are left to the app's entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from deltamem.cli import options as opts
from deltamem.cli.options import BootstrapSeed as Seed
from deltamem.cli.options import NBoot

if TYPE_CHECKING:
    from deltamem.analysis.grid import CellResult

__all__ = ["register"]

console = Console()

RunDirs = Annotated[list[Path], typer.Argument(help="Run directories made by `deltamem run`.")]
Out = Annotated[
    Path | None,
    typer.Option(help="Output directory (default: the run directory, or the common parent "
                      "of several)."),
]


_FROM_CONFIG = "the --config file's; one of the two is needed"


def _out(out: Path | None, run_dirs: list[Path]) -> Path:
    from deltamem.analysis.runs import default_out

    return out if out is not None else default_out(run_dirs)


def _show(path: Path) -> None:
    """Print a Markdown result (its tables rendered), then where it was written."""
    from rich.markdown import Markdown

    console.print(Markdown(path.read_text(encoding="utf-8")))
    console.print(f"wrote {path}")


def compare(run_dirs: RunDirs, out: Out = None, seed: Seed = 0, n_boot: NBoot = 2000) -> None:
    """Runs side by side (paper Table 1): reward and success with 95% CIs, steps, tokens."""
    from deltamem.analysis.compare import compare as run_compare

    _show(run_compare(run_dirs, _out(out, run_dirs), seed=seed, n_boot=n_boot))


def table2(run_dirs: RunDirs, out: Out = None, seed: Seed = 0, n_boot: NBoot = 2000) -> None:
    """Table 2: train-to-test runs, Frozen vs Unfrozen, for every memory system."""
    from deltamem.analysis.transfer import table2 as run_table2

    _show(run_table2(run_dirs, _out(out, run_dirs), seed=seed, n_boot=n_boot))


def table3(run_dirs: RunDirs, out: Out = None, seed: Seed = 0, n_boot: NBoot = 2000) -> None:
    """Table 3: DeltaMem with both trees vs Task-Tree only vs Env-Tree only.

    The runs may come in any order: each run's variant is read from its
    use_task_tree / use_env_tree options.
    """
    from deltamem.analysis.ablation import table3 as run_table3

    _show(run_table3(run_dirs, _out(out, run_dirs), seed=seed, n_boot=n_boot))


def table5(run_dirs: RunDirs, out: Out = None) -> None:
    """Table 5: average whitespace tokens per stored memory unit (DeltaMem ROOT / RESIDUAL)."""
    from deltamem.analysis.token_stats import table5 as run_table5

    _show(run_table5(run_dirs, _out(out, run_dirs)))


def depth_bars(
    run_dirs: RunDirs,
    out: Out = None,
    plots: opts.Plots = True,
) -> None:
    """Figure 5: node counts per depth per tree, one stacked bar per run."""
    from deltamem.analysis.depth import depth_bars as run_depth_bars

    console.print(f"wrote {run_depth_bars(run_dirs, _out(out, run_dirs), plots=plots)}")


def grid(
    out: Annotated[Path, typer.Option(help="Directory of the grid (one run dir per cell).")],
    config: Annotated[Path | None, opts.CONFIG()] = None,
    env: Annotated[str | None, opts.ENV(_FROM_CONFIG)] = None,
    split: Annotated[str | None, opts.SPLIT(_FROM_CONFIG)] = None,
    episodes: Annotated[int | None, opts.EPISODES("every task of the split")] = None,
    tau_task: Annotated[str, typer.Option(help="τ_task values, comma-separated.")] = "0.75",
    tau_env: Annotated[str, typer.Option(help="τ_env values, comma-separated.")] = "0.85",
    k_cons: Annotated[str, typer.Option(help="K_cons values, e.g. 3,5,inf.")] = "5",
    workers: Annotated[int, opts.WORKERS()] = 2,
    engine: Annotated[str, opts.ENGINE()] = "local",
    address: Annotated[str | None, opts.ADDRESS()] = None,
    llm: Annotated[str | None, opts.LLM("local")] = None,
    embedder: Annotated[str | None, opts.EMBEDDER("minilm")] = None,
    seed: Annotated[int | None, opts.TASK_SEED("0")] = None,
    extractor: Annotated[str | None, opts.EXTRACTOR("structural")] = None,
    constrained: Annotated[
        bool | None,
        opts.CONSTRAINED("--constrained with a local model; --free with an API model, the "
                         "paper's setting"),
    ] = None,
    option: opts.MemoryOptions = None,
    plots: opts.Plots = True,
) -> None:
    """Figure 4: a DeltaMem run per (τ_task, τ_env, K_cons) cell in parallel, then heatmaps.

    A sweep of one system and one seed (`deltamem sweep` runs any number): the cells run in
    local processes, or as Ray tasks with --engine ray or --address (--address alone switches
    the engine to Ray). The --config file is shared by every cell; the grid's τ/K values come
    on top of --option."""
    from deltamem.analysis.grid import grid as run_grid_cmd
    from deltamem.analysis.grid import grid_settings, parse_floats, parse_k_values
    from deltamem.bench import parse_options

    def done(r: CellResult) -> None:
        console.print(f"{r.run_dir.name}: {r.episodes} episodes, success {r.success_rate:.1%}, "
                      f"mean reward {r.mean_reward:.3f}")

    settings = grid_settings(
        config, env=env, split=split, episodes=episodes, llm=llm, embedder=embedder, seed=seed,
        extractor=extractor, constrained=constrained,
        options=parse_options(option) if option else None,
    )
    path = run_grid_cmd(
        out, tau_task=parse_floats(tau_task), tau_env=parse_floats(tau_env),
        k_cons=parse_k_values(k_cons), workers=workers, plots=plots, on_cell=done,
        engine="ray" if address and engine == "local" else engine, address=address, **settings,
    )
    console.print(f"wrote {path}")


def calibrate(
    env: Annotated[str, opts.ENV()],
    split: Annotated[str, opts.SPLIT()],
    n: Annotated[int, typer.Option(help="Number of tasks (the first n of the split).")] = 40,
    embedder: Annotated[str, opts.EMBEDDER()] = "minilm",
    seed: Annotated[int, opts.TASK_SEED()] = 0,
    quantile: Annotated[
        float, typer.Option(help="q of the rule τ = q-quantile of nearest-neighbour scores.")
    ] = 0.75,
    bins: Annotated[int, typer.Option(help="Histogram bins.")] = 10,
    label_key: Annotated[
        str, typer.Option(help="Task.meta key of a task type, for a diagnostic only.")
    ] = "task_type",
    out: Annotated[Path | None, typer.Option(help="Also write calibrate.md here.")] = None,
) -> None:
    """Suggest τ per tree from the similarity distribution of sampled tasks."""
    from deltamem.analysis.calibrate import calibrate as run_calibrate
    from deltamem.analysis.calibrate import write_calibration

    cal = run_calibrate(env, split, n=n, embedder=embedder, seed=seed, quantile=quantile,
                        bins=bins, label_key=label_key or None)
    typer.echo("\n".join(cal.markdown()))
    if out is not None:
        console.print(f"wrote {write_calibration(cal, out)}")


def eval_recall(
    env: Annotated[list[str], opts.ENV()],
    train_split: Annotated[str, typer.Option(help="Split whose solved tasks fill the bank.")]
    = "train",
    test_split: Annotated[str, typer.Option(help="Held-out split that is recalled.")]
    = "unseen",
    n_train: Annotated[int, typer.Option(help="Train tasks per environment.")] = 60,
    n_test: Annotated[int, typer.Option(help="Held-out tasks per environment.")] = 30,
    embedder: Annotated[str, opts.EMBEDDER()] = "minilm",
    option: opts.MemoryOptions = None,
    env_option: Annotated[list[str] | None, opts.ENV_OPTIONS()] = None,
    seed: Annotated[int, opts.TASK_SEED()] = 0,
    out: Annotated[Path | None, typer.Option(help="Write recall.md/.json/.png here.")] = None,
) -> None:
    """Recall quality of DeltaMem's trees, with no LLM: warm rate, precision@1, scores.

    Per tree, on a bank filled from the environment's own solutions; the score
    distributions of relevant and irrelevant matches show where τ sits. --env may be
    repeated to interleave several environments (TextWorld families); --option sets
    DeltaMem's options.
    """
    from deltamem.analysis.recall_eval import eval_recall as run_eval
    from deltamem.analysis.recall_eval import write_report
    from deltamem.bench.config import parse_options

    report = run_eval(env, train_split=train_split, test_split=test_split, n_train=n_train,
                      n_test=n_test, embedder=embedder, options=parse_options(option or []),
                      env_options=parse_options(env_option or []), seed=seed,
                      progress=lambda msg: console.print(msg, end="\r"))
    typer.echo("\n".join(report.markdown()))
    if out is not None:
        console.print(f"wrote {write_report(report, out)}")


def register(app: typer.Typer) -> None:
    """Add ``compare``, ``table2``, ``table3``, ``table5``, ``depth-bars``, ``grid``,
    ``calibrate`` and ``eval-recall`` to ``app``."""
    app.command("compare")(compare)
    app.command("table2")(table2)
    app.command("table3")(table3)
    app.command("table5")(table5)
    app.command("depth-bars")(depth_bars)
    app.command("grid")(grid)
    app.command("calibrate")(calibrate)
    app.command("eval-recall")(eval_recall)
