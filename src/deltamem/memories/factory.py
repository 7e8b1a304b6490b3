"""Registry factories for memories that open a bank of items (see :mod:`deltamem.memories`).

The flat baselines (Synapse, AWM, ReasoningBank, the decocted-experience memories) and the
step memories (AriGraph and its baselines) are built the same way from the registry's keyword
arguments: an embedder is required, and ``extractor`` picks the memory's mode unless the
options name one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, TypeVar

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.llm.base import LLMClient


class Openable(Protocol):
    """A memory class with a registry name and an ``open`` taking a bank and a mode."""

    name: ClassVar[str]

    @classmethod
    def open(cls, path: str | Path = ..., *, embedder: Embedder | None,
             llm: LLMClient | None = ..., mode: Any = ..., **options: Any) -> Self: ...


M = TypeVar("M", bound=Openable)


def mode_for(name: str, extractor: Any) -> str:
    """The mode an ``extractor`` argument selects: ``"llm"`` → ``llm``, else ``deterministic``."""
    if extractor == "llm":
        return "llm"
    if extractor in (None, "structural"):
        return "deterministic"
    raise ConfigError(f"{name} takes extractor 'structural' or 'llm' (which sets its mode), "
                      f"got {extractor!r}")


def make_factory(cls: type[M]) -> Callable[..., M]:
    """A registry factory for ``cls``.

    ``extractor`` picks the mode (``"llm"`` → ``llm``, ``"structural"``/``None`` →
    ``deterministic``) unless ``options["mode"]`` is given; ``bank=None`` keeps the memory in
    memory only.
    """

    def make(
        *,
        bank: str | Path | None = None,
        embedder: Embedder | None = None,
        llm: LLMClient | None = None,
        extractor: Any = "structural",
        domain: str = "generic",
        options: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> M:
        if embedder is None:
            raise ConfigError(f"{cls.name} needs an embedder (--embedder on the command line, "
                              "e.g. minilm; embedder= in Python)")
        opts = {"domain": domain, **dict(options or {})}
        mode = opts.pop("mode", None)
        if mode is None:
            mode = mode_for(cls.name, extractor)
        return cls.open(bank or ":memory:", embedder=embedder, llm=llm, mode=mode, **opts)

    make.__doc__ = f"Registry factory of {cls.__name__} (see :mod:`deltamem.memories`)."
    return make
