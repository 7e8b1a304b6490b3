"""Export files: one JSON record a line (the records of :mod:`deltamem.store.records`).

:func:`export_jsonl` writes any store's ``iter_export()`` atomically, between a header and a
trailer (:mod:`deltamem.store.frames`: counts by record type, a checksum over the records);
:func:`read_jsonl` reads a file back record by record, naming the line of a malformed one;
:func:`read_export` reads it for an import, checking that it is whole.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from deltamem.errors import BankDamagedError, InvalidImportError, StoreError
from deltamem.store.frames import Tally, Unframe, canonical_line, header, trailer

__all__ = ["export_jsonl", "read_export", "read_jsonl"]


def export_jsonl(store: Any, path: str | Path) -> int:
    """Write a bank (any store with ``iter_export()``) to a JSONL file atomically.

    Returns the number of records written (without the header and trailer). The records
    are read once, into ``<path>.body.tmp`` while counted and hashed; then ``<path>.tmp``
    gets the header, the records and the trailer and replaces ``path`` only when complete.
    On any failure both are removed and :class:`StoreError` says why (missing folder, a
    folder at ``path``, disk full, ...).
    """
    out = Path(path)
    if out.is_dir():
        raise StoreError(f"cannot export to {out}: it is a folder; give a file name")
    if not out.parent.is_dir():
        raise StoreError(f"cannot export to {out}: folder {out.parent} does not exist")
    tally = Tally()
    tmp = Path(str(out) + ".tmp")
    body = Path(str(out) + ".body.tmp")
    try:
        with open(body, "w", encoding="utf-8") as f:
            for rec in store.iter_export():
                try:
                    line = canonical_line(rec)
                except (TypeError, ValueError) as e:  # only a damaged bank reads like this
                    raise BankDamagedError(
                        f"record {tally.records + 1} of the bank cannot be written as JSON "
                        f"({e}): the bank is damaged"
                    ) from e
                f.write(line)
                tally.add(rec, line)
        with open(tmp, "w", encoding="utf-8") as f, open(body, encoding="utf-8") as b:
            f.write(canonical_line(header(tally)))
            shutil.copyfileobj(b, f)
            f.write(canonical_line(trailer(tally)))
        body.unlink()
        tmp.replace(out)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        body.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise StoreError(f"cannot write {out}: {e.strerror or e}") from e
        raise
    return tally.records


def read_export(path: str | Path, *, partial: bool = False) -> Unframe:
    """The records of the export file ``path`` for an import (header and trailer removed).

    Iterating it checks that the file is whole when it ends (:class:`~deltamem.store.frames.
    Unframe`): a cut file raises :class:`~deltamem.errors.IncompleteExportError` naming what
    is missing (a final line cut off mid-record is named too), unless ``partial``: then the
    records that are there are imported, a cut final line left out. After
    the iteration, ``.result`` says what was found (``.result.notes``: what to tell the user).
    """
    un: Unframe

    def cut(line: int) -> None:
        un.cut_line = line

    un = Unframe(read_jsonl(path, on_cut=cut), partial=partial,
                 source=str(path))
    return un


def read_jsonl(
    path: str | Path, *, on_cut: Callable[[int], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Records of an export file; an unreadable file or a malformed line is a
    :class:`StoreError` (:class:`~deltamem.errors.InvalidImportError` for the content)
    naming it. A last line without its newline that is not valid JSON was cut off: it is
    named as such, or, given ``on_cut``, reported there (with its line number) and skipped."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; a generator owns it
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
    with f:
        i = 0
        while True:
            try:
                raw = f.readline()
            except OSError as e:
                raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
            if not raw:
                return
            i += 1
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                if not raw.endswith(b"\n"):  # readline ends without one only at the end
                    if on_cut is not None:
                        on_cut(i)
                        return
                    raise InvalidImportError(
                        f"{path}:{i}: the last line is cut off mid-record (the file was cut "
                        "short); nothing was imported"
                    ) from e
                if isinstance(e, UnicodeDecodeError):
                    raise InvalidImportError(f"{path}:{i}: not UTF-8 text") from None
                raise InvalidImportError(f"{path}:{i}: not valid JSON ({e.msg})") from e
            except RecursionError:
                raise InvalidImportError(f"{path}:{i}: JSON nested too deeply") from None
            yield rec
