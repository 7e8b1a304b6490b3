"""Where a bank is: a run directory stands for the bank it keeps, so every command that reads
a bank takes a run directory instead (``deltamem stats runs/x`` means ``runs/x/bank.db``).

Path logic only (no bank is opened here); :mod:`deltamem.store.factory` opens what it names.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from deltamem.errors import InvalidInputError

__all__ = ["is_run_dir", "resolve_bank"]

_RUN_MARKERS = ("config.json", "episodes.jsonl")
_BANK = "bank.db"


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` is a run directory (made by ``deltamem run``: it holds the run's
    ``config.json`` or ``episodes.jsonl``)."""
    p = Path(path)
    return p.is_dir() and any((p / m).exists() for m in _RUN_MARKERS)


def resolve_bank(bank: str | Path) -> str:
    """The bank ``bank`` names: a run directory stands for its ``bank.db`` (for a
    train-to-test run, the bank built in the train phase; its evaluation copies are
    ``bank-frozen.db`` / ``bank-unfrozen.db`` next to it). Anything else (a bank file,
    a ``postgresql://`` URL, a path that does not exist) is returned unchanged.

    Raises :class:`InvalidInputError` for a run directory that holds no bank (memory
    ``none`` keeps none) and for any other directory (a bank is a file).
    """
    text = str(bank)
    if "://" in text:
        return text
    if not is_run_dir(text):
        if Path(text).is_dir():
            raise InvalidInputError(
                f"{text} is a directory, not a bank: give a bank file, or a run directory "
                f"(one with config.json), which stands for its {_BANK}"
            )
        return text
    p = Path(text)
    if (p / _BANK).exists():
        return str(p / _BANK)
    memory = "?"
    with contextlib.suppress(OSError, ValueError, AttributeError):
        memory = json.loads((p / "config.json").read_text(encoding="utf-8")).get("memory", "?")
    raise InvalidInputError(
        f"{p} is a run directory without a bank ({_BANK}); memory {memory!r} "
        "keeps none, or the run has not played an episode yet"
    )
