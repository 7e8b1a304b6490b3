"""The numpy BERT forward pass against an independent float64 reference, on a tiny random BERT.

These tests need no model package: they build a small random model folder, so
padding, masking, pooling, truncation and ordering are checked everywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.embed import Embedder
from deltamem.embed.minilm import MiniLMEmbedder, erf, gelu
from deltamem.errors import ConfigError, EmbedderError, InvalidInputError

from .embed_helpers import TINY_WORDS, reference_embed, write_tiny_bert

SENTENCES = [
    "the cat sits on the mat",
    "put the apple in the fridge",
    "go north",
    "",
    "open the red door with the blue key",
    "The DOG sits on the rug!",
    "zebra unknown words here",
    "box",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEmbedder:
    folder = write_tiny_bert(tmp_path_factory.mktemp("tiny") / "m")
    emb = MiniLMEmbedder(folder, batch_size=3)
    emb.load()
    return emb


def test_erf_matches_math_erf() -> None:
    xs = np.linspace(-7, 7, 20001, dtype=np.float32)
    ref = np.array([math.erf(float(v)) for v in xs])
    assert np.abs(erf(xs) - ref).max() < 5e-7
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xs.astype(float)])
    assert np.abs(gelu(xs) - exact).max() < 2e-6


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_forward_matches_float64_reference(tmp_path: Path, pooling: str) -> None:
    folder = write_tiny_bert(tmp_path / pooling, pooling=pooling, seed=3)
    got = MiniLMEmbedder(folder, batch_size=3).embed_passages(SENTENCES)
    ref = reference_embed(folder, SENTENCES)
    assert got.dtype == np.float32
    assert got.shape == (len(SENTENCES), 384)
    assert cosines(got, ref).min() >= 1 - 1e-6
    assert np.abs(got - ref).max() < 1e-5


def test_tiny_model_satisfies_protocol(tiny: MiniLMEmbedder) -> None:
    assert isinstance(tiny, Embedder)
    x = tiny.embed_queries(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(x, tiny.embed_passages(SENTENCES))


def test_truncates_at_max_seq_length(tiny: MiniLMEmbedder) -> None:
    # The folder says max_seq_length 32: [CLS] + 30 words + [SEP].
    words = [TINY_WORDS[i % len(TINY_WORDS)] for i in range(45)]
    long_, cut = " ".join(words), " ".join(words[:30])
    a, b = tiny.embed_passages([long_, cut])
    np.testing.assert_allclose(a, b, atol=1e-6)
    c = tiny.embed_passages([" ".join(words[:31])])[0]
    assert not np.allclose(c, tiny.embed_passages([" ".join(words[:29])])[0], atol=1e-4)


def test_max_length_argument_caps_tokens(tiny_bert_dir: Path) -> None:
    short = MiniLMEmbedder(tiny_bert_dir, max_length=5)
    full = MiniLMEmbedder(tiny_bert_dir)
    a = short.embed_passages(["put the apple in the fridge"])
    b = full.embed_passages(["put the apple"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(a, full.embed_passages(["put the apple in the fridge"]), atol=1e-4)


@given(
    st.lists(
        st.lists(st.sampled_from([*TINY_WORDS, "zzz"]), min_size=0, max_size=12).map(" ".join),
        min_size=1,
        max_size=9,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_batching_and_order_do_not_change_rows(
    tiny: MiniLMEmbedder, texts: list[str], batch_size: int
) -> None:
    emb = MiniLMEmbedder(tiny.model_dir, batch_size=batch_size)
    emb._model = tiny._model  # share the loaded weights; only batching differs
    together = emb.embed_passages(texts)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(together[i], tiny.embed_passages([t])[0], atol=1e-5)


def test_empty_input_and_bad_input(tiny: MiniLMEmbedder) -> None:
    out = tiny.embed_queries([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32
    with pytest.raises(InvalidInputError):
        tiny.embed_queries("a single string")
    with pytest.raises(InvalidInputError):
        tiny.embed_queries(["ok", 3])  # type: ignore[list-item]


def test_construction_is_lazy_and_missing_folder_raises(tmp_path: Path) -> None:
    emb = MiniLMEmbedder(tmp_path / "nowhere")  # no error yet
    assert emb.dim == 384
    with pytest.raises(EmbedderError, match="not found"):
        emb.embed_passages(["x"])


@pytest.mark.parametrize("missing", ["model.safetensors", "tokenizer.json", "config.json"])
def test_missing_model_file_raises(tiny_bert_dir: Path, missing: str) -> None:
    (tiny_bert_dir / missing).unlink()
    with pytest.raises(EmbedderError, match=missing.replace(".", r"\.")):
        MiniLMEmbedder(tiny_bert_dir).embed_passages(["the cat"])


def test_corrupt_weights_raise(tiny_bert_dir: Path) -> None:
    (tiny_bert_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(EmbedderError, match="cannot load weights"):
        MiniLMEmbedder(tiny_bert_dir).embed_passages(["the cat"])


def test_missing_tensor_raises(tiny_bert_dir: Path) -> None:
    from safetensors.numpy import load_file, save_file

    path = tiny_bert_dir / "model.safetensors"
    w = load_file(str(path))
    del w["encoder.layer.1.output.dense.weight"]
    save_file(w, str(path))
    with pytest.raises(EmbedderError, match=r"encoder\.layer\.1\.output\.dense\.weight"):
        MiniLMEmbedder(tiny_bert_dir).embed_passages(["the cat"])


def test_wrong_width_raises(tiny_bert_dir: Path) -> None:
    cfg = json.loads((tiny_bert_dir / "config.json").read_text())
    cfg["hidden_size"] = 128
    (tiny_bert_dir / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EmbedderError, match="hidden_size"):
        MiniLMEmbedder(tiny_bert_dir).embed_passages(["the cat"])


def test_unsupported_pipeline_raises(make_tiny_bert) -> None:
    folder = make_tiny_bert(
        "dense",
        modules=[
            "sentence_transformers.models.Transformer",
            "sentence_transformers.models.Pooling",
            "sentence_transformers.models.Dense",
        ],
    )
    with pytest.raises(EmbedderError, match="unsupported module pipeline"):
        MiniLMEmbedder(folder).embed_passages(["the cat"])


def test_unsupported_pooling_raises(tiny_bert_dir: Path) -> None:
    path = tiny_bert_dir / "1_Pooling" / "config.json"
    path.write_text(json.dumps({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}))
    with pytest.raises(EmbedderError, match="unsupported pooling"):
        MiniLMEmbedder(tiny_bert_dir).embed_passages(["the cat"])


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"max_length": 2}])
def test_bad_settings_raise_config_error(tiny_bert_dir: Path, kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        MiniLMEmbedder(tiny_bert_dir, **kwargs).embed_passages(["the cat"])


def test_concurrent_first_use_loads_once(tiny_bert_dir: Path, monkeypatch) -> None:
    import threading

    from deltamem.embed import minilm as minilm_module

    calls = []
    real_load = minilm_module._load

    def counting_load(*args, **kwargs):
        calls.append(1)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(minilm_module, "_load", counting_load)
    emb = MiniLMEmbedder(tiny_bert_dir)
    results: list[np.ndarray] = []
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        results.append(emb.embed_passages(SENTENCES))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
