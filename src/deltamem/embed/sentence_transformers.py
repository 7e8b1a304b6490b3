"""Embedders backed by the ``sentence-transformers`` package (optional extra ``st``).

For real deployments with models such as ``intfloat/e5-base-v2``. The package is
imported (and the model loaded) when an embedder is constructed, not when this
module is imported; a missing package or a model that fails to load raises
:class:`~deltamem.errors.EmbedderError`, never a fallback to other vectors.

E5 models were trained with ``"query: "`` / ``"passage: "`` prefixes; they are
added automatically when the model name names an E5 model, and callers never add
them themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from deltamem.embed.base import check_output
from deltamem.errors import ConfigError, EmbedderError, InvalidInputError

INSTALL_HINT = "pip install 'deltamem[st]'"
E5_PREFIXES: tuple[str, str] = ("query: ", "passage: ")
_NO_PREFIXES: tuple[str, str] = ("", "")
# "e5" as its own token of the name: intfloat/e5-base-v2, multilingual-e5-small, my_e5.
_E5_TOKEN = re.compile(r"(?:^|[^a-z0-9])e5(?:[^a-z0-9]|$)")


def default_prefixes(model_name: str) -> tuple[str, str]:
    """``(query_prefix, passage_prefix)`` a model needs: E5 ones for E5 models, else none."""
    return E5_PREFIXES if _E5_TOKEN.search(model_name.lower()) else _NO_PREFIXES


class SentenceTransformerEmbedder:
    """A ``sentence_transformers.SentenceTransformer`` behind the Embedder protocol.

    Contract: rows are float32, unit-norm (``normalize_embeddings=True``), in
    input order. Queries get ``prefixes[0]`` prepended and passages
    ``prefixes[1]``; the model's own saved default prompt is not applied (so a
    prefix is never added twice).

    ``name`` is the model name, plus ``" [prefixes=...]"`` when custom prefixes
    differ from the automatic ones, so banks built with different prefixing
    never mix. The model is loaded by the constructor (so ``dim``, read from
    the model, is a plain attribute and errors surface at once); the package is
    imported only then.

    Args:
        model_name: hub name or local folder, passed to ``SentenceTransformer``.
        device: torch device string.
        prefixes: ``(query_prefix, passage_prefix)``; default: E5 prefixes for
            E5 models, none otherwise.
        batch_size: texts per forward pass.

    Raises:
        EmbedderError: ``sentence-transformers`` is not installed, or the model
            fails to load (constructor) or to embed (embed calls).
        ConfigError: bad ``model_name``, ``prefixes`` or ``batch_size``.
    """

    def __init__(
        self,
        model_name: str,
        *,
        device: str = "cpu",
        prefixes: tuple[str, str] | None = None,
        batch_size: int = 32,
    ) -> None:
        if not isinstance(model_name, str) or not model_name.strip():
            raise ConfigError(f"model_name must be a non-empty string, got {model_name!r}")
        auto = default_prefixes(model_name)
        if prefixes is not None and (
            len(prefixes) != 2 or not all(isinstance(p, str) for p in prefixes)
        ):
            raise ConfigError(f"prefixes must be a (query, passage) pair of str, got {prefixes!r}")
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self.prefixes = auto if prefixes is None else (prefixes[0], prefixes[1])
        self.name = model_name
        if self.prefixes != auto:
            q, p = self.prefixes
            self.name = f"{model_name} [prefixes={q!r},{p!r}]"
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self._model = self._load()
        self.dim: int = self._read_dim(self._model)

    def _load(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(
                f"sentence-transformers is not installed; run `{INSTALL_HINT}`"
            ) from exc
        try:
            return SentenceTransformer(self.model_name, device=self.device)
        except Exception as exc:  # any load failure (missing files, bad config, OOM)
            raise EmbedderError(
                f"cannot load sentence-transformers model {self.model_name!r}: {exc}"
            ) from exc

    def _read_dim(self, model: Any) -> int:
        for attr in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            getter = getattr(model, attr, None)
            if getter is None:
                continue
            dim = getter()
            if isinstance(dim, int) and dim > 0:
                return dim
            break
        probe = self._encode(model, ["dimension probe"])
        return int(probe.shape[1])

    def _encode(self, model: Any, texts: list[str]) -> np.ndarray:
        try:
            emb = model.encode(
                texts,
                prompt="",
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        except Exception as exc:  # backend errors surface as EmbedderError
            raise EmbedderError(f"{self.name}: embedding failed: {exc}") from exc
        return np.asarray(emb, dtype=np.float32)

    def _embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if isinstance(texts, str):
            raise InvalidInputError("expected a sequence of strings, got a single str")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InvalidInputError(f"texts must be str, got {type(t).__name__}")
        model = self._model
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        emb = self._encode(model, [prefix + t for t in texts])
        return check_output(emb, len(texts), self.dim, self.name)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (query prefix added)."""
        return self._embed(texts, self.prefixes[0])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages (passage prefix added)."""
        return self._embed(texts, self.prefixes[1])
