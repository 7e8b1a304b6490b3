"""Memory systems, selectable by name: the one registry.

Each system is registered once (:func:`register_memory`) with everything the library needs
of it: a *factory* that builds it (``make_memory(name, ...)``, what ``deltamem run`` uses)
and the *bank class* that reopens a bank it wrote (``open_bank(path)``, what ``deltamem
stats`` / ``export`` use), both as lazy ``"module:attr"`` strings or objects. A name is
registered once; registering it again is a :class:`~deltamem.errors.ConfigError`, as for
environments (:mod:`deltamem.envs.registry`). A system that keeps no bank (``none``) has no
bank class. :func:`deltamem.testing.check_memory` with ``bank=`` checks that a system's
bank reopens as that system; the test suite runs it on every registered name.

``make_memory(name, **kwargs)`` builds one. Every factory takes the same
keyword arguments (unused ones are ignored by systems that do not need them):

* ``bank``: path of the bank file (``None``: in memory, nothing persisted)
* ``embedder``: an :class:`~deltamem.embed.Embedder`
* ``llm``: an :class:`~deltamem.llm.LLMClient` (for LLM-based extraction)
* ``extractor``: ``"structural"`` | ``"llm"`` | an Extractor object
* ``domain``: a domain name from :data:`deltamem.domains.DOMAINS`
* ``options``: dict of system-specific settings (e.g. DeltaMem's ``tau_task``)

A bank class has a classmethod ``open(path, *, embedder, readonly, ...)``; ``open_bank``
calls it with ``embedder=None, readonly=True`` (inspection only).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.memory import Memory

__all__ = [
    "MemorySpec",
    "bank_system",
    "list_memories",
    "make_memory",
    "memory_spec",
    "open_bank",
    "register_memory",
    "unregister_memory",
]


def _load(target: Any, what: str) -> Any:
    """The object a lazy ``"module:attr"`` names (an ImportError of a missing optional
    dependency propagates as it is)."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except AttributeError as e:
        raise ConfigError(f"{what}: cannot load {target!r} ({e})") from e


@dataclass(frozen=True)
class MemorySpec:
    """One registered memory system.

    Attributes:
        name: the registry name (what ``memory =`` in a run configuration says, and what
            the system's banks record as their ``system``).
        factory: builds the system from the registry keyword arguments (module doc); a
            callable or a lazy ``"module:function"`` string.
        bank: the class whose ``open(path, embedder=None, readonly=True)`` reopens one of
            its banks (a class or a lazy ``"module:Class"`` string); ``None`` for a system
            that keeps no bank.
    """

    name: str
    factory: str | Callable[..., Memory]
    bank: str | type | None = None

    def make(self, **kwargs: Any) -> Memory:
        """Build the system (the factory's keyword arguments: module doc)."""
        factory = _load(self.factory, f"memory system {self.name!r}")
        return factory(**kwargs)

    def open_bank(self, path: str | Path) -> Memory:
        """Open one of this system's banks read-only, without an embedder."""
        if self.bank is None:
            raise ConfigError(f"memory system {self.name!r} keeps no bank to open")
        cls = _load(self.bank, f"memory system {self.name!r}")
        memory: Memory = cls.open(path, embedder=None, readonly=True)
        return memory


_REGISTRY: dict[str, MemorySpec] = {}


def _check_entry_point(value: object, name: str, what: str) -> None:
    if isinstance(value, str):
        module, sep, attr = value.partition(":")
        if not sep or not module or not attr.isidentifier():
            raise ConfigError(f"memory system {name!r}: {what} must look like "
                              f"'package.module:attr', got {value!r}")
    elif not callable(value):
        raise ConfigError(f"memory system {name!r}: {what} must be callable or a "
                          f"'module:attr' string, got {type(value).__name__}")


def register_memory(
    name: str, factory: str | Callable[..., Memory], *, bank: str | type | None = None
) -> None:
    """Register a memory system under ``name``: its ``factory`` and the ``bank`` class that
    reopens its banks (``None``: it keeps none); see :class:`MemorySpec`.

    Raises:
        ConfigError: an empty or unstripped name, a malformed ``"module:attr"`` string, or
            ``name`` already registered (:func:`unregister_memory` first to replace it).
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"memory system name must be a non-empty stripped str, got {name!r}")
    _check_entry_point(factory, name, "factory")
    if bank is not None:
        _check_entry_point(bank, name, "bank")
    if name in _REGISTRY:
        raise ConfigError(f"memory system {name!r} is already registered "
                          f"({_REGISTRY[name].factory!r})")
    _REGISTRY[name] = MemorySpec(name, factory, bank)


def unregister_memory(name: str) -> None:
    """Remove ``name`` (:class:`ConfigError` when it is not registered)."""
    if _REGISTRY.pop(name, None) is None:
        raise ConfigError(f"memory system {name!r} is not registered")


def list_memories() -> list[str]:
    """Names of the registered memory systems, sorted."""
    return sorted(_REGISTRY)


def memory_spec(name: str) -> MemorySpec:
    """The registration of ``name``; :class:`ConfigError` (listing the names) when unknown."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown memory system {name!r}; registered: {', '.join(list_memories())}"
        ) from None


