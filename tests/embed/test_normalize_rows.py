"""normalize_rows keeps np.linalg.norm's arithmetic (issue 26 removed only its call)."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.embed.base import normalize_rows
from deltamem.errors import EmbedderError


def test_rows_are_scaled_by_exactly_the_norms_numpy_computes():
    rng = np.random.default_rng(3)
    for shape in ((1, 384), (7, 768), (50, 3)):
        x = (rng.standard_normal(shape) * rng.uniform(1e-3, 1e3, (shape[0], 1))).astype(
            np.float32)
        x[0] = 0.0
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        want = (x / norms).astype(np.float32)
        got = normalize_rows(x)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
        assert normalize_rows(x.astype(np.float64)).tobytes() == want.tobytes()
    with pytest.raises(EmbedderError):
        normalize_rows(np.zeros(3, np.float32))
