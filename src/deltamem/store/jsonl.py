"""Export files: one JSON record a line (the records of :mod:`deltamem.store.records`).

:func:`export_jsonl` writes any store's ``iter_export()`` atomically; :func:`read_jsonl`
reads a file back record by record, naming the line of a malformed one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deltamem.errors import BankDamagedError, InvalidImportError, StoreError

__all__ = ["export_jsonl", "read_jsonl"]


def export_jsonl(store: Any, path: str | Path) -> int:
    """Write a bank (any store with ``iter_export()``) to a JSONL file atomically.

    Returns the number of records written. The records go to ``<path>.tmp``, which replaces
    ``path`` only when complete; on any failure it is removed and :class:`StoreError` says
    why (missing folder, a folder at ``path``, disk full, ...).
    """
    out = Path(path)
    if out.is_dir():
        raise StoreError(f"cannot export to {out}: it is a folder; give a file name")
    if not out.parent.is_dir():
        raise StoreError(f"cannot export to {out}: folder {out.parent} does not exist")
    n = 0
    tmp = Path(str(out) + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in store.iter_export():
                try:
                    line = json.dumps(rec, sort_keys=True, ensure_ascii=False)
                except (TypeError, ValueError) as e:  # only a damaged bank reads like this
                    raise BankDamagedError(
                        f"record {n + 1} of the bank cannot be written as JSON ({e}): the bank "
                        "is damaged"
                    ) from e
                f.write(line + "\n")
                n += 1
        tmp.replace(out)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise StoreError(f"cannot write {out}: {e.strerror or e}") from e
        raise
    return n


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of an export file; an unreadable file or a malformed line is a
    :class:`StoreError` (:class:`~deltamem.errors.InvalidImportError` for the content)
    naming it."""
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
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidImportError(f"{path}:{i}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise InvalidImportError(f"{path}:{i}: not valid JSON ({e.msg})") from e
            except RecursionError:
                raise InvalidImportError(f"{path}:{i}: JSON nested too deeply") from None
