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
"""

from __future__ import annotations

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


def import_bank(source: str | Path, bank: str | Path) -> int:
    """Load the JSONL export ``source`` into ``bank`` (created if missing; it must hold
    nothing yet) in one transaction; returns the number of nodes (or items) imported.

    Raises :class:`~deltamem.errors.InvalidInputError` when ``source`` does not exist and
    :class:`~deltamem.errors.StoreError` for a malformed export
    (:class:`~deltamem.errors.InvalidImportError`: which record, why), a non-empty bank, a
    missing folder or a storage failure; nothing is written then (a bank file the import
    created is removed again).
    """
    with telemetry.memory_span("create_memory", system="deltamem",
                               store=Path(str(bank)).name,
                               attributes={"deltamem.import.format": "jsonl"}) as span:
        n = import_bank_file(source, bank, config_check=check_bank_config)
        telemetry.set_attributes(span, {"gen_ai.memory.record.count": n})
        return n
