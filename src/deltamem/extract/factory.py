"""Extractors by name, for command lines: ``structural`` (no LLM) or ``llm`` (needs an LLM spec)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltamem.errors import ConfigError

if TYPE_CHECKING:
    from deltamem.extract.base import Extractor
    from deltamem.llm.base import LLMClient

EXTRACTORS: tuple[str, ...] = ("structural", "llm")


def make_extractor(name: str, llm: str | None = None) -> tuple[Extractor | None, LLMClient | None]:
    """The extractor ``name`` names, and the LLM client it uses.

    ``structural`` gives ``(None, None)``: the memory's own default, the structural
    extractor. ``llm`` builds the LLM client from the spec ``llm``
    (:func:`deltamem.llm.factory.make_llm`) and an :class:`~deltamem.extract.llm.LLMExtractor`
    over it.

    Raises:
        ConfigError: an unknown name, or ``llm`` without an LLM spec (the message names
            the ``--llm`` flag).
    """
    if name == "structural":
        return None, None
    if name != "llm":
        raise ConfigError(f"unknown extractor {name!r}; use structural or llm")
    if llm is None:
        raise ConfigError("--extractor llm needs --llm")
    from deltamem.extract.llm import LLMExtractor
    from deltamem.llm.factory import make_llm

    client = make_llm(llm)
    return LLMExtractor(client), client
