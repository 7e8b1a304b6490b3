"""Embedders: one protocol; a bundled offline model, sentence-transformers, a test embedder."""

from deltamem.embed.base import Embedder, normalize_rows
from deltamem.embed.hashing import HashingEmbedder

__all__ = ["Embedder", "HashingEmbedder", "normalize_rows"]
