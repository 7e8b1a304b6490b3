"""Embedders: one protocol; a bundled offline model, sentence-transformers, and two
deterministic embedders for tests (hashing, table lookup)."""

from deltamem.embed.base import Embedder, normalize_rows
from deltamem.embed.factory import DEFAULT_EMBEDDER, make_embedder
from deltamem.embed.hashing import HashingEmbedder
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.embed.sentence_transformers import SentenceTransformerEmbedder
from deltamem.embed.table import TableEmbedder

__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "TableEmbedder",
    "make_embedder",
    "normalize_rows",
]
