"""An embedder that looks vectors up in a table: exact, hand-chosen similarities for
tests and examples (a scene that must match, a goal that must not)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from deltamem.embed.base import normalize_rows
from deltamem.errors import EmbedderError

__all__ = ["TableEmbedder"]


class TableEmbedder:
    """Embeds each text to the vector given for it in a table (normalised).

    Unknown texts raise :class:`EmbedderError` — tests see exactly which texts
    were embedded. ``default`` (a callable text → vector) may fill the gaps.
    """

    def __init__(
        self,
        table: Mapping[str, Sequence[float]],
        *,
        name: str = "table",
        default: Callable[[str], Sequence[float]] | None = None,
    ) -> None:
        if not table and default is None:
            raise EmbedderError("TableEmbedder needs at least one vector or a default")
        dims = {len(v) for v in table.values()}
        if len(dims) > 1:
            raise EmbedderError(f"vectors of different widths: {sorted(dims)}")
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.default = default
        self.dim = dims.pop() if dims else len(default("")) if default else 0
        self.name = f"{name}-{self.dim}"

    def _vec(self, text: str) -> np.ndarray:
        if text in self.table:
            return self.table[text]
        if self.default is not None:
            return np.asarray(self.default(text), dtype=np.float32)
        raise EmbedderError(f"TableEmbedder has no vector for {text!r}")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return normalize_rows(np.stack([self._vec(t) for t in texts]))

    embed_passages = embed_queries
