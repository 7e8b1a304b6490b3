"""Bank stores: SQLite (embedded default)."""

from deltamem.store.base import SCHEMA_VERSION, Store
from deltamem.store.sqlite import SQLiteStore, export_jsonl, read_jsonl

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "Store", "export_jsonl", "read_jsonl"]
