"""Embedders: one protocol; a bundled offline model, sentence-transformers, a test embedder."""

from deltamem.embed.base import Embedder, normalize_rows
from deltamem.embed.factory import DEFAULT_EMBEDDER, make_embedder
from deltamem.embed.hashing import HashingEmbedder
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.embed.sentence_transformers import SentenceTransformerEmbedder

__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "make_embedder",
    "normalize_rows",
]
