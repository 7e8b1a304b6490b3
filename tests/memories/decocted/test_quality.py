"""Rel, Div, Q (paper §4) against hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import InvalidInputError
from deltamem.memories.decocted.quality import (
    ContextQuality,
    context_quality,
    diversity,
    relevance,
)

Q = [1.0, 0.0, 0.0]
E = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]]


def test_rel_div_q_match_hand_computed_values():
    # <q,e> = 1, 0.6, 0 -> Rel = 1.6 / 3
    assert relevance(Q, E) == pytest.approx(1.6 / 3)
    # pairs: <e1,e2> = .6, <e1,e3> = 0, <e2,e3> = 0 -> ordered-pair sum 1.2 over K(K-1) = 6
    assert diversity(E) == pytest.approx(-1.2 / 6)
    cq = context_quality(Q, E)
    assert cq.q == pytest.approx(1.6 / 3 + 0.6 * (-0.2))
    assert cq.k == 3 and cq.lam == 0.6
    assert context_quality(Q, E, lam=2.0).q == pytest.approx(1.6 / 3 - 0.4)
    assert cq.with_lambda(0.0) == pytest.approx(1.6 / 3)


def test_single_entry_has_zero_diversity_and_identical_entries_minus_one():
    assert diversity([[0.0, 1.0]]) == 0.0
    assert diversity([[0.0, 1.0], [0.0, 1.0]]) == pytest.approx(-1.0)


def test_quality_round_trips_through_dict():
    cq = context_quality(Q, E, lam=0.3)
    d = json.loads(json.dumps(cq.to_dict()))
    assert ContextQuality.from_dict(d) == cq
    assert d["q"] == pytest.approx(cq.q)


@pytest.mark.parametrize("bad", [[], [[np.nan, 0.0, 0.0]], [1.0, 0.0, 0.0]])
def test_bad_inputs_raise(bad):
    with pytest.raises(InvalidInputError):
        context_quality(Q, bad)


def test_width_mismatch_raises():
    with pytest.raises(InvalidInputError):
        relevance([1.0, 0.0], E)


@given(st.lists(st.lists(st.floats(-1, 1), min_size=3, max_size=3), min_size=2, max_size=6))
def test_diversity_equals_explicit_double_sum(rows):
    m = np.asarray(rows)
    k = len(rows)
    explicit = -sum(m[i] @ m[j] for i in range(k) for j in range(k) if i != j) / (k * (k - 1))
    assert diversity(rows) == pytest.approx(explicit, abs=1e-9)
