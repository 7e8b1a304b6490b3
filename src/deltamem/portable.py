"""Portable copies of a bank: export to JSONL and import into a new bank, from Python.

The same records as ``deltamem export`` / ``deltamem import`` (meta, nodes or items,
learned episode ids, rejected extractor outputs), for any system's bank: a DeltaMem
bank (SQLite file or ``postgresql://`` URL) or a flat baseline's item bank. An export
round-trips every field, including the embedder name and dimension, so the imported
bank refuses to be opened with another embedder.

    >>> from deltamem import export_bank, import_bank
    >>> n_records = export_bank("bank.db", "bank.jsonl")      # doctest: +SKIP
    >>> n_nodes = import_bank("bank.jsonl", "copy.db")        # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from deltamem.errors import InvalidInputError

__all__ = ["export_bank", "import_bank"]


def export_bank(bank: str | Path, path: str | Path) -> int:
    """Write every record of ``bank`` to the JSONL file ``path``; returns the record count.

    ``bank`` may also be a run directory (its bank). Raises
    :class:`~deltamem.errors.StoreError` when the bank cannot be read.
    """
    from deltamem.bench.banks import resolve_bank
    from deltamem.memories import bank_system
    from deltamem.store import export_jsonl
    from deltamem.store.factory import open_store
    from deltamem.store.items import ItemStore

    location = resolve_bank(bank)
    is_tree_bank = bank_system(location) == "deltamem"
    store = open_store(location, readonly=True) if is_tree_bank else ItemStore(
        location, readonly=True)
    try:
        return export_jsonl(store, path)
    finally:
        store.close()


def import_bank(source: str | Path, bank: str | Path) -> int:
    """Load the JSONL export ``source`` into ``bank`` (created if missing; it must hold
    nothing yet) in one transaction; returns the number of nodes (or items) imported.

    Raises :class:`~deltamem.errors.InvalidInputError` when ``source`` does not exist and
    :class:`~deltamem.errors.StoreError` for a malformed export
    (:class:`~deltamem.errors.InvalidImportError`: which record, why), a non-empty bank, a
    missing folder or a storage failure; nothing is written then (a bank file the import
    created is removed again).
    """
    from deltamem.errors import StoreError
    from deltamem.store import read_jsonl
    from deltamem.store.factory import is_url, open_store
    from deltamem.store.items import ItemStore

    src = Path(source)
    if not src.exists():
        raise InvalidInputError(f"no such file: {src}")
    is_file = not is_url(bank)
    target = Path(bank)
    if is_file and not target.parent.is_dir():
        raise StoreError(f"cannot import into {bank}: folder {target.parent} does not exist")
    made = is_file and not target.exists()
    try:
        first = next(read_jsonl(src), {})
        is_items = isinstance(first, dict) and bool(first.get("system"))
        store = ItemStore(str(bank)) if is_items else open_store(bank)
        try:
            return store.import_records(read_jsonl(src))
        finally:
            store.close()
    except BaseException:
        if made:  # leave no half-made bank behind
            for suffix in ("", "-wal", "-shm"):
                Path(str(target) + suffix).unlink(missing_ok=True)
        raise
