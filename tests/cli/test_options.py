"""Shared options read the same in every command (:mod:`deltamem.cli.options`)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Annotated

import typer

from deltamem.cli import app, options

_DEFAULT_NOTE = re.compile(r" \(default: .*\)(\.?)$")


def _commands(group, path=()):
    """``(path, click command)`` of every command under a click group."""
    for name, cmd in getattr(group, "commands", {}).items():
        if getattr(cmd, "commands", None):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def _options(typer_app: typer.Typer) -> dict[str, list[tuple[str, str]]]:
    """``{long flag: [(command, help without its default note)]}`` of every option."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path, cmd in _commands(typer.main.get_command(typer_app)):
        for p in cmd.params:
            if p.param_type_name == "option" and p.name != "help":
                flag = max(p.opts, key=len)
                out[flag].append((" ".join(path), _DEFAULT_NOTE.sub(r"\1", p.help or "")))
    return out


def _declared() -> dict[str, set[str]]:
    """``{long flag: the help texts options.py declares for it}``."""
    out: dict[str, set[str]] = defaultdict(set)
    for shared in options.SHARED:
        out[shared.decls[0].split("/")[0]].add(shared.help)  # the long flag comes first
    return out


def problems(typer_app: typer.Typer) -> list[str]:
    """Every flag two commands take that options.py does not declare, and every use of a
    declared flag whose help is not the declared one."""
    declared, out = _declared(), []
    for flag, uses in sorted(_options(typer_app).items()):
        if flag in options.PER_COMMAND:
            continue
        if flag not in declared:
            if len({command for command, _ in uses}) > 1:
                out.append(f"{flag}: taken by several commands, not declared in options.py")
            continue
        out += [f"{flag} in `{command}`: {text!r} is not the help options.py declares"
                for command, text in uses if text not in declared[flag]]
    return out


def test_every_shared_option_has_one_help_text_across_commands():
    assert problems(app) == []


def test_every_declared_option_is_shared():
    uses = _options(app)
    for flag in _declared():
        assert len({command for command, _ in uses[flag]}) > 1, f"{flag}: one command only"


def test_an_option_re_declared_with_another_help_is_caught():
    other = typer.Typer()

    @other.command()
    def one(embedder: Annotated[str, options.EMBEDDER()] = "minilm") -> None: ...

    @other.command()
    def two(embedder: Annotated[str, typer.Option(help="Embedder spec.")] = "minilm",
            colour: Annotated[str, typer.Option()] = "red") -> None: ...

    @other.command()
    def three(colour: Annotated[str, typer.Option()] = "red") -> None: ...

    assert problems(other) == [
        "--colour: taken by several commands, not declared in options.py",
        "--embedder in `two`: 'Embedder spec.' is not the help options.py declares",
    ]


def test_a_command_default_goes_before_the_final_stop():
    assert options.EMBEDDER("minilm").help == (
        "Embedder (a bank keeps the one it was built with): minilm (bundled) | "
        "hashing[:DIM] | st:MODEL | wordllama (default: minilm).")
    assert options.EMBEDDER().help == options.EMBEDDER.help
    assert _DEFAULT_NOTE.sub(r"\1", options.EMBEDDER("x (y)").help) == options.EMBEDDER.help


def test_every_bank_argument_reads_the_same():
    texts = {p.help for _, cmd in _commands(typer.main.get_command(app)) for p in cmd.params
             if p.param_type_name == "argument" and p.metavar == "BANK"}
    assert texts == {options.BANK.help}
