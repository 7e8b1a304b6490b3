"""Open a bank store from a path or a URL.

``open_store`` is the one place that maps "where the bank is" to a store:
``postgresql://…`` / ``postgres://…`` URLs give a
:class:`~deltamem.store.postgres.PostgresStore` (needs ``deltamem[postgres]``),
anything else is a SQLite file path (``":memory:"`` for a throwaway bank).
"""

from __future__ import annotations

from pathlib import Path

from deltamem.store.base import Store

__all__ = ["is_url", "open_store"]


def is_url(location: str | Path) -> bool:
    """True when ``location`` names a PostgreSQL bank rather than a file."""
    from deltamem.store.postgres import is_postgres_url

    return is_postgres_url(location)


def open_store(location: str | Path, *, readonly: bool = False) -> Store:
    """The store of the bank at ``location`` (created unless ``readonly``).

    Raises :class:`~deltamem.errors.StoreError` when it cannot be opened
    (missing with ``readonly``, unreachable server, not a deltamem bank, newer
    schema) and :class:`~deltamem.errors.ConfigError` for a malformed URL.
    """
    if is_url(location):
        from deltamem.store.postgres import PostgresStore

        return PostgresStore(str(location), readonly=readonly)
    from deltamem.store.sqlite import SQLiteStore

    return SQLiteStore(location, readonly=readonly)
