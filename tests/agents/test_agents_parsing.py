"""Parsing the agent's replies and matching actions onto the admissible list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.agents.parsing import clean_action, has_placeholder, match_action, parse_reply


@pytest.mark.parametrize(
    ("text", "thought", "action"),
    [
        ("Thought: the mug is on the desk.\nAction: go to desk 1", "the mug is on the desk.",
         "go to desk 1"),
        ("Action: go to desk 1", "", "go to desk 1"),
        ("Thought: I plan.\n Action: open drawer 2.", "I plan.", "open drawer 2"),
        ("**Thought:** hmm\n**Action:** `take mug 1 from desk 1`", "hmm", "take mug 1 from desk 1"),
        ('action: "look"', "", "look"),
        ("ACTION:   go  to   shelf 3 ", "", "go to shelf 3"),
        ("Action 4: examine book 1", "", "examine book 1"),
        ("> Action: inventory", "", "inventory"),
        ("Action:\n\n  go to bed 1\n", "", "go to bed 1"),
        ("Thought: first\nAction: look\nThought: second\nAction: inventory", "second",
         "inventory"),
        ("Thought: a long\nthought over two lines\nAction: look", "a long thought over two lines",
         "look"),
        ("go to sofa 1", "", "go to sofa 1"),
        ("I will look around.\n\ngo to sofa 1.", "", "go to sofa 1"),
        ("Thought: I am not sure what to do.", "I am not sure what to do.", ""),
        ("", "", ""),
        ("Action: click[Buy Now]", "", "click[Buy Now]"),
        ("Thought: search.\nAction: search[red running shoes size 9]", "search.",
         "search[red running shoes size 9]"),
        ("Thought: x\nAction: ‘use desklamp 1’", "x", "use desklamp 1"),
    ],
)
def test_parse_reply_variants(text: str, thought: str, action: str) -> None:
    reply = parse_reply(text)
    assert reply.action == action
    assert reply.thought == thought


def test_action_plan_is_not_an_action_label() -> None:
    reply = parse_reply("Thought: make an action plan\nActions: none yet\nAction: look")
    assert reply.action == "look"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [('"go to desk 1."', "go to desk 1"), ("`look`", "look"), ("> open fridge 1", "open fridge 1"),
     ("  take   apple 1 ", "take apple 1"), ("wait1", "wait1")],
)
def test_clean_action(raw: str, clean: str) -> None:
    assert clean_action(raw) == clean


ADMISSIBLE = ["go to desk 1", "take mug 1 from desk 1", "look"]


def test_match_is_case_and_space_insensitive_and_returns_admissible_spelling() -> None:
    assert match_action("Go  To DESK 1", ADMISSIBLE) == "go to desk 1"
    assert match_action("go to desk 2", ADMISSIBLE) is None
    assert match_action("", ADMISSIBLE) is None


def test_empty_admissible_means_unknown_and_passes_any_action() -> None:
    assert match_action("xyzzy", []) == "xyzzy"
    assert match_action("", []) is None


def test_placeholder_entries_match_any_filled_action() -> None:
    adm = ["search[<keywords>]", "click[Buy Now]"]
    assert has_placeholder("search[<keywords>]")
    assert not has_placeholder("click[Buy Now]")
    assert match_action("Search[ red shoes ]", adm) == "search[red shoes]"
    assert match_action("search[]", adm) is None
    assert match_action("click[buy now]", adm) == "click[Buy Now]"
    assert match_action("click[Sell]", adm) is None


@given(st.sampled_from(ADMISSIBLE), st.sampled_from(["", "Thought: ok\n", "Thought: a\nb\n"]),
       st.sampled_from(["{}", "{}.", '"{}"', "`{}`", "{}  "]))
def test_parse_then_match_roundtrips_decorated_admissible_actions(
    action: str, prefix: str, wrap: str
) -> None:
    reply = parse_reply(prefix + "Action: " + wrap.format(action.upper()))
    assert match_action(reply.action, ADMISSIBLE) == action
