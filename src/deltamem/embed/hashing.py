"""A deterministic bag-of-features embedder for tests and quick experiments.

Texts sharing words get high cosine similarity; identical texts get exactly
1.0. No model, no randomness across runs (features are hashed with blake2b,
not Python's salted ``hash``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from deltamem.embed.base import normalize_rows

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Word unigrams (and optionally character trigrams) hashed into ``dim`` buckets.

    Args:
        dim: output width.
        char_ngrams: also hash character trigrams of each word, which makes
            near-identical words ("apple"/"apples") similar.
    """

    def __init__(self, dim: int = 256, char_ngrams: bool = False) -> None:
        self.dim = dim
        self.char_ngrams = char_ngrams
        self.name = f"hashing-{dim}{'-c3' if char_ngrams else ''}"

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        feats = list(words)
        if self.char_ngrams:
            for w in words:
                p = f"#{w}#"
                feats.extend(p[i : i + 3] for i in range(len(p) - 2))
        return feats

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for f in self._features(t):
                h = hashlib.blake2b(f.encode(), digest_size=8).digest()
                idx = int.from_bytes(h[:4], "little") % self.dim
                sign = 1.0 if h[4] & 1 else -1.0
                out[i, idx] += sign
        return normalize_rows(out)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)
