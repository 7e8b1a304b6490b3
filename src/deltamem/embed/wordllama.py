"""WordLlama: static token embeddings shipped inside the PyPI package ``wordllama``.

WordLlama averages learned per-token vectors (no transformer pass), so a query
costs well under a millisecond on one core. The package ships its default
weights (``l2_supercat_256``: 256 dimensions) and tokenizer in the wheel; this
adapter loads exactly those files and never lets the package contact a hub
(its own loader looks for the tokenizer under a folder name the wheel does not
use and then tries to download it).

Install with ``pip install wordllama``. Spec: ``wordllama`` (see
:mod:`deltamem.embed.factory`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.embed.base import check_output, normalize_rows
from deltamem.errors import EmbedderError, InvalidInputError

DISTRIBUTION = "wordllama"
CONFIG = "l2_supercat"
MODEL_DIM = 256
INSTALL_HINT = f"pip install {DISTRIBUTION}"


class WordLlamaEmbedder:
    """The bundled WordLlama model (``l2_supercat``, 256 dimensions); loaded on first use."""

    name: str = f"wordllama/{CONFIG}_{MODEL_DIM}"
    dim: int = MODEL_DIM

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import wordllama
                    from safetensors import safe_open
                    from wordllama.inference import WordLlamaInference
                    from wordllama.wordllama import WordLlama
                except ImportError as e:
                    raise EmbedderError(
                        f"the wordllama embedder needs the {DISTRIBUTION!r} package "
                        f"({INSTALL_HINT}): {e}"
                    ) from e
                root = Path(wordllama.__file__).parent
                weights = root / "weights" / f"{CONFIG}_{MODEL_DIM}.safetensors"
                tokenizer = root / "tokenizers" / f"{CONFIG}_tokenizer_config.json"
                for f in (weights, tokenizer):
                    if not f.is_file():
                        raise EmbedderError(f"wordllama: bundled file {f} is missing")
                tok = WordLlama.load_tokenizer(tokenizer, use_local_if_exists=True)
                with safe_open(str(weights), framework="np", device="cpu") as fh:
                    emb = fh.get_tensor("embedding.weight")
                self._model = WordLlamaInference(emb, tok, binary=False)
            return self._model

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        for t in texts:
            if not isinstance(t, str):
                raise InvalidInputError(f"texts must be str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.asarray(self._load().embed(list(texts), norm=True), dtype=np.float32)
        return check_output(normalize_rows(out.reshape(len(texts), -1)), len(texts), self.dim,
                            self.name)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)
