"""Bank stores: SQLite (embedded default) and PostgreSQL + pgvector, one contract
(:class:`Store`), the SQL they share written once (:mod:`deltamem.store.sql`)."""

from deltamem.store.base import SCHEMA_VERSION, ConfigCheck, Store
from deltamem.store.jsonl import export_jsonl, read_jsonl
from deltamem.store.sqlite import SQLiteStore

__all__ = ["SCHEMA_VERSION", "ConfigCheck", "SQLiteStore", "Store", "export_jsonl", "read_jsonl"]
