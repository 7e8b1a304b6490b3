"""Opt-in: the numpy MiniLM against sentence-transformers (torch) on the same local folder.

Needs ``torch`` and ``sentence-transformers`` (not project dependencies); skipped
without them. Loads the folder by path, offline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deltamem.embed import MiniLMEmbedder

pytestmark = [pytest.mark.model, pytest.mark.slow]

SENTENCES = [
    "Put the apple in the fridge.",
    "Find a knife and slice the bread on the counter.",
    "The cat sits on the mat.",
    "",
    "HELLO World!!  Ünïcödé façade naïve café 東京 😀",
    "Quarterly revenue grew by ten percent while costs stayed flat across all regions.",
    "go north",
    "word " * 400,  # truncated at 256 tokens by both
]


def test_matches_sentence_transformers(
    minilm: MiniLMEmbedder, minilm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    st = pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    model = st.SentenceTransformer(str(minilm_dir), device="cpu")
    ref = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    got = minilm.embed_passages(SENTENCES)
    cos = (ref * got).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() >= 1 - 1e-5, cos


def test_wrapper_on_local_folder_matches(minilm: MiniLMEmbedder, minilm_dir: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    from deltamem.embed import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(str(minilm_dir))
    assert emb.dim == 384
    np.testing.assert_allclose(
        emb.embed_queries(SENTENCES[:4]), minilm.embed_queries(SENTENCES[:4]), atol=1e-5
    )
