"""Context quality (paper §4): relevance, diversity and Q = Rel + λ·Div of a recalled context.

For a query embedding ``e_x`` and the embeddings ``e_1..e_K`` of the K retrieved entries
(inner products of L2-normalised vectors)::

    Rel = (1/K) Σ_i <e_x, e_i>
    Div = -(1/(K(K-1))) Σ_{i≠j} <e_i, e_j>        (0 when K < 2: no pair to compare)
    Q   = Rel + λ·Div                              (λ = 0.6 by default, the paper's peak)

The memories of this package log :meth:`ContextQuality.to_dict` under
``Recall.details["quality"]`` for every recall (Rel and Div separately, so Q can be
recomputed for any λ); :func:`deltamem.analysis.context_quality.correlation_report`
correlates Q with the improvement a context brings over running without memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from deltamem.errors import InvalidInputError

__all__ = [
    "DEFAULT_LAMBDA",
    "ContextQuality",
    "context_quality",
    "diversity",
    "relevance",
]

DEFAULT_LAMBDA = 0.6
"""λ of Q = Rel + λ·Div (the correlation in the paper's Figure 6b peaks near 0.6)."""


def _matrix(entries: Any) -> np.ndarray:
    m = np.asarray(entries, dtype=np.float64)
    if m.ndim != 2:
        raise InvalidInputError(f"entry embeddings must be a 2-D array, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise InvalidInputError("entry embeddings contain non-finite values")
    return m


def relevance(query: Any, entries: Any) -> float:
    """Mean inner product between ``query`` (d,) and each row of ``entries`` (K, d).

    Vectors are used as given (pass normalised ones for cosine). Raises
    :class:`InvalidInputError` for K = 0, mismatched widths or non-finite values.
    """
    m = _matrix(entries)
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    if m.shape[0] == 0:
        raise InvalidInputError("relevance needs at least one retrieved entry")
    if q.shape[0] != m.shape[1]:
        raise InvalidInputError(f"query width {q.shape[0]} != entry width {m.shape[1]}")
    return float(np.mean(m @ q))


def diversity(entries: Any) -> float:
    """Negative mean pairwise inner product over ordered pairs i ≠ j of ``entries`` (K, d).

    Returns 0.0 when K < 2 (no pair: nothing is redundant).
    """
    m = _matrix(entries)
    k = m.shape[0]
    if k < 2:
        return 0.0
    gram = m @ m.T
    off = float(gram.sum() - np.trace(gram))
    return -off / (k * (k - 1))


@dataclass(frozen=True)
class ContextQuality:
    """Rel, Div and Q of one retrieved set (``k`` entries, weight ``lam``)."""

    rel: float
    div: float
    lam: float
    k: int

    @property
    def q(self) -> float:
        return self.rel + self.lam * self.div

    def with_lambda(self, lam: float) -> float:
        """Q for another λ (same Rel and Div)."""
        return self.rel + lam * self.div

    def to_dict(self) -> dict[str, float | int]:
        return {"rel": self.rel, "div": self.div, "q": self.q, "lambda": self.lam, "k": self.k}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextQuality:
        return cls(rel=float(data["rel"]), div=float(data["div"]), lam=float(data["lambda"]),
                   k=int(data["k"]))


def context_quality(query: Any, entries: Any, lam: float = DEFAULT_LAMBDA) -> ContextQuality:
    """Rel, Div and Q of a retrieved set (see the module docstring).

    Raises :class:`InvalidInputError` for an empty set, bad shapes or a non-finite λ.
    """
    if not math.isfinite(lam):
        raise InvalidInputError(f"lambda must be finite, got {lam!r}")
    m = _matrix(entries)
    return ContextQuality(rel=relevance(query, m), div=diversity(m), lam=float(lam),
                          k=int(m.shape[0]))
