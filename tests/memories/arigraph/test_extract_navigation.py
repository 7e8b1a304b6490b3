"""Triplet extraction (rules and scripted LLM), outdated detection, locations and routes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("networkx")

from deltamem.errors import ExtractionError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories.arigraph.extract import (
    LLMOutdatedDetector,
    LLMTripletExtractor,
    RuleOutdatedDetector,
    RuleTripletExtractor,
)
from deltamem.memories.arigraph.navigation import (
    all_unexplored_exits,
    known_locations,
    locate,
    shortest_path,
    spatial_direction,
    spatial_triplet,
    unexplored_exits,
)
from deltamem.memories.arigraph.triplets import Triplet as T

KITCHEN = """-= Kitchen =-
You're now in a kitchen.

You see a closed oven. You make out a table. On the table you make out a cookbook and a knife.
When you stand up, you notice a counter. On the counter you make out a banana.

There is a closed patio door leading east. Why not try going north, that entranceway is not
blocked. There is an exit to the south.
There is a red apple and a yellow pepper on the floor.
>      -= Kitchen =-0/1"""


def test_rules_read_textworld_room() -> None:
    got = set(RuleTripletExtractor().extract(KITCHEN))
    assert {T("kitchen", "contains", "oven"), T("oven", "is", "closed"),
            T("kitchen", "contains", "table"), T("cookbook", "is on", "table"),
            T("knife", "is on", "table"), T("kitchen", "contains", "counter"),
            T("banana", "is on", "counter"), T("kitchen", "has exit", "east"),
            T("kitchen", "has exit", "north"), T("kitchen", "has exit", "south"),
            T("kitchen", "contains", "red apple"), T("kitchen", "contains", "yellow pepper"),
            } <= got
    assert not any(t.subject == "you" for t in got)


@pytest.mark.parametrize(("obs", "expected"), [
    ("You take the banana from the counter.", [T("banana", "is in", "inventory")]),
    ("You pick up the bug from the ground.", [T("bug", "is in", "inventory")]),
    ("You are carrying: a knife and a red apple.",
     [T("knife", "is in", "inventory"), T("red apple", "is in", "inventory")]),
    ("You put the toothbrush on the sink.", [T("toothbrush", "is on", "sink")]),
    ("You insert the sock into the washing machine.", [T("sock", "is in", "washing machine")]),
    ("You drop the bug.", [T("hall", "contains", "bug")]),
    ("You open the fridge, revealing a carrot.",
     [T("fridge", "is", "open"), T("carrot", "is in", "fridge")]),
    ("You unlock the chest with the key.", [T("chest", "is", "unlocked")]),
])
def test_rules_read_action_results(obs: str, expected: list[T]) -> None:
    assert RuleTripletExtractor().extract(obs, location="hall") == expected


def test_rule_outdated_detection() -> None:
    existing = [T("apple", "is on", "table"), T("kitchen", "contains", "apple"),
                T("fridge", "is", "closed"), T("knife", "used for", "cutting"),
                T("kitchen", "has exit", "east")]
    new = [T("apple", "is in", "inventory"), T("fridge", "is", "open"),
           T("knife", "is on", "table")]
    assert RuleOutdatedDetector().outdated(existing, new) == [
        T("apple", "is on", "table"), T("kitchen", "contains", "apple"),
        T("fridge", "is", "closed")]


def test_llm_extraction_to_triplets_and_drops_player() -> None:
    answer = {"triplets": [
        {"subject": "Kitchen", "relation": "contains", "object": "the Apple"},
        {"subject": "you", "relation": "are in", "object": "kitchen"},
        {"subject": "kitchen", "relation": "has exit", "object": "east"}]}
    llm = ScriptedLLM([answer])
    got = LLMTripletExtractor(llm).extract("You are in a kitchen...", action="look",
                                           location="kitchen")
    assert got == [T("kitchen", "contains", "apple"), T("kitchen", "has exit", "east")]
    purpose, messages, _ = llm.calls[0]
    assert purpose == "extract" and "You are in a kitchen" in messages[-1]["content"]
    assert "(you, are in" in messages[-1]["content"]  # the rule is stated in the prompt


def test_llm_extraction_rejected_after_one_repair() -> None:
    llm = ScriptedLLM(["not json", json.dumps({"triplets": [{"subject": "x"}]})])
    with pytest.raises(ExtractionError):
        LLMTripletExtractor(llm).extract("obs")
    assert len(llm.calls) == 2


def test_llm_outdated_by_numbers() -> None:
    existing = [T("apple", "is on", "table"), T("knife", "used for", "cutting")]
    new = [T("apple", "is in", "inventory")]
    llm = ScriptedLLM([{"replace": [{"old": 1, "new": 1}]}])
    assert LLMOutdatedDetector(llm).outdated(existing, new) == [T("apple", "is on", "table")]
    prompt = llm.calls[0][1][-1]["content"]
    assert "1. apple, is on, table" in prompt and "1. apple, is in, inventory" in prompt
    bad = ScriptedLLM([{"replace": [{"old": 5, "new": 1}]}])
    with pytest.raises(ExtractionError):
        LLMOutdatedDetector(bad).outdated(existing, new)
    silent = ScriptedLLM()
    assert LLMOutdatedDetector(silent).outdated([], new) == [] and not silent.calls


def test_locate_and_spatial_triplets() -> None:
    assert locate(KITCHEN) == "kitchen"
    assert locate("You arrive at the Old Barn.") == "old barn"
    assert locate("You take the key.") is None
    assert spatial_triplet("go east", "kitchen", "hall") == T("hall", "is east of", "kitchen")
    assert spatial_triplet("take key", "kitchen", "hall") is None
    assert spatial_triplet("go east", "kitchen", "kitchen") is None
    assert spatial_direction("is to the north of") == "north"
    assert spatial_direction("east of") == "east"
    assert spatial_direction("contains") is None


#: a hand-built map:  attic
#:                      |
#:            hall - kitchen - garden - shed
MAP = [T("kitchen", "is east of", "hall"), T("garden", "is east of", "kitchen"),
       T("kitchen", "is west of", "garden"),  # the same passage stated both ways
       T("attic", "is north of", "kitchen"), T("shed", "east of", "garden"),
       T("hall", "has exit", "east"), T("hall", "has exit", "west"),
       T("kitchen", "has exit", "west"), T("kitchen", "has exit", "east"),
       T("kitchen", "has exit", "north"), T("kitchen", "has exit", "south"),
       T("garden", "has exit", "west"), T("garden", "has exit", "east"),
       T("attic", "has exit", "south"), T("attic", "has exit", "up")]


def test_shortest_known_path() -> None:
    assert shortest_path(MAP, "hall", "shed") == ["go east", "go east", "go east"]
    assert shortest_path(MAP, "shed", "attic") == ["go west", "go west", "go north"]
    assert shortest_path(MAP, "hall", "hall") == []
    assert shortest_path(MAP, "hall", "moon") is None
    cut = [t for t in MAP if t.subject != "shed"]
    assert shortest_path(cut, "hall", "shed") is None


def test_unexplored_exits_are_exact() -> None:
    assert unexplored_exits(MAP, "hall") == [T("hall", "has exit", "west")]
    assert unexplored_exits(MAP, "kitchen") == [T("kitchen", "has exit", "south")]
    assert unexplored_exits(MAP, "garden") == []
    assert unexplored_exits(MAP, "attic") == [T("attic", "has exit", "up")]
    assert set(all_unexplored_exits(MAP)) == {
        T("hall", "has exit", "west"), T("kitchen", "has exit", "south"),
        T("attic", "has exit", "up")}
    assert known_locations(MAP) == ["attic", "garden", "hall", "kitchen", "shed"]
