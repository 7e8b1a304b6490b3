"""The ``deltamem`` command line: thin wrappers around library functions.

One module per group of commands, each with ``register(app)``:

* :mod:`.banks` — ``stats``, ``tree show``, ``export``, ``import``;
* :mod:`.runs` — ``run``, ``report``, ``demo``;
* :mod:`.analysis` — the paper's tables and figures from run directories;
* :mod:`.decocted` — ``decocted consolidate`` / ``quality`` (decocted-experience memories);
* :mod:`.graph` — ``graph show`` (AriGraph banks);
* :mod:`.serve` — ``serve``, ``view``, ``api-key`` (the HTTP service, ``deltamem[server]``);
* :mod:`.mcp` — ``mcp`` (the MCP server, ``deltamem[mcp]``).

A command imports what it calls only when it runs, so a missing extra fails that command
alone. Library errors (:class:`~deltamem.errors.DeltaMemError`) become a red one-line
message and exit code 1 here, and only here (:func:`main`).
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from deltamem.cli import analysis, banks, decocted, graph, mcp, runs, serve
from deltamem.errors import DeltaMemError

__all__ = ["app", "main", "missing_extra_message"]


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
for _group in (banks, runs, analysis, decocted, graph, serve, mcp):
    _group.register(app)

err = Console(stderr=True, emoji=False)  # "openai:m: ..." is not an emoji code


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
