"""make_embedder: spec strings → embedders; bad specs → ConfigError listing the forms."""

from __future__ import annotations

import sys
import types

import pytest

from deltamem.embed import (
    DEFAULT_EMBEDDER,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
)
from deltamem.errors import ConfigError, EmbedderError


def test_default_is_minilm_and_lazy() -> None:
    assert DEFAULT_EMBEDDER == "minilm"
    emb = make_embedder()
    assert isinstance(emb, MiniLMEmbedder)
    assert emb._model is None  # nothing loaded yet
    assert isinstance(emb, Embedder)
    assert (emb.name, emb.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


@pytest.mark.parametrize(
    ("spec", "dim"), [("hashing", 256), ("hashing:64", 64), (" Hashing:32 ", 32)]
)
def test_hashing(spec: str, dim: int) -> None:
    emb = make_embedder(spec)
    assert isinstance(emb, HashingEmbedder)
    assert emb.dim == dim
    assert emb.embed_queries(["a b"]).shape == (1, dim)


def test_st_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        def __init__(self, name: str, device: str = "cpu") -> None:
            self.name = name

        def get_embedding_dimension(self) -> int:
            return 4

    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = Fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    emb = make_embedder("st:intfloat/e5-base-v2")
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert emb.name == "intfloat/e5-base-v2"
    assert emb.prefixes == ("query: ", "passage: ")
    assert emb.dim == 4


def test_st_spec_without_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbedderError, match="deltamem"):
        make_embedder("st:intfloat/e5-base-v2")


@pytest.mark.parametrize(
    "spec",
    ["", "bert", "minilm:big", "hashing:", "hashing:x", "hashing:0", "hashing:-3", "st:", "st"],
)
def test_bad_specs_list_the_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_embedder(spec)
    for form in ("minilm", "hashing:DIM", "st:MODEL_NAME"):
        assert form in str(info.value)


def test_non_string_spec() -> None:
    with pytest.raises(ConfigError):
        make_embedder(256)  # type: ignore[arg-type]
