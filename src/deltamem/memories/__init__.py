"""Memory systems, selectable by name.

``make_memory(name, **kwargs)`` builds one. Every factory takes the same
keyword arguments (unused ones are ignored by systems that do not need them):

* ``bank``: path of the bank file (``None``: in memory, nothing persisted)
* ``embedder``: an :class:`~deltamem.embed.Embedder`
* ``llm``: an :class:`~deltamem.llm.LLMClient` (for LLM-based extraction)
* ``extractor``: ``"structural"`` | ``"llm"`` | an Extractor object
* ``domain``: a domain name from :data:`deltamem.domains.DOMAINS`
* ``options``: dict of system-specific settings (e.g. DeltaMem's ``tau_task``)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.memory import Memory

_REGISTRY: dict[str, str | Callable[..., Memory]] = {
    "none": "deltamem.memories.none:make",
    "deltamem": "deltamem.memories.deltamem:make",
    "synapse": "deltamem.memories.synapse:make",
    "awm": "deltamem.memories.awm:make",
    "reasoningbank": "deltamem.memories.reasoningbank:make",
    "lessons": "deltamem.memories.decocted.lessons:make_lessons",
    "lessons-raw": "deltamem.memories.decocted.lessons:make_raw",
    "lessons-kmeans": "deltamem.memories.decocted.lessons:make_kmeans",
    "concept-tree": "deltamem.memories.decocted.concept_tree:make",
    "arigraph": "deltamem.memories.arigraph.arigraph:make",
    "fullhistory": "deltamem.memories.arigraph.baselines:make_fullhistory",
    "summary": "deltamem.memories.arigraph.baselines:make_summary",
    "rag": "deltamem.memories.arigraph.baselines:make_rag",
    "reflexion": "deltamem.memories.arigraph.baselines:make_reflexion",
    "simulacra": "deltamem.memories.arigraph.baselines:make_simulacra",
    "mcma": "deltamem.memories.mcma.memory:make",
    "raw-trajectory": "deltamem.memories.mcma.baselines:make_raw",
    "trad": "deltamem.memories.mcma.baselines:make_trad",
    "expel": "deltamem.memories.mcma.baselines:make_expel",
}


def register_memory(name: str, factory: str | Callable[..., Memory]) -> None:
    """Register a memory system under ``name`` (a callable or a ``"module:function"`` string)."""
    _REGISTRY[name] = factory


def list_memories() -> list[str]:
    """Names of the registered memory systems."""
    return sorted(_REGISTRY)


def make_memory(name: str, **kwargs: Any) -> Memory:
    """Build the memory system registered as ``name`` (see module docstring for kwargs)."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown memory system {name!r}; registered: {', '.join(list_memories())}"
        ) from None
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(**kwargs)


_BANK_CLASSES = {
    "synapse": "deltamem.memories.synapse:Synapse",
    "awm": "deltamem.memories.awm:AWM",
    "reasoningbank": "deltamem.memories.reasoningbank:ReasoningBank",
    "arigraph": "deltamem.memories.arigraph.arigraph:AriGraphMemory",
    "fullhistory": "deltamem.memories.arigraph.baselines:FullHistoryMemory",
    "summary": "deltamem.memories.arigraph.baselines:SummaryMemory",
    "rag": "deltamem.memories.arigraph.baselines:RAGMemory",
    "reflexion": "deltamem.memories.arigraph.baselines:ReflexionMemory",
    "simulacra": "deltamem.memories.arigraph.baselines:SimulacraMemory",
    "mcma": "deltamem.memories.mcma.memory:MCMA",
    "raw-trajectory": "deltamem.memories.mcma.baselines:RawTrajectory",
    "trad": "deltamem.memories.mcma.baselines:TRAD",
    "expel": "deltamem.memories.mcma.baselines:ExpeL",
}


def bank_system(path: str | Path) -> str:
    """The memory system a bank file belongs to (``deltamem`` unless its meta says otherwise)."""
    import sqlite3

    from deltamem.errors import StoreError
    from deltamem.store.factory import is_url

    if is_url(path):
        return "deltamem"  # PostgreSQL holds DeltaMem banks only
    p = Path(path)
    if not p.exists():
        raise StoreError(f"no memory bank at {p}")
    from deltamem.store.sqlite import storage_error

    for flags in ("mode=ro", "mode=ro&immutable=1"):  # immutable: a read-only folder
        try:
            con = sqlite3.connect(f"file:{p.resolve()}?{flags}", uri=True)
            try:
                row = con.execute("SELECT value FROM meta WHERE key = 'system'").fetchone()
            finally:
                con.close()
            break
        except sqlite3.Error as e:
            code = getattr(e, "sqlite_errorcode", 0) or 0
            if flags == "mode=ro" and code & 0xFF == sqlite3.SQLITE_CANTOPEN:
                continue
            raise storage_error(e, str(p)) from e
    return "deltamem" if row is None else str(row[0])


def open_bank(path: str | Path) -> Memory:
    """Open any bank read-only, without an embedder, for inspection (stats, export)."""
    system = bank_system(path)
    if system == "deltamem":
        from deltamem.memories.deltamem import DeltaMem

        return DeltaMem.open(path, embedder=None, readonly=True)
    try:
        target = _BANK_CLASSES[system]
    except KeyError:
        raise ConfigError(f"bank {path} belongs to unknown memory system {system!r}") from None
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    return cls.open(path, embedder=None, readonly=True)
