"""The embedder contract.

An embedder has a ``name`` and a ``dim`` (both recorded in every bank it
writes) and turns texts into L2-normalised float32 rows. Queries and stored
passages are embedded separately because some models (E5) need different
prefixes for each; the embedder adds them, callers never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from deltamem.errors import EmbedderError


@runtime_checkable
class Embedder(Protocol):
    """Texts → normalised vectors.

    * ``embed_queries(texts)`` / ``embed_passages(texts)`` return a float32
      array of shape ``(len(texts), dim)`` whose rows have unit L2 norm.
    * ``name`` identifies the model (and its prefixing), ``dim`` its width.
    * A model that cannot be loaded raises :class:`EmbedderError`; an embedder
      must never fall back to random vectors.
    """

    name: str
    dim: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise EmbedderError(f"expected a 2-D array of embeddings, got shape {x.shape}")
    # what np.linalg.norm(x, axis=1, keepdims=True) computes, the same float32 sums,
    # without its ~4 µs of argument handling (one call per recall)
    norms = np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True))
    norms[norms == 0] = 1.0
    return (x / norms).astype(np.float32, copy=False)


def check_output(emb: np.ndarray, n: int, dim: int, name: str) -> np.ndarray:
    """Validate an embedder's output shape and values."""
    if emb.shape != (n, dim):
        raise EmbedderError(f"{name}: expected shape {(n, dim)}, got {emb.shape}")
    if not np.all(np.isfinite(emb)):
        raise EmbedderError(f"{name}: produced non-finite values")
    return emb
