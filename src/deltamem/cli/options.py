"""The options more than one command takes, each declared once with one help text.

A command takes a shared option as ``Annotated[type, EMBEDDER()]`` (or one of the
ready aliases below) and keeps its own Python default. Typer prints a default that is a
value (``[default: minilm]``); where a command's default is ``None`` because it is
decided later (from the TOML file, the memory system, the bank), the command says what
it is: ``EMBEDDER("minilm for every memory but none")`` appends ``(default: …)`` to the
one help text. So ``--embedder`` reads the same in every command, and each command's
default stays its own.

``--seed`` seeds different draws in different commands (the task stream of a run, the
bootstrap of a table, the k-means of a consolidation): one declaration per meaning, all
here. ``--out`` is each command's own output (a folder of tables, a grid, a report
file) and is declared by the command. ``tests/cli/test_options.py`` holds every command
to this: a flag two commands take is declared here, and reads the same wherever it
appears.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "ADDRESS",
    "BANK",
    "BOOTSTRAP_SEED",
    "CONFIG",
    "CONSTRAINED",
    "DOMAIN",
    "EMBEDDER",
    "ENGINE",
    "ENV",
    "ENV_OPTIONS",
    "EPISODES",
    "EXTRACTOR",
    "FORMAT",
    "GUIDE",
    "HOST",
    "JSON",
    "JUDGE",
    "KEYS",
    "KMEANS_SEED",
    "LLM",
    "MEMORY_OPTIONS",
    "N_BOOT",
    "PER_COMMAND",
    "PLOTS",
    "PORT",
    "PRICES",
    "SHARED",
    "SPLIT",
    "TASK_SEED",
    "TRAIN_EPISODES",
    "WORKERS",
    "Bank",
    "BootstrapSeed",
    "Domain",
    "Host",
    "Json",
    "Keys",
    "MemoryOptions",
    "NBoot",
    "Plots",
    "Shared",
]


@dataclass(frozen=True)
class Shared:
    """One shared option: its flags, its one help text and its fixed typer settings."""

    decls: tuple[str, ...]
    help: str
    settings: dict[str, Any] = field(default_factory=dict)

    def __call__(self, default: str | None = None) -> Any:
        """The typer option; ``default`` (when given) is the command's default in words,
        for a ``None`` typer cannot show, put at the end of the help as ``(default: …).``"""
        text = self.help
        if default is not None:
            text = f"{text.removesuffix('.')} (default: {default})."
        return typer.Option(*self.decls, help=text, **self.settings)


def _shared(*decls: str, help: str, **settings: Any) -> Shared:
    return Shared(decls, help, settings)


# -- a run's configuration ---------------------------------------------------------------------

CONFIG = _shared("--config", "-c",
                 help="TOML run configuration (keys = RunConfig fields); flags override it.")
ENV = _shared("--env", help="Environment: household, alfworld, scienceworld, textworld:cooking, "
              "webshop or another registered name.")
SPLIT = _shared("--split", help="Split of the environment's tasks: train, seen, unseen, or for "
                "BabyAI and WebShop train, test.")
TASK_SEED = _shared("--seed", help="Seed of the task stream: which tasks of the split are "
                    "played, in what order.")
EPISODES = _shared("--episodes", help="Evaluated episodes of each run: the first N tasks "
                   "of the task stream.")
TRAIN_EPISODES = _shared("--train-episodes", help="Build phase (train-to-test): the episodes "
                         "a bank is built from.")
LLM = _shared("--llm", help="LLM: local (bundled SmolLM2) | local:PATH.gguf | openai:MODEL | "
              "scripted.")
EMBEDDER = _shared("--embedder", help="Embedder (a bank keeps the one it was built with): "
                   "minilm (bundled) | hashing[:DIM] | st:MODEL | wordllama.")
PRICES = _shared("--prices", help="Price table (TOML, per model, per 1M tokens in/out) for "
                 "the report's cost section.")
FORMAT = _shared("--format", help="jsonl (every record of a bank) or skills (the Task-Tree's "
                 "successful chains as SKILL.md folders).")
EXTRACTOR = _shared("--extractor", help="How experience is extracted: structural (rules, no "
                    "LLM) or llm, by the --llm model.")
GUIDE = _shared("--guide", help="How the agent uses the recalled procedure: off = the paper's "
                "agent; hint = the next recalled step before the action list; prior = hint, "
                "and the choice among the actions realising it.")
CONSTRAINED = _shared("--constrained/--free", help="Pick among the admissible actions, or "
                      "generate free text.")
JUDGE = _shared("--judge", help="Outcome judge reading success from the trajectory: scripted "
                "(rules, no model) or an LLM spec such as local.")
MEMORY_OPTIONS = _shared("--option", "-o", help="Memory option key=value; repeatable.")
ENV_OPTIONS = _shared("--env-option", "-e", help="Environment option key=value, e.g. "
                      "difficulty=3 (TextWorld); repeatable.")

# -- many runs at once (sweep, grid) -----------------------------------------------------------

ENGINE = _shared("--engine", help="Where the cells run: local (processes on this machine) | "
                 "ray (Ray tasks) | auto (Ray when installed or --address is given, else "
                 "local).")
ADDRESS = _shared("--address", help="Join this Ray cluster (e.g. 127.0.0.1:6379 after `ray "
                  "start --head`) and run the cells there as Ray tasks; without it Ray, when "
                  "used, starts on this machine.")
WORKERS = _shared("--workers", help="Local engine: cells run at once.", min=1)

# -- results -----------------------------------------------------------------------------------

BOOTSTRAP_SEED = _shared("--seed", help="Bootstrap seed.")
N_BOOT = _shared("--n-boot", help="Bootstrap resamples.")
PLOTS = _shared("--plots/--no-plots", help="Also draw the figures as PNG (needs matplotlib).")
JSON = _shared("--json", help="Print JSON instead of text.")
KMEANS_SEED = _shared("--seed", help="k-means seed.")

# -- banks and servers -------------------------------------------------------------------------

DOMAIN = _shared("--domain", help="Domain preset of the banks created here.")
KEYS = _shared("--keys", help="API key file (`deltamem api-key TENANT` adds a key to it).")
HOST = _shared("--host", help="Address the HTTP server listens on.")
PORT = _shared("--port", help="Port the HTTP server listens on.")

SHARED: tuple[Shared, ...] = (
    CONFIG, ENV, SPLIT, TASK_SEED, EPISODES, TRAIN_EPISODES, LLM, EMBEDDER, EXTRACTOR, GUIDE,
    CONSTRAINED, JUDGE, MEMORY_OPTIONS, ENV_OPTIONS, ENGINE, ADDRESS, WORKERS, BOOTSTRAP_SEED,
    N_BOOT, PLOTS, JSON, KMEANS_SEED, DOMAIN, KEYS, HOST, PORT, FORMAT, PRICES,
)
"""Every shared option (the test walks the commands against it)."""

PER_COMMAND: frozenset[str] = frozenset({"--out"})
"""Flags several commands take with a meaning of their own each (see the module doc)."""


# -- the bank argument -------------------------------------------------------------------------

def _bank_arg(value: str) -> str:
    """Typer callback: a run directory stands for its bank."""
    from deltamem.store.location import resolve_bank

    return resolve_bank(value) if value else value


BANK = typer.Argument(
    metavar="BANK",
    help="A memory bank: a .db file, a postgresql://… URL, or a run directory (its bank).",
    callback=_bank_arg,
)

# -- ready aliases (one type, a default typer shows) -------------------------------------------

Bank = Annotated[str, BANK]
BootstrapSeed = Annotated[int, BOOTSTRAP_SEED()]
NBoot = Annotated[int, N_BOOT()]
Plots = Annotated[bool, PLOTS()]
Json = Annotated[bool, JSON()]
Domain = Annotated[str, DOMAIN()]
Keys = Annotated[Path, KEYS()]
Host = Annotated[str, HOST()]
MemoryOptions = Annotated[list[str] | None, MEMORY_OPTIONS()]