def make_memory(name: str, **kwargs: Any) -> Memory:
    """Build the memory system registered as ``name`` (see module docstring for kwargs)."""
    return memory_spec(name).make(**kwargs)


def bank_system(path: str | Path) -> str:
    """The memory system a bank belongs to (``deltamem`` unless its meta says otherwise)."""
    from deltamem.store.factory import recorded_system

    return recorded_system(path) or "deltamem"


def open_bank(path: str | Path) -> Memory:
    """Open any registered system's bank read-only, without an embedder, for inspection
    (stats, export). :class:`ConfigError` when the bank belongs to a system that is not
    registered (or registered without a bank class)."""
    system = bank_system(path)
    spec = _REGISTRY.get(system)
    if spec is None or spec.bank is None:
        raise ConfigError(f"bank {path} belongs to unknown memory system {system!r}")
    return spec.open_bank(path)


_BUILTIN: tuple[tuple[str, str, str | None], ...] = (
    # name, factory, bank class
    ("none", "deltamem.memories.none:make", None),
    ("deltamem", "deltamem.memories.deltamem:make", "deltamem.memories.deltamem:DeltaMem"),
    ("synapse", "deltamem.memories.synapse:make", "deltamem.memories.synapse:Synapse"),
    ("awm", "deltamem.memories.awm:make", "deltamem.memories.awm:AWM"),
    ("reasoningbank", "deltamem.memories.reasoningbank:make",
     "deltamem.memories.reasoningbank:ReasoningBank"),
    ("lessons", "deltamem.memories.decocted.lessons:make_lessons",
     "deltamem.memories.decocted.lessons:LessonMemory"),
    ("lessons-raw", "deltamem.memories.decocted.lessons:make_raw",
     "deltamem.memories.decocted.lessons:RawExperienceMemory"),
    ("lessons-kmeans", "deltamem.memories.decocted.lessons:make_kmeans",
     "deltamem.memories.decocted.lessons:KMeansLessonMemory"),
    ("concept-tree", "deltamem.memories.decocted.concept_tree:make",
     "deltamem.memories.decocted.concept_tree:ConceptTreeMemory"),
    ("arigraph", "deltamem.memories.arigraph.arigraph:make",
     "deltamem.memories.arigraph.arigraph:AriGraphMemory"),
    ("fullhistory", "deltamem.memories.arigraph.baselines:make_fullhistory",
     "deltamem.memories.arigraph.baselines:FullHistoryMemory"),
    ("summary", "deltamem.memories.arigraph.baselines:make_summary",
     "deltamem.memories.arigraph.baselines:SummaryMemory"),
    ("rag", "deltamem.memories.arigraph.baselines:make_rag",
     "deltamem.memories.arigraph.baselines:RAGMemory"),
    ("reflexion", "deltamem.memories.arigraph.baselines:make_reflexion",
     "deltamem.memories.arigraph.baselines:ReflexionMemory"),
    ("simulacra", "deltamem.memories.arigraph.baselines:make_simulacra",
     "deltamem.memories.arigraph.baselines:SimulacraMemory"),
    ("mcma", "deltamem.memories.mcma.memory:make", "deltamem.memories.mcma.memory:MCMA"),
    ("raw-trajectory", "deltamem.memories.mcma.baselines:make_raw",
     "deltamem.memories.mcma.baselines:RawTrajectory"),
    ("trad", "deltamem.memories.mcma.baselines:make_trad",
     "deltamem.memories.mcma.baselines:TRAD"),
    ("expel", "deltamem.memories.mcma.baselines:make_expel",
     "deltamem.memories.mcma.baselines:ExpeL"),
    ("long-context", "deltamem.memories.longcontext:make",
     "deltamem.memories.longcontext:LongContext"),
    ("ace", "deltamem.memories.ace:make", "deltamem.memories.ace:ACE"),
    ("memp", "deltamem.memories.memp:make", "deltamem.memories.memp:MemP"),
    ("macla", "deltamem.memories.macla:make", "deltamem.memories.macla:MACLA"),
)

for _name, _factory, _bank in _BUILTIN:
    register_memory(_name, _factory, bank=_bank)
del _name, _factory, _bank
