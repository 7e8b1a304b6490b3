"""Build an embedder from a short string spec (CLI flags, config files).

Specs::

    minilm            bundled all-MiniLM-L6-v2, numpy, offline (the default)
    hashing           HashingEmbedder(dim=256), for tests
    hashing:DIM       HashingEmbedder(dim=DIM)
    st:MODEL_NAME     SentenceTransformerEmbedder(MODEL_NAME), e.g. st:intfloat/e5-base-v2
    wordllama         WordLlama static embeddings bundled in the ``wordllama`` package
"""

from __future__ import annotations

from deltamem.embed.base import Embedder
from deltamem.embed.hashing import HashingEmbedder
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.embed.sentence_transformers import SentenceTransformerEmbedder
from deltamem.errors import ConfigError

DEFAULT_EMBEDDER = "minilm"
SPEC_FORMS = ("minilm", "hashing", "hashing:DIM", "st:MODEL_NAME", "wordllama")


def _bad(spec: str, why: str) -> ConfigError:
    return ConfigError(f"embedder spec {spec!r}: {why}; valid forms: {', '.join(SPEC_FORMS)}")


def make_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """The embedder a spec names (see the module docstring for the forms).

    ``minilm`` loads its model on first use; ``st:`` loads it here (see
    :class:`SentenceTransformerEmbedder`).

    Raises:
        ConfigError: the spec has none of the valid forms, or a bad DIM / empty model name.
        EmbedderError: an ``st:`` model (or sentence-transformers) cannot be loaded.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"embedder spec must be a str, got {type(spec).__name__}")
    s = spec.strip()
    kind, sep, arg = s.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind == "minilm" and not sep:
        return MiniLMEmbedder()
    if kind == "wordllama" and not sep:
        from deltamem.embed.wordllama import WordLlamaEmbedder

        return WordLlamaEmbedder()
    if kind == "hashing":
        if not sep:
            return HashingEmbedder()
        try:
            dim = int(arg)
        except ValueError:
            raise _bad(spec, f"DIM must be a positive integer, got {arg!r}") from None
        if dim < 1:
            raise _bad(spec, f"DIM must be a positive integer, got {dim}")
        return HashingEmbedder(dim=dim)
    if kind == "st" and sep:
        if not arg:
            raise _bad(spec, "MODEL_NAME is empty")
        return SentenceTransformerEmbedder(arg)
    raise _bad(spec, "unknown embedder")
