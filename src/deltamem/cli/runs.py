"""``deltamem run``, ``sweep``, ``report`` and ``demo``: benchmarks and their reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from deltamem.cli import options as opts
from deltamem.cli.banks import tree_show

if TYPE_CHECKING:
    from deltamem.bench.cells import CellOutcome

__all__ = ["register"]

console = Console()


def register(app: typer.Typer) -> None:
    """Add ``run``, ``sweep``, ``report`` and ``demo`` to the ``deltamem`` app."""
    app.command()(run)
    app.command()(sweep)
    app.command()(report)
    app.command()(demo)


def run(
    config: Annotated[Path | None, opts.CONFIG()] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Run directory; resumes if it exists (default: "
                     "runs/ENV-SPLIT-MEMORY)."),
    ] = None,
    env: Annotated[str | None, opts.ENV("household")] = None,
    split: Annotated[str | None, opts.SPLIT("seen")] = None,
    memory: Annotated[
        str | None,
        typer.Option(help="Memory system: none, deltamem, synapse, awm, ... (default: none)"),
    ] = None,
    llm: Annotated[str | None, opts.LLM("local")] = None,
    embedder: Annotated[str | None, opts.EMBEDDER("minilm for every memory but none")] = None,
    extractor: Annotated[str | None, opts.EXTRACTOR("structural")] = None,
    episodes: Annotated[int | None, opts.EPISODES("every task of the split")] = None,
    seed: Annotated[int | None, opts.TASK_SEED("0")] = None,
    protocol: Annotated[
        str | None, typer.Option(help="online | train-to-test (default: online)")
    ] = None,
    train_agent: Annotated[
        str | None,
        typer.Option(help="train-to-test: who plays the build phase: react (the LLM agent, "
                     "default) or expert / expert:noise=P[,budget=N] (the environment's solution, "
                     "each action replaced at random with probability P; at most N steps).")
    ] = None,
    train_episodes: Annotated[int | None, opts.TRAIN_EPISODES("all")] = None,
    guide: Annotated[str | None, opts.GUIDE("off")] = None,
    constrained: Annotated[
        bool | None,
        opts.CONSTRAINED("--constrained with a local model; --free with an API model, the "
                         "paper's setting"),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Step cap per episode (default: the environment's).")
    ] = None,
    repeat_limit: Annotated[
        int | None,
        typer.Option(help="Constrained mode: leave out an action already taken this many "
                     "times from the current observation (default: off)."),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(min=0.0, max=2.0,
                     help="The acting agent's sampling temperature (default: 0, greedy).")
    ] = None,
    attempts: Annotated[
        int | None,
        typer.Option(min=1, help="Play every evaluated game this many times, each attempt "
                     "from a fresh bank (needs --temperature above 0; default: 1).")
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, max=256, help="Play this many episodes at once where they are "
                     "independent (phases that never learn, e.g. frozen); for API models. "
                     "Learning stays in stream order (default: 1).")
    ] = None,
    option: opts.MemoryOptions = None,
    env_option: Annotated[list[str] | None, opts.ENV_OPTIONS()] = None,
    judge: Annotated[
        str | None,
        opts.JUDGE("none: the environment's outcome is learned; with a judge its verdict is, "
                   "and both are recorded"),
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip report.md.")] = False,
    prices: Annotated[Path | None, opts.PRICES(
        "$DELTAMEM_PRICES, else prices.toml in the run directory")] = None,
) -> None:
    """Run (or resume) a benchmark: recall → play → learn over a task stream.

    Every option can also come from the TOML file; an option left out takes the
    default shown. Progress goes to stderr: a live bar on a terminal, one line per
    episode otherwise.
    """
    from deltamem.bench import load_config, parse_options
    from deltamem.bench import report as make_report
    from deltamem.bench import run as run_bench

    cfg = load_config(
        config,
        run_dir=run_dir,
        env=env,
        split=split,
        memory=memory,
        llm=llm,
        embedder=embedder,
        extractor=extractor,
        episodes=episodes,
        seed=seed,
        protocol=protocol,
        train_agent=train_agent,
        train_episodes=train_episodes,
        guide=guide,
        constrained=constrained,
        max_steps=max_steps,
        repeat_limit=repeat_limit,
        temperature=temperature,
        attempts=attempts,
        concurrency=concurrency,
        judge=judge,
        memory_options=parse_options(option) if option else None,
        env_options=parse_options(env_option) if env_option else None,
    )
    console.print(
        f"run {cfg.run_dir}: {cfg.env} ({cfg.split}), memory {cfg.memory}, llm {cfg.llm}, "
        f"decoding {cfg.decoding}"
        + (f", embedder {cfg.embedder}" if cfg.embedder else ""),
        markup=False, highlight=False, soft_wrap=True,
    )
    result = run_bench(cfg, progress=None)
    for ph in result.phases:
        console.print(
            f"[bold]{ph.phase}[/bold]: {ph.episodes} episodes, success "
            f"{ph.success_rate:.1%}, mean reward {ph.mean_reward:.3f}, "
            f"{ph.wall_s:.0f} s playing and learning"
        )
    console.print(f"decoding: {cfg.decoding}", markup=False, highlight=False)
    banks = sorted(Path(result.run_dir).glob("bank*.db"))
    if banks:
        console.print("bank: " + ", ".join(str(b) for b in banks), markup=False,
                      highlight=False)
    if not no_report:
        console.print(f"report: {make_report(result.run_dir, prices=prices)}")


def sweep(
    spec: Annotated[Path, typer.Argument(help="Sweep spec (TOML) with run, sweep and resources "
                                         "tables; see the README, Beyond one machine.")],
    out: Annotated[
        Path | None, typer.Option(help="Folder of the cells and tables (default: the spec's out).")
    ] = None,
    engine: Annotated[str, opts.ENGINE()] = "auto",
    address: Annotated[str | None, opts.ADDRESS()] = None,
    workers: Annotated[int | None, opts.WORKERS("the cores / each cell's cores")] = None,
    plots: opts.Plots = True,
) -> None:
    """Run (or resume) a sweep of systems x environments x seeds x settings.

    One run per cell, as Ray tasks or local processes; then the results table and the Figure 4
    pages."""
    from deltamem.analysis.sweep import sweep as run_sweep

    def done(o: CellOutcome) -> None:
        how = ("finished before" if o.skipped else
               f"{o.episodes} episodes, resumed at {o.start_index}, {o.seconds:.0f} s on "
               f"{o.host} pid {o.pid}")
        console.print(f"{o.cell.name}: {how}", markup=False, highlight=False)

    result = run_sweep(spec, out=out, engine=engine, address=address,  # type: ignore[arg-type]
                       workers=workers, plots=plots, on_cell=done)
    console.print(f"results: {result.results}", markup=False, highlight=False)
    for g in result.grids:
        console.print(f"grid: {g}", markup=False, highlight=False)


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `deltamem run`.")],
    plots: opts.Plots = True,
    prices: Annotated[Path | None, opts.PRICES(
        "$DELTAMEM_PRICES, else prices.toml in the run directory")] = None,
) -> None:
    """Write report.md (and PNG plots) for a run directory, with what the run cost."""
    from deltamem.bench import report as make_report
    from deltamem.bench.cost import COST_FILE

    path = make_report(run_dir, plots=plots, prices=prices)
    cost = json.loads((path.parent / COST_FILE).read_text(encoding="utf-8"))
    money = ("" if cost["money"] is None else
             f", {cost['money']:.4f} {cost['currency']}")
    console.print(f"wrote {path} ({cost['input_tokens']} tokens in, "
                  f"{cost['output_tokens']} out{money})", markup=False, highlight=False)


def demo(
    out_dir: Annotated[Path, typer.Option(help="Where the run directories go.")] = Path(
        "runs/demo"
    ),
    episodes: Annotated[int, opts.EPISODES()] = 20,
    train_episodes: Annotated[int, opts.TRAIN_EPISODES()] = 30,
    llm: Annotated[str, opts.LLM()] = "local",
    env: Annotated[str, opts.ENV()] = "household",
    split: Annotated[str, opts.SPLIT()] = "unseen",
    seed: Annotated[int, opts.TASK_SEED()] = 0,
    guide: Annotated[str, opts.GUIDE()] = "prior",
    baseline: Annotated[
        list[str] | None,
        typer.Option(help="Also compare this memory (e.g. synapse); repeatable."),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(min=1, help="Systems run at once, each in its own process (default: one "
                     "per system, at most the CPU cores; 1: one after the other)."),
    ] = None,
    max_listed_actions: Annotated[
        int,
        typer.Option(min=0, help="List the admissible actions in the prompt when there are at "
                     "most this many (default 0: never; the constrained choice scores them "
                     "anyway, and the list was most of the prompt the model read each step)."),
    ] = 0,
) -> None:
    """The main job: held-out games with no memory and with a DeltaMem bank of demonstrations.

    Each memory system's bank is built from --train-episodes demonstrations, then frozen,
    and the agent plays --episodes held-out games with it; prints success with 95%
    intervals, the difference, one recall and the trees.
    """
    from deltamem.bench.stats import bootstrap_ci
    from deltamem.demo import DEFAULT_SYSTEMS, example_recall
    from deltamem.demo import demo as run_demo

    systems = tuple(dict.fromkeys([*DEFAULT_SYSTEMS, *(baseline or [])]))
    console.print(
        f"demo: {train_episodes} expert demonstrations on {env} train build each bank; "
        f"then {llm} (guide {guide}) plays {episodes} held-out {split} games per system "
        f"({', '.join(systems)}), bank frozen", markup=False, highlight=False)
    outcome = run_demo(out_dir, episodes=episodes, train_episodes=train_episodes, llm=llm,
                       env=env, split=split, seed=seed, guide=guide, systems=systems,
                       jobs=jobs, max_listed_actions=max_listed_actions)
    t = Table("memory", "games", "success", "95% CI", "mean steps", "bank units", "wall time")
    for r in outcome.results:
        ph = r.result.phase("frozen")
        lo, hi = bootstrap_ci(r.successes) if r.successes else (0.0, 0.0)
        t.add_row(
            r.memory,
            str(len(r.successes)),
            f"{r.rate:.1%} ({int(sum(r.successes))}/{len(r.successes)})",
            f"{lo:.1%} - {hi:.1%}",
            f"{ph.mean_steps:.1f}",
            str(ph.bank_size if ph.bank_size is not None else 0),
            f"{sum(p.wall_s for p in r.result.phases):.0f} s",
        )
    console.print(t)
    for memory, g in outcome.gains.items():
        console.print(f"{memory} - none: {g.describe()}", markup=False, highlight=False)
    console.print(outcome.verdict(), markup=False, highlight=False)
    example = example_recall(outcome)
    if example is not None:
        goal, text = example
        console.print(f"\nWhat DeltaMem recalled for the held-out game '{goal}':",
                      markup=False, highlight=False)
        console.print(text or "(nothing: no stored experience was similar enough)",
                      markup=False, highlight=False)
    bank = out_dir / "deltamem" / "bank.db"
    if bank.exists():
        console.print(f"\nbank built from demonstrations: {bank}", markup=False,
                      highlight=False)
        tree_show(str(bank), which="both", width=70, full=False)
    console.print(f"demo wall time {outcome.seconds:.0f} s", markup=False, highlight=False)
