"""The ``deltamem`` command line: thin wrappers around library functions.

Library errors (:class:`~deltamem.errors.DeltaMemError`) become a red one-line
message and exit code 1 here, and only here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from deltamem.errors import DeltaMemError


def _tidy_help() -> None:
    """Plain help forms on typer versions that print ``<bool>`` for every flag (``--help``
    included) and ``{bank}`` for arguments in usage lines: flags get no type, arguments
    show as ``BANK`` (``[BANK]`` when optional), as click prints them. Does nothing on
    typer versions without those methods."""
    from typer import core

    option, argument = getattr(core, "TyperOption", None), getattr(core, "TyperArgument", None)
    show_type = getattr(option, "display_type_rich", None)
    if show_type is not None and not getattr(show_type, "_deltamem", False):
        def display_type_rich(self, ctx):  # type: ignore[no-untyped-def]
            return None if getattr(self, "is_flag", False) else show_type(self, ctx)

        display_type_rich._deltamem = True  # type: ignore[attr-defined]
        option.display_type_rich = display_type_rich  # type: ignore[union-attr]
    if argument is not None and hasattr(argument, "_usage_display_name"):
        def _usage_display_name(self):  # type: ignore[no-untyped-def]
            name = self.metavar or (self.name or "").upper()
            name = name if self.required else f"[{name}]"
            return name + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = _usage_display_name


_tidy_help()

app = typer.Typer(
    name="deltamem",
    help="Experience memory for LLM agents: inspect banks, run benchmarks, compare memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tree_app = typer.Typer(help="Look at the residual trees of a bank.", no_args_is_help=True)
app.add_typer(tree_app, name="tree")

console = Console()
err = Console(stderr=True)

def _bank_arg(value: str) -> str:
    """Typer callback: a run directory stands for its bank."""
    from deltamem.bench.banks import resolve_bank

    return resolve_bank(value) if value else value


BankArg = Annotated[
    str,
    typer.Argument(
        metavar="BANK",
        help="A memory bank: a .db file, a postgresql://… URL, or a run directory (its bank).",
        callback=_bank_arg,
    ),
]


def _open_readonly(bank: str):
    """Open a DeltaMem bank for inspection; other systems' banks get a clear error."""
    from deltamem.memories import bank_system
    from deltamem.memories.deltamem import DeltaMem

    system = bank_system(bank)
    if system != "deltamem":
        raise DeltaMemError(
            f"{bank} is a {system!r} bank; trees exist only in DeltaMem banks "
            f"(try `deltamem stats {bank}`)"
        )
    return DeltaMem.open(bank, embedder=None, readonly=True)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def common_start(texts: list[str], *, min_chars: int = 24) -> str:
    """The opening words every text shares (whitespace-normalised), when there are at
    least two texts and they are ``min_chars`` long or more; else ``""``. It ends at a
    word boundary, so what follows it in each text starts with a whole word."""
    norm = [" ".join(t.split()) for t in texts]
    if len(norm) < 2:
        return ""
    first, last = min(norm), max(norm)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    prefix = first[:n]
    if not all(len(t) == n or t[n] == " " for t in norm):
        prefix = prefix[: prefix.rfind(" ") + 1]  # back to the start of the word cut in two
    return prefix if len(prefix.strip()) >= min_chars else ""


@tree_app.command("show")
def tree_show(
    bank: BankArg,
    which: Annotated[str, typer.Option("--tree", help="task, env or both.")] = "both",
    width: Annotated[int, typer.Option(help="Characters of trigger text shown.")] = 70,
    full: Annotated[bool, typer.Option(help="Also print each node's payload.")] = False,
) -> None:
    """Print both trees: kind, label, depth, success hits, consolidated, trigger.

    The opening words that every trigger of a tree shares (a scene's "You are in the
    middle of a room. …") are printed once above it and left out of each node, so the
    part that tells nodes apart fits the width.
    """
    if which not in ("task", "env", "both"):
        raise DeltaMemError(f"--tree must be task, env or both, not {which!r}")
    mem = _open_readonly(bank)
    try:
        for name in ("task", "env") if which == "both" else (which,):
            nodes = mem.nodes(name)  # type: ignore[arg-type]
            title = "Task-Tree (skills)" if name == "task" else "Env-Tree (knowledge)"
            shared = common_start([n.trigger for n in nodes])
            heading = f"[bold]{title}[/bold] — {len(nodes)} nodes"
            if shared:
                heading += f"\n[dim]every trigger starts “{_short(shared, 2 * width)}…”[/dim]"
            root = Tree(heading)
            handles = {}
            for n in nodes:
                colour = "green" if n.label == "SUCCESS" else "red"
                flags = []
                if n.consolidated:
                    flags.append("[magenta]consolidated[/magenta]")
                if n.origin == "consolidated":
                    flags.append(f"[magenta]R* of {n.source[:8] if n.source else '?'}[/magenta]")
                label = (
                    f"[{colour}]{n.kind} {n.label}[/{colour}] d={n.depth} hits={n.success_hits} "
                    f"{' '.join(flags)} [dim]{n.id[:8]}[/dim] "
                    f"“{_trigger(n.trigger, shared, width)}”"
                ).replace("  ", " ")
                parent = handles.get(n.parent, root)
                h = parent.add(label)
                if full:
                    h.add(f"[dim]when:[/dim] {_short(n.payload.activation, 200)}")
                    h.add(f"[dim]what:[/dim] {_short(n.payload.procedure, 400)}")
                handles[n.id] = h
            console.print(root)
    finally:
        mem.close()


