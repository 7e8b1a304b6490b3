"""Fixtures for the embedder tests: the bundled MiniLM (skipped when absent) and a tiny BERT."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.errors import EmbedderError

from .embed_helpers import write_tiny_bert


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2; skips the test when the package is absent."""
    from deltamem.embed.minilm import bundled_model_dir

    try:
        return bundled_model_dir()
    except EmbedderError as exc:
        pytest.skip(f"bundled MiniLM not installed: {exc}")


@pytest.fixture(scope="session")
def minilm(minilm_dir: Path):
    """One loaded MiniLMEmbedder shared by the session (loading takes ~1 s)."""
    from deltamem.embed.minilm import MiniLMEmbedder

    emb = MiniLMEmbedder()
    emb.load()
    return emb


@pytest.fixture
def tiny_bert_dir(tmp_path: Path) -> Path:
    """A default tiny BERT folder (2 layers, mean pooling)."""
    return write_tiny_bert(tmp_path / "tiny")


@pytest.fixture
def make_tiny_bert(tmp_path: Path):
    """Factory: ``make_tiny_bert(name, **options)`` → folder (see :func:`write_tiny_bert`)."""

    def make(name: str = "custom", **options) -> Path:
        return write_tiny_bert(tmp_path / name, **options)

    return make
