"""Open a bank store from a path or a URL; read, copy and load bank files.

``open_store`` is the one place that maps "where the bank is" to a store:
``postgresql://…`` / ``postgres://…`` URLs give a
:class:`~deltamem.store.postgres.PostgresStore` (needs ``deltamem[postgres]``),
anything else is a SQLite file path (``":memory:"`` for a throwaway bank).

A bank is a node bank (DeltaMem's trees) or an item bank (the flat memories';
:class:`~deltamem.store.items.ItemStore`), told apart by the memory system an item bank
records in its meta (:func:`recorded_system`). :func:`export_bank_file` and
:func:`import_bank_file` copy either kind through the JSONL records of
:mod:`deltamem.store.records`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from deltamem.errors import InvalidInputError, StoreError
from deltamem.store.base import ConfigCheck, Store

__all__ = [
    "export_bank_file", "import_bank_file", "is_url", "new_bank_file", "open_store",
    "recorded_system",
]


def is_url(location: str | Path) -> bool:
    """True when ``location`` names a PostgreSQL bank rather than a file."""
    from deltamem.store.postgres import is_postgres_url

    return is_postgres_url(location)


def open_store(
    location: str | Path, *, readonly: bool = False, config_check: ConfigCheck | None = None
) -> Store:
    """The store of the node bank at ``location`` (created unless ``readonly``).

    ``config_check``: what an import into it checks a bank configuration with (see
    :data:`~deltamem.store.base.ConfigCheck`).

    Raises :class:`~deltamem.errors.StoreError` when it cannot be opened
    (missing with ``readonly``, unreachable server, not a deltamem bank, newer
    schema) and :class:`~deltamem.errors.ConfigError` for a malformed URL.
    """
    if is_url(location):
        from deltamem.store.postgres import PostgresStore

        return PostgresStore(str(location), readonly=readonly, config_check=config_check)
    from deltamem.store.sqlite import SQLiteStore

    return SQLiteStore(location, readonly=readonly, config_check=config_check)


def recorded_system(location: str | Path) -> str | None:
    """The memory system the bank at ``location`` records in its meta (an item bank's
    ``system``), or ``None`` for a bank that records none: a node bank (a PostgreSQL bank
    always is one).

    Reads the file without opening it as a store (no lock; a bank in a read-only folder
    too). Raises :class:`~deltamem.errors.StoreError` when there is no bank at
    ``location`` or it is not a readable bank.
    """
    if is_url(location):
        return None
    from deltamem.store.sqlite import read_meta_value

    return read_meta_value(location, "system")


def _open_any(location: str | Path, *, readonly: bool, items: bool,
              config_check: ConfigCheck | None = None) -> Any:
    if items:
        from deltamem.store.items import ItemStore

        return ItemStore(str(location), readonly=readonly)
    return open_store(location, readonly=readonly, config_check=config_check)


def export_bank_file(location: str | Path, path: str | Path) -> int:
    """Write every record of the bank at ``location`` (node or item bank) to the JSONL file
    ``path`` atomically; returns the record count."""
    from deltamem.store.jsonl import export_jsonl

    store = _open_any(location, readonly=True, items=recorded_system(location) is not None)
    try:
        return export_jsonl(store, path)
    finally:
        store.close()


def import_bank_file(
    source: str | Path, location: str | Path, *, config_check: ConfigCheck | None = None,
    partial: bool = False, on_note: Callable[[str], None] | None = None,
) -> int:
    """Load the JSONL export ``source`` into the bank at ``location`` (created if missing; it
    must hold nothing yet) in one transaction; returns the number of nodes (or items).

    An export whose meta record names a memory system is an item bank's; any other a node
    bank's, checked with ``config_check``. Raises
    :class:`~deltamem.errors.InvalidInputError` when ``source`` does not exist and
    :class:`~deltamem.errors.StoreError` for a malformed export
    (:class:`~deltamem.errors.InvalidImportError`: which record, why;
    :class:`~deltamem.errors.IncompleteExportError`: the file is not whole, see
    :mod:`deltamem.store.frames`), a non-empty bank, a missing folder or a storage failure;
    nothing is written then (a bank file the import created is removed again).

    ``partial``: import what a cut export holds. ``on_note`` receives what the user must be
    told (what was skipped; an older export whose completeness cannot be checked).
    """
    from deltamem.store.jsonl import read_export, read_jsonl

    src = Path(source)
    if not src.exists():
        raise InvalidInputError(f"no such file: {src}")
    is_file = not is_url(location)
    target = Path(location)
    if is_file and not target.parent.is_dir():
        raise StoreError(f"cannot import into {location}: folder {target.parent} does not exist")
    made = is_file and not target.exists()
    # a new bank file is built under a temporary name and linked into place when whole: a
    # process killed mid-import leaves no file at ``location`` that is not a bank
    building = (new_bank_file(target, suffix=".importing", doing="import into") if made
                else nullcontext(target))
    with building as build:
        first: Any = {}
        for rec in read_jsonl(src, on_cut=lambda _: None):
            first = rec
            if not (isinstance(rec, dict) and rec.get("type") == "header"):
                break
        items = isinstance(first, dict) and bool(first.get("system"))
        where = str(build) if made else location
        store = _open_any(where, readonly=False, items=items, config_check=config_check)
        records = read_export(src, partial=partial)
        try:
            n = int(store.import_records(records))
        finally:
            store.close()
    for note in records.result.notes:
        if on_note is not None:
            on_note(note)
    return n


@contextmanager
def new_bank_file(target: str | Path, *, suffix: str, doing: str) -> Iterator[Path]:
    """Make a new SQLite bank file whole before it appears at ``target``.

    Yields the path to create and fill the bank at: ``target``'s name + ``suffix`` beside it
    (a file there, left by a run that was killed, is removed first). When the block ends
    without an error the bank's write-ahead log is moved into that file, which is then
    hard-linked to ``target`` and its temporary name removed; on an error it is removed and
    nothing appears at ``target``. A process killed inside the block leaves only the file of
    the temporary name (the next run's). Never replaces a bank made at ``target``
    meanwhile: :class:`~deltamem.errors.StoreError` ("cannot ``doing`` ``target``: …").
    """
    target = Path(target)
    build = target.with_name(target.name + suffix)
    _remove_sqlite(build)
    try:
        yield build
        _checkpoint(build)
        try:
            os.link(build, target)
        except FileExistsError:
            raise StoreError(f"cannot {doing} {target}: a bank was created there meanwhile"
                             ) from None
    finally:
        _remove_sqlite(build)


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _checkpoint(path: Path) -> None:
    """Move a closed SQLite bank's write-ahead log into its file (so the file alone is the
    bank)."""
    import sqlite3

    if not Path(str(path) + "-wal").exists():
        return
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
