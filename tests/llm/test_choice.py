"""Token-prefix choice decoding (deltamem.llm.choice) against a table of fake logits."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.llm.choice import pick_choice

END = 0
VOCAB = 20


class FakeModel:
    """Logits that prefer given tokens after given prefixes; records every call."""

    def __init__(self, prefs: dict[tuple[int, ...], Sequence[int]] | None = None,
                 seed: int = 0) -> None:
        self.prefs = prefs or {}
        self.calls: list[tuple[int, ...]] = []
        self.rng = np.random.default_rng(seed)
        self.table: dict[tuple[int, ...], np.ndarray] = {}

    def __call__(self, prefix: Sequence[int]) -> np.ndarray:
        key = tuple(prefix)
        self.calls.append(key)
        if key not in self.table:
            logits = self.rng.normal(size=VOCAB)
            for rank, tok in enumerate(self.prefs.get(key, ())):
                logits[tok] = 100.0 - rank
            self.table[key] = logits
        return self.table[key]


def greedy_reference(seqs: list[tuple[int, ...]], model: FakeModel) -> int:
    """Grammar-constrained greedy decoding by definition: extend token by token, then end."""
    prefix: tuple[int, ...] = ()
    while True:
        n = len(prefix)
        allowed = {s[n] for s in seqs if len(s) > n and s[:n] == prefix}
        if prefix in seqs:
            allowed.add(END)
        logits = model.table.get(prefix)
        if logits is None:
            logits = model(prefix)
        tok = max(sorted(allowed - {END}) + ([END] if END in allowed else []),
                  key=lambda t: logits[t])
        if tok == END:
            return seqs.index(prefix)
        prefix = (*prefix, tok)
        if [s for s in seqs if s[:len(prefix)] == prefix] == [prefix] and prefix in seqs:
            return seqs.index(prefix)


def test_follows_the_model_and_stops_when_unique() -> None:
    seqs = [(5, 6, 7), (5, 8), (9,)]
    model = FakeModel({(): [5], (5,): [8]})
    idx, decoded = pick_choice(seqs, model, end_token=END)
    assert idx == 1
    assert decoded == 2
    assert model.calls == [(), (5,)]


def test_single_choice_needs_no_model_call() -> None:
    model = FakeModel()
    assert pick_choice([(3, 4, 5)], model, end_token=END) == (0, 0)
    assert model.calls == []


def test_unique_first_token_decides_after_one_call() -> None:
    model = FakeModel({(): [9]})
    assert pick_choice([(5, 6, 7), (5, 8), (9, 1, 2, 3)], model, end_token=END) == (2, 1)
    assert model.calls == [()]


def test_end_token_picks_the_shorter_choice() -> None:
    seqs = [(4, 5), (4,)]  # "go" vs "go north": the end token decides
    assert pick_choice(seqs, FakeModel({(): [4], (4,): [END]}), end_token=END)[0] == 1
    assert pick_choice(seqs, FakeModel({(): [4], (4,): [5]}), end_token=END)[0] == 0


def test_tokens_outside_the_choices_are_ignored() -> None:
    # the model prefers 11, which no choice starts with; the best allowed token wins
    model = FakeModel({(): [11, 3]})
    assert pick_choice([(2,), (3,)], model, end_token=END)[0] == 1


def test_duplicates_count_once_and_first_index_wins() -> None:
    model = FakeModel({(): [7]})
    assert pick_choice([(1,), (7,), (7,)], model, end_token=END)[0] == 1


def test_sampling_is_seeded_and_stays_in_choices() -> None:
    seqs = [(1,), (2,), (3,)]
    model = FakeModel()
    picks = [pick_choice(seqs, model, end_token=END, temperature=5.0,
                         rng=np.random.default_rng(s))[0] for s in range(30)]
    again = [pick_choice(seqs, model, end_token=END, temperature=5.0,
                         rng=np.random.default_rng(s))[0] for s in range(30)]
    assert picks == again
    assert set(picks) <= {0, 1, 2} and len(set(picks)) > 1


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(([],), {}), (([(1,), ()],), {}), (([(1,)],), {"temperature": -1.0}),
     (([(1,), (2,)],), {"temperature": 1.0})],
)
def test_bad_input(args: tuple, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        pick_choice(*args, FakeModel(), end_token=END, **kwargs)


@given(
    st.lists(st.lists(st.integers(1, VOCAB - 1), min_size=1, max_size=4).map(tuple),
             min_size=1, max_size=8, unique=True),
    st.integers(0, 1000),
)
def test_same_answer_as_greedy_constrained_decoding(seqs: list, seed: int) -> None:
    model = FakeModel(seed=seed)
    idx, _ = pick_choice(seqs, model, end_token=END)
    assert idx == greedy_reference(seqs, model)
