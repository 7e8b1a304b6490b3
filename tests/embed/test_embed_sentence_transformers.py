"""SentenceTransformerEmbedder with a fake ``sentence_transformers`` module (no model, no torch)."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

from deltamem.embed import Embedder, SentenceTransformerEmbedder
from deltamem.embed.sentence_transformers import E5_PREFIXES, default_prefixes
from deltamem.errors import ConfigError, EmbedderError, InvalidInputError


class FakeST:
    """Records what it was asked; embeds a text as normalised character counts."""

    instances: list[FakeST] = []  # noqa: RUF012 - shared record for the test
    dim = 8

    def __init__(self, model_name: str, device: str = "cpu") -> None:
        self.model_name = model_name
        self.device = device
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        FakeST.instances.append(self)

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        self.calls.append((list(texts), kwargs))
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, t in enumerate(texts):
            for ch in t:
                out[i, ord(ch) % self.dim] += 1.0
            out[i, 0] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def fake_st(monkeypatch: pytest.MonkeyPatch) -> type[FakeST]:
    FakeST.instances = []
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeST  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return FakeST


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("intfloat/e5-base-v2", E5_PREFIXES),
        ("intfloat/multilingual-e5-small", E5_PREFIXES),
        ("E5-large", E5_PREFIXES),
        ("/models/my_e5", E5_PREFIXES),
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
        ("BAAI/bge-small-en-v1.5", ("", "")),
        ("some/model-e50", ("", "")),
    ],
)
def test_default_prefixes(name: str, expected: tuple[str, str]) -> None:
    assert default_prefixes(name) == expected


def test_e5_adds_query_and_passage_prefixes(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("intfloat/e5-base-v2")
    assert isinstance(emb, Embedder)
    assert emb.name == "intfloat/e5-base-v2"
    assert emb.dim == 8
    q = emb.embed_queries(["how to open a door"])
    p = emb.embed_passages(["open the door with the key", "go north"])
    model = fake_st.instances[0]
    assert model.model_name == "intfloat/e5-base-v2"
    assert model.device == "cpu"
    assert model.calls[0][0] == ["query: how to open a door"]
    assert model.calls[1][0] == ["passage: open the door with the key", "passage: go north"]
    for _, kwargs in model.calls:
        assert kwargs["normalize_embeddings"] is True
        assert kwargs["prompt"] == ""  # the model's own default prompt is never added
    assert q.shape == (1, 8) and p.shape == (2, 8)
    assert q.dtype == np.float32 and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-6)


def test_non_e5_model_gets_no_prefixes(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2", batch_size=4)
    emb.embed_queries(["a"])
    emb.embed_passages(["b"])
    calls = fake_st.instances[0].calls
    assert [c[0] for c in calls] == [["a"], ["b"]]
    assert calls[0][1]["batch_size"] == 4
    assert emb.name == "sentence-transformers/all-mpnet-base-v2"


def test_custom_prefixes_override_and_rename(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("intfloat/e5-base-v2", prefixes=("Q> ", "P> "))
    emb.embed_queries(["x"])
    emb.embed_passages(["y"])
    assert [c[0] for c in fake_st.instances[0].calls] == [["Q> x"], ["P> y"]]
    assert emb.name.startswith("intfloat/e5-base-v2 ")
    assert emb.name != "intfloat/e5-base-v2"
    other = SentenceTransformerEmbedder("intfloat/e5-base-v2", prefixes=("", ""))
    assert other.name not in (emb.name, "intfloat/e5-base-v2")


def test_prefixes_equal_to_default_keep_plain_name(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("intfloat/e5-base-v2", prefixes=E5_PREFIXES)
    assert emb.name == "intfloat/e5-base-v2"


def test_dim_from_old_api_or_probe(fake_st: type[FakeST], monkeypatch: pytest.MonkeyPatch) -> None:
    class OldAPI(FakeST):
        dim = 5
        get_embedding_dimension = None  # type: ignore[assignment]

        def get_sentence_embedding_dimension(self) -> int:
            return 5

    class NoDim(FakeST):
        dim = 6

        def get_embedding_dimension(self) -> None:  # type: ignore[override]
            return None

    monkeypatch.setattr(sys.modules["sentence_transformers"], "SentenceTransformer", OldAPI)
    assert SentenceTransformerEmbedder("old").dim == 5
    monkeypatch.setattr(sys.modules["sentence_transformers"], "SentenceTransformer", NoDim)
    assert SentenceTransformerEmbedder("nodim").dim == 6


def test_missing_package_names_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import → ImportError
    with pytest.raises(EmbedderError, match=r"pip install 'deltamem\[st\]'"):
        SentenceTransformerEmbedder("intfloat/e5-base-v2")


def test_load_failure_raises_embedder_error(fake_st: type[FakeST], monkeypatch: pytest.MonkeyPatch):
    def broken(name: str, device: str = "cpu") -> None:
        raise OSError(f"{name} is not a local folder and the hub is unreachable")

    monkeypatch.setattr(sys.modules["sentence_transformers"], "SentenceTransformer", broken)
    with pytest.raises(EmbedderError, match="cannot load") as info:
        SentenceTransformerEmbedder("nope/missing-model")
    assert isinstance(info.value.__cause__, OSError)


def test_encode_failure_and_bad_output_raise(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("m")

    def boom(texts: list[str], **kwargs: Any) -> np.ndarray:
        raise RuntimeError("out of memory")

    emb._model.encode = boom
    with pytest.raises(EmbedderError, match="embedding failed"):
        emb.embed_passages(["x"])
    emb._model.encode = lambda texts, **kw: np.ones((len(texts), 3))
    with pytest.raises(EmbedderError, match="expected shape"):
        emb.embed_passages(["x"])
    emb._model.encode = lambda texts, **kw: np.full((len(texts), 8), np.nan)
    with pytest.raises(EmbedderError, match="non-finite"):
        emb.embed_passages(["x"])


def test_input_validation(fake_st: type[FakeST]) -> None:
    emb = SentenceTransformerEmbedder("m")
    assert emb.embed_queries([]).shape == (0, 8)
    with pytest.raises(InvalidInputError):
        emb.embed_queries("single string")
    with pytest.raises(InvalidInputError):
        emb.embed_passages([None])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model_name": ""},
        {"model_name": "m", "prefixes": ("only one",)},
        {"model_name": "m", "batch_size": 0},
    ],
)
def test_bad_arguments_raise_config_error(fake_st: type[FakeST], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        SentenceTransformerEmbedder(**kwargs)
    assert fake_st.instances == []  # nothing loaded