def _trigger(trigger: str, shared: str, width: int) -> str:
    text = " ".join(trigger.split())
    if shared and text.startswith(shared) and text[len(shared):].strip():
        return "…" + _short(text[len(shared):], width - 1)
    return _short(text, width)


@app.command()
def stats(
    bank: BankArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Node counts by tree, depth, kind and label; average whitespace tokens per ROOT/RESIDUAL."""
    from deltamem.memories import bank_system, open_bank

    if bank_system(bank) != "deltamem":
        other = open_bank(bank)
        try:
            console.print_json(json.dumps({"bank": str(bank), **other.stats()}, default=str))
        finally:
            other.close()
        return
    mem = _open_readonly(bank)
    try:
        s = mem.stats()
        meta = mem.store.meta()
    finally:
        mem.close()
    if as_json:
        console.print_json(json.dumps({"bank": str(bank), "meta": meta, **s}))
        return
    console.print(
        f"[bold]{bank}[/bold]  embedder {meta.get('embedder_name')} (dim "
        f"{meta.get('embedder_dim')}), schema v{meta.get('schema_version')}, "
        f"domain {meta.get('config', {}).get('domain')}, "
        f"{s['episodes_learned']} episodes learned, {s['rejections']} rejected outputs"
    )
    t = Table("tree", "nodes", "ROOT", "RESIDUAL", "SUCCESS", "FAILURE", "consolidated", "by depth")
    for name in ("task", "env"):
        k, lab = s["kind"][name], s["label"][name]
        depth = ", ".join(f"{d}:{c}" for d, c in s["depth_histogram"][name].items()) or "-"
        t.add_row(
            name,
            str(s["nodes"][name]),
            str(k.get("ROOT", 0)),
            str(k.get("RESIDUAL", 0)),
            str(lab.get("SUCCESS", 0)),
            str(lab.get("FAILURE", 0)),
            str(s["consolidated"][name]),
            depth,
        )
    console.print(t)
    tok = s["avg_tokens"]
    console.print(
        f"avg whitespace tokens per node (paper Table 5): ROOT {tok['ROOT']}, "
        f"RESIDUAL {tok['RESIDUAL']}"
    )


@app.command("export")
def export_cmd(
    bank: BankArg,
    out: Annotated[Path, typer.Argument(help="JSONL file to write.")],
) -> None:
    """Write every record of a bank (meta, nodes, logs) to a JSONL file."""
    from deltamem.portable import export_bank

    n = export_bank(bank, out)
    console.print(f"wrote {n} records to {out}")


@app.command("import")
def import_cmd(
    source: Annotated[Path, typer.Argument(help="JSONL file made by `deltamem export`.")],
    bank: Annotated[str, typer.Argument(help="New bank to create (must not hold nodes).")],
) -> None:
    """Load a JSONL export into a new bank."""
    from deltamem.portable import import_bank

    n = import_bank(source, bank)
    console.print(f"imported {n} nodes into {bank}")


@app.command()
def run(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML run configuration (keys = RunConfig fields); "
                     "flags override it."),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Run directory; resumes if it exists (default: "
                     "runs/ENV-SPLIT-MEMORY)."),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(help="Environment: household, alfworld, scienceworld, textworld:cooking, "
                     "webshop, ... (default: household)"),
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="Split to evaluate: train, seen, unseen (default: seen).")
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(help="Memory system: none, deltamem, synapse, awm, ... (default: none)"),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(help="local (bundled SmolLM2) | local:PATH.gguf | openai:MODEL | scripted "
                     "(default: local)"),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(help="minilm (bundled) | hashing[:DIM] | st:MODEL (default: minilm for "
                     "every memory but none)"),
    ] = None,
    extractor: Annotated[
        str | None, typer.Option(help="structural | llm (default: structural)")
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(help="Number of episodes (default: every task of the split).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Task-order seed (default: 0).")] = None,
    protocol: Annotated[
        str | None, typer.Option(help="online | train-to-test (default: online)")
    ] = None,
    train_agent: Annotated[
        str | None,
        typer.Option(help="train-to-test: who plays the build phase: react (the LLM agent, "
                     "default) or expert / expert:noise=P (the environment's solution, "
                     "each action replaced at random with probability P).")
    ] = None,
    train_episodes: Annotated[
        int | None, typer.Option(help="train-to-test: build-phase episodes (default: all).")
    ] = None,
    guide: Annotated[
        str | None,
        typer.Option(help="How the agent uses the recalled procedure: off (the paper's "
                     "agent, default), hint (next recalled step before the action list), "
                     "prior (hint, and the choice among the actions realising it).")
    ] = None,
    constrained: Annotated[
        bool | None,
        typer.Option("--constrained/--free",
                     help="Pick among the admissible actions, or generate free text "
                          "(default: --constrained with a local model; --free with an API "
                          "model, the paper's setting)."),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Step cap per episode (default: the environment's).")
    ] = None,
    repeat_limit: Annotated[
        int | None,
        typer.Option(help="Constrained mode: leave out an action already taken this many "
                     "times from the current observation (default: off)."),
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="Memory option key=value.")
    ] = None,
    env_option: Annotated[
        list[str] | None,
        typer.Option("--env-option", "-e",
                     help="Environment option key=value, e.g. difficulty=3 (TextWorld)."),
    ] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip report.md.")] = False,
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
        console.print(f"report: {make_report(result.run_dir)}")


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory made by `deltamem run`.")],
    plots: Annotated[bool, typer.Option(help="Also draw PNG plots (needs matplotlib).")] = True,
) -> None:
    """Write report.md (and PNG plots) for a run directory."""
    from deltamem.bench import report as make_report

    console.print(f"wrote {make_report(run_dir, plots=plots)}")


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option(help="Where the run directories go.")] = Path(
        "runs/demo"
    ),
    episodes: Annotated[
        int, typer.Option(help="Held-out games played per memory system.")
    ] = 20,
    train_episodes: Annotated[
        int, typer.Option(help="Demonstrations the banks are built from.")
    ] = 30,
    llm: Annotated[
        str, typer.Option(help="LLM spec (default: the bundled local model).")
    ] = "local",
    env: Annotated[str, typer.Option(help="Environment spec.")] = "household",
    split: Annotated[str, typer.Option(help="Evaluation split (held out).")] = "unseen",
    seed: Annotated[int, typer.Option(help="Seed of the evaluation games.")] = 0,
    guide: Annotated[
        str, typer.Option(help="How the agent uses recall: off, hint or prior.")
    ] = "prior",
    baseline: Annotated[
        list[str] | None,
        typer.Option(help="Also compare this memory (e.g. synapse); repeatable."),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(min=1, help="Systems run at once, each in its own process (default: one "
                     "per system, at most the CPU cores; 1: one after the other)."),
    ] = None,
) -> None:
    """The main job: held-out games with no memory and with a DeltaMem bank of demonstrations.

    The banks are built from demonstrations, then frozen; prints success with 95%
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
                       jobs=jobs)
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


