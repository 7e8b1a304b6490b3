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
from typing import Any

from deltamem.errors import ConfigError
from deltamem.memory import Memory

_REGISTRY: dict[str, str | Callable[..., Memory]] = {
    "none": "deltamem.memories.none:make",
    "deltamem": "deltamem.memories.deltamem:make",
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
