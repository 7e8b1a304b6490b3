"""Portable copies of a bank: export to JSONL and import into a new bank, from Python.

The same records as ``deltamem export`` / ``deltamem import`` (meta, nodes or items,
learned episode ids, rejected extractor outputs), for any system's bank: a DeltaMem
bank (SQLite file or ``postgresql://`` URL) or a flat baseline's item bank. An export
round-trips every field, including the embedder name and dimension, so the imported
bank refuses to be opened with another embedder. The copying is the store's
(:func:`deltamem.store.factory.export_bank_file` / ``import_bank_file``); an import
into a node bank checks the configuration as DeltaMem reads it.

    >>> import tempfile
    >>> from pathlib import Path
    >>> from deltamem import DeltaMem, export_bank, import_bank
    >>> from deltamem.embed import HashingEmbedder
    >>> from deltamem.testing import make_episode
    >>> folder = Path(tempfile.mkdtemp())
    >>> mem = DeltaMem.open(folder / "bank.db", embedder=HashingEmbedder())
    >>> [c.kind for c in mem.learn(make_episode())]
    ['written', 'written']
    >>> mem.close()
    >>> export_bank(folder / "bank.db", folder / "bank.jsonl")  # meta, 2 nodes, 1 episode id
    4
    >>> import_bank(folder / "bank.jsonl", folder / "copy.db")
    2

The file holds a header and a trailer around the records (counts by record type, a
SHA-256 over the records; :mod:`deltamem.store.frames`), so a file cut short is refused
instead of restoring a smaller bank:

    >>> lines = (folder / "bank.jsonl").read_text().splitlines(keepends=True)
    >>> _ = (folder / "cut.jsonl").write_text("".join(lines[:4]))  # no ledger
    >>> import_bank(folder / "cut.jsonl", folder / "cut.db")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deltamem.errors.IncompleteExportError: ... missing 1 of 1 learned episode ids...
    >>> notes = []
    >>> import_bank(folder / "cut.jsonl", folder / "cut.db", partial=True, on_note=notes.append)
    2
    >>> notes[1]
    'skipped (not in the file): 1 learned episode ids'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from deltamem import telemetry
from deltamem.memories.deltamem import check_bank_config
from deltamem.store.factory import export_bank_file, import_bank_file
from deltamem.store.location import resolve_bank

__all__ = ["export_bank", "import_bank"]


def export_bank(bank: str | Path, path: str | Path) -> int:
    """Write every record of ``bank`` to the JSONL file ``path``; returns the record count.

    ``bank`` may also be a run directory (its bank). Raises
    :class:`~deltamem.errors.StoreError` when the bank cannot be read.
    """
    return export_bank_file(resolve_bank(bank), path)


def import_bank(source: str | Path, bank: str | Path, *, partial: bool = False,
                on_note: Callable[[str], None] | None = None) -> int:
    """Load the JSONL export ``source`` into ``bank`` (created if missing; it must hold
    nothing yet) in one transaction; returns the number of nodes (or items) imported.

    The export must be whole (its trailer's counts and checksum agree with its records):
    else :class:`~deltamem.errors.IncompleteExportError` names what is missing, unless
    ``partial``, which imports the records that are there. What the user must be told (what
    ``partial`` skipped; an export written before exports had a trailer, whose completeness
    cannot be checked) goes to ``on_note``, by default a :class:`UserWarning`.

    Raises :class:`~deltamem.errors.InvalidInputError` when ``source`` does not exist and
    :class:`~deltamem.errors.StoreError` for a malformed export
    (:class:`~deltamem.errors.InvalidImportError`: which record, why), a non-empty bank, a
    missing folder or a storage failure; nothing is written then (a bank file the import
    created is removed again).
    """
    def warn(note: str) -> None:
        warnings.warn(note, UserWarning, stacklevel=4)

    with telemetry.memory_span("create_memory", system="deltamem",
                               store=Path(str(bank)).name,
                               attributes={"deltamem.import.format": "jsonl"}) as span:
        n = import_bank_file(source, bank, config_check=check_bank_config, partial=partial,
                             on_note=on_note or warn)
        telemetry.set_attributes(span, {"gen_ai.memory.record.count": n})
        return n