def _register_plugins() -> None:
    """Commands contributed by sub-packages (analyses, graph memory, service)."""
    import importlib

    for module in (
        "deltamem.analysis.cli",
        "deltamem.memories.decocted.cli",
        "deltamem.memories.arigraph.cli",
        "deltamem.server.cli",
        "deltamem.integrations.mcp.cli",
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and module.startswith(e.name):
                continue  # that sub-package is not part of this installation
            raise
        mod.register(app)


_register_plugins()


def missing_extra_message(e: ModuleNotFoundError) -> str | None:
    """One line naming the ``deltamem[...]`` extra that provides the missing module, from
    the installed package's own metadata (``None``: no extra provides it)."""
    import re
    from importlib import metadata

    module = (e.name or "").split(".")[0]
    if not module:
        return None
    try:
        requires = metadata.requires("deltamem") or []
    except metadata.PackageNotFoundError:
        return None
    aliases = {"llama_cpp": "llama-cpp-python", "torch": "sentence-transformers"}
    wanted = aliases.get(module, module).lower().replace("_", "-")
    extras: list[str] = []
    for req in requires:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if (name and extra and name.group(0).lower().replace("_", "-") == wanted
                and extra.group(1) not in ("dev", *extras)):
            extras.append(extra.group(1))
    if not extras:
        return None
    how = " or ".join(f"pip install 'deltamem[{x}]'" for x in extras)
    return f"this command needs the {module!r} package, which is not installed: {how}"


def _one_line(text: str) -> str:
    """``text`` on one line (messages quoting a validation error may span several)."""
    return " ".join(text.split())


def _os_message(e: OSError) -> str:
    """One line for a file-system error: what failed, on which path."""
    what = e.strerror or type(e).__name__
    where = f" {e.filename}" if e.filename else ""
    if isinstance(e, FileExistsError):
        return f"{e.filename} exists and is not a folder" if e.filename else what
    if isinstance(e, IsADirectoryError):
        return f"{e.filename} is a folder, not a file" if e.filename else what
    if isinstance(e, NotADirectoryError):
        return f"a part of the path{where} is a file, not a folder"
    return f"{what}:{where}" if where else what


def main() -> None:
    """Entry point: run the app, turning library errors (and file-system errors on paths the
    user gave) into one plain line, printed literally (no markup), and exit code 1."""
    from rich.markup import escape

    try:
        app()
    except DeltaMemError as e:
        err.print(f"[red]error:[/red] {escape(_one_line(str(e)))}", soft_wrap=True)
        sys.exit(1)
    except OSError as e:  # a file or folder the user named: say which and what is wrong
        err.print(f"[red]error:[/red] {escape(_os_message(e))}", soft_wrap=True)
        sys.exit(1)
    except ModuleNotFoundError as e:
        message = missing_extra_message(e)
        if message is None:
            raise
        err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
