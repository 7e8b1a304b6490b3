"""Chains whose deltas replace steps compose to the procedure of the matched episode."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.residual import Replacement, compose, cut_at, replacement, replacement_line


def test_a_replacement_line_reads_back_as_written():
    line = replacement_line(3, "Move {A} to   stove")
    assert line == 'Replaces the base from step 3 ("Move {A} to stove") on:'
    assert replacement("Procedure: " + line + "\n1. move {A} to freezer") == Replacement(
        3, "move {a} to stove")


def test_text_that_announces_no_replacement_is_an_addition():
    assert replacement("Extra steps not in the base:\n1. wait") is None
    assert replacement("") is None


def test_steps_are_numbered_from_one():
    with pytest.raises(ValueError, match="from 1"):
        replacement_line(0, "look around")


def test_additions_concatenate_and_a_replacement_cuts_the_chain_at_its_step():
    base = ["look around", "move {A} to stove", "activate stove", "wait"]
    melt_extra = ["examine {A}"]
    freeze = ["move {A} to freezer", "wait", "examine {A}"]
    parts = [(None, base), (None, melt_extra), (Replacement(2, "move {A} to stove"), freeze)]
    assert [s for _, s in compose(parts)] == ["look around", *freeze]
    assert [n for n, _ in compose(parts)] == [0, 2, 2, 2]  # which item each step came from


def test_a_reader_with_other_step_numbers_finds_the_quoted_step_by_its_text():
    steps = ["look around", "wait1", "move {A} to stove", "activate stove"]
    assert cut_at(steps, Replacement(2, "move {A} to stove")) == 2  # step 2 is "wait1" here
    assert cut_at(steps, Replacement(3, "move {A} to stove")) == 2


def test_a_replacement_whose_step_is_not_in_the_chain_appends_like_an_addition():
    parts = [(None, ["a", "b"]), (Replacement(1, "zzz"), ["c"])]
    assert [s for _, s in compose(parts)] == ["a", "b", "c"]


def test_a_root_never_cuts_anything():
    assert [s for _, s in compose([(Replacement(1, "a"), ["a", "b"])])] == ["a", "b"]


_step = st.sampled_from(["look around", "wait", "activate stove", "move {A} to pot",
                         "focus on {A}", "open freezer", "pick up pot"])


@given(st.lists(_step, min_size=1, max_size=8), st.lists(_step, max_size=8), st.data())
def test_replacing_from_the_first_difference_gives_the_new_procedure(base, new, data):
    k = next((i for i, (b, s) in enumerate(zip(base, new, strict=False)) if b != s),
             min(len(base), len(new)))
    if k >= len(base):
        return  # the new procedure extends the base: that is an addition
    where = replacement(replacement_line(k + 1, base[k]))
    assert where is not None
    assert [s for _, s in compose([(None, base), (where, new[k:])])] == new
