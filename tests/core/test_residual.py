"""Chains whose deltas edit steps compose to the edited procedure (core.residual)."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.residual import (
    EDITS_HEADER,
    Delta,
    Edit,
    compose,
    delta,
    edit_lines,
    edits,
    is_edit_line,
    locate,
)

MELT = ["look around", "focus on {A}", "move metal pot to stove", "activate stove", "wait",
        "examine {A}"]


def _delta(*groups: list[str]) -> str:
    return "\n".join([EDITS_HEADER, *(line for g in groups for line in g)])


def test_edit_lines_read_back_as_written():
    text = _delta(
        edit_lines("instead", 3, 4, "move metal pot to stove", "activate stove",
                   ["move metal pot to freezer"]),
        edit_lines("after", 6, 6, "examine {A}", "examine {A}", ["use thermometer on {A}"], 2))
    assert text.splitlines()[1] == ('- instead of steps 3-4 ("move metal pot to stove" to '
                                    '"activate stove"):')
    assert text.splitlines()[3] == '- after step 6 ("examine {A}"):'
    assert edits("Procedure: " + text + "\n- {A}: found in/on kitchen") == [
        Edit("instead", 3, 4, "move metal pot to stove", "activate stove",
             ("move metal pot to freezer",)),
        Edit("after", 6, 6, "examine {a}", "examine {a}", ("use thermometer on {A}",)),
    ]
    assert all(is_edit_line(line) for line in text.splitlines() if not line[0].isdigit())


def test_text_without_the_header_is_not_an_edits_delta():
    assert edits("Extra steps not in the base:\n1. wait") is None
    assert not is_edit_line("1. wait")


def test_steps_are_numbered_from_one():
    with pytest.raises(ValueError, match="from 1"):
        edit_lines("after", 0, 0, "look around", "look around", ["wait"])


def test_an_edit_puts_its_steps_in_place_and_keeps_the_rest_of_the_chain():
    delta = edits(_delta(edit_lines("instead", 3, 4, "move metal pot to stove",
                                    "activate stove", ["move metal pot to freezer"])))
    got = compose([(None, MELT), (delta, [])])
    assert [s for _, s in got] == ["look around", "focus on {A}", "move metal pot to freezer",
                                   "wait", "examine {A}"]
    assert [n for n, _ in got] == [0, 0, 1, 0, 0]  # which item each step came from


def test_additions_follow_the_chain():
    assert [s for _, s in compose([(None, ["a"]), (None, ["b"])])] == ["a", "b"]


def test_a_reader_with_other_step_numbers_finds_a_named_step_by_its_text():
    steps = ["look around", "wait1", "move metal pot to stove"]
    assert locate(steps, 2, "move metal pot to stove") == 2
    assert locate(steps, 3, "Move metal pot to  stove") == 2
    assert locate(steps, 1, "activate stove") is None


def test_a_group_whose_step_is_not_in_the_chain_is_appended():
    delta = [Edit("instead", 1, 1, "zzz", "zzz", ("c",))]
    assert [s for _, s in compose([(None, ["a", "b"]), (delta, [])])] == ["a", "b", "c"]


_step = st.sampled_from(["look around", "wait", "activate stove", "move {A} to pot",
                         "focus on {A}", "open freezer", "pick up pot", "examine {A}"])


@given(st.lists(_step, min_size=1, max_size=9), st.lists(_step, min_size=1, max_size=9))
def test_substitutions_and_insertions_compose_to_the_new_steps_less_what_it_left_out(base, new):
    groups: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, base, new, autojunk=False).get_opcodes():
        if tag == "replace":
            groups += edit_lines("instead", i1 + 1, i2, base[i1], base[i2 - 1], new[j1:j2])
        elif tag == "insert" and i1:
            groups += edit_lines("after", i1, i1, base[i1 - 1], base[i1 - 1], new[j1:j2])
        elif tag == "insert":
            groups += edit_lines("before", 1, 1, base[0], base[0], new[j1:j2])
    got = [s for _, s in compose([(None, base), (edits(_delta(groups)), [])])]
    # the new procedure, with the chain's steps it merely left out kept in their places
    kept = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, base, new, autojunk=False).get_opcodes():
        kept += base[i1:i2] if tag in ("equal", "delete") else new[j1:j2]
    assert got == kept


# -- the contract: a delta composes its chain to the episode's steps exactly ---------------

def _parts(d: Delta | None) -> tuple[list[Edit] | None, list[str]]:
    """A delta as :func:`compose` reads a chain item (its edits, its step lines)."""
    assert d is not None
    if d.kind == "additions":
        return None, list(d.lines)
    text = "\n".join([EDITS_HEADER, *d.lines])
    return edits(text), [line.split(". ", 1)[1] for line in d.lines if line[0].isdigit()]


_any_step = st.one_of(_step, st.text(alphabet='abcxyz {}"', min_size=1, max_size=8).map(
    lambda s: " ".join(s.split()) or "x"))


@given(st.lists(_any_step, max_size=9), st.lists(_any_step, min_size=1, max_size=9))
def test_a_delta_composes_its_chain_to_exactly_the_new_steps(base, new):
    d = delta(base, new)
    if [" ".join(s.lower().split()) for s in base] == [" ".join(s.lower().split()) for s in new]:
        assert d is None
        return
    parts = [(None, base), _parts(d)] if base else [_parts(d)]
    got = [s for _, s in compose(parts)]
    assert [" ".join(s.split()) for s in got] == [" ".join(s.split()) for s in new]


@given(st.lists(st.lists(_step, min_size=1, max_size=8), min_size=1, max_size=6))
def test_a_chain_of_deltas_composes_to_its_last_procedure(procedures):
    parts: list[tuple[list[Edit] | None, list[str]]] = [(None, procedures[0])]
    for new in procedures[1:]:
        d = delta([s for _, s in compose(parts)], new)
        if d is not None:
            parts.append(_parts(d))
        assert [s for _, s in compose(parts)] == new


def test_a_step_left_out_is_dropped_and_a_pure_extension_is_additions():
    d = delta(MELT, [*MELT[:2], *MELT[4:]])
    assert d is not None and d.kind == "edits"
    assert d.lines == ('- instead of steps 3-4 ("move metal pot to stove" to "activate stove"):',)
    assert delta(MELT, [*MELT, "focus on {B}"]) == Delta("additions", ("focus on {B}",))
    assert delta(MELT, [s.upper() for s in MELT]) is None
