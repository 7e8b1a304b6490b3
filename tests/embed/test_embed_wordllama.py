"""The WordLlama embedder: bundled files only, unit rows, the contract's shapes."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.embed.factory import make_embedder
from deltamem.errors import InvalidInputError


def test_spec_builds_it_without_loading():
    from deltamem.embed.wordllama import WordLlamaEmbedder

    e = make_embedder("wordllama")
    assert isinstance(e, WordLlamaEmbedder) and e.dim == 256 and "wordllama" in e.name
    assert e._model is None  # loaded on first use
    with pytest.raises(InvalidInputError):
        e.embed_queries([3])  # type: ignore[list-item]


@pytest.mark.model
def test_bundled_model_embeds_unit_rows_offline():
    pytest.importorskip("wordllama")
    e = make_embedder("wordllama")
    v = e.embed_queries(["put a clean {A} in {B}", "clean some {A} and put it in {B}",
                         "put a hot {A} in {B}"])
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    s = v @ v.T
    assert s[0, 1] > s[0, 2]  # same task type closer than another type
    assert np.array_equal(e.embed_passages(["x"]), e.embed_queries(["x"]))
    assert e.embed_queries([]).shape == (0, 256)
