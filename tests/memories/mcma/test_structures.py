"""Multi-structure memories (§3.2) and the copilots that write them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories.mcma.copilot import LLMCopilot, RuleCopilot, alpha_guide, parse_answer
from deltamem.memories.mcma.preprocess import preprocess
from deltamem.memories.mcma.structures import (
    KnowledgeEntry,
    answer_schema,
    count_structures,
    depth,
    render_entry,
)
from deltamem.testing import make_episode
from deltamem.types import Episode

NESTED = {  # Figure 18 of the paper, shortened
    "name": "Inspect an Object Using a Light Source",
    "description": "Examine an <object> using a <light source>.",
    "knowledge": {
        "name": "General Procedure", "source": ["look at cellphone under the desk lamp"],
        "structured_storage": {"type": "tree", "root": {
            "name": "look at <object> under <light source>",
            "children": [
                {"name": "Navigate to <light source>", "children": [
                    {"structured_storage": {"type": "chain", "nodes": [
                        {"step": "go to location of <light source>"},
                        {"step": "use <light source> to turn it on"}]}}]},
                {"name": "Where things are", "children": [
                    {"structured_storage": {"type": "key_value",
                                            "data": {"cellphone": ["armchair", "bed"]}}}]},
            ]}}}}


def _deep(levels: int) -> dict:
    s: dict = {"type": "natural_language", "text": "leaf"}
    for _ in range(levels - 1):
        s = {"type": "chain", "nodes": [{"step": "x", "structured_storage": s}]}
    return {"knowledge": [{"name": "n", "description": "d",
                           "knowledge": {"name": "k", "structured_storage": s}}]}


def test_paper_nested_example_parses_counts_and_renders() -> None:
    entry = KnowledgeEntry.model_validate(NESTED)
    s = entry.knowledge.structured_storage
    assert count_structures(s) == Counter({"tree": 1, "chain": 1, "key_value": 1})
    assert depth(s) == 2
    text = render_entry(entry)
    assert text.splitlines()[0] == "[tree] Inspect an Object Using a Light Source"
    assert "1. go to location of <light source>" in text
    assert "- cellphone: armchair, bed" in text
    jsonschema.Draft202012Validator(answer_schema()).validate(
        {"knowledge": [entry.model_dump(exclude_none=True)]})


def test_schema_and_models_reject_malformed_structures() -> None:
    v = jsonschema.Draft202012Validator(answer_schema(2))
    bad_type = {"knowledge": [{"name": "n", "description": "d", "knowledge": {
        "name": "k", "structured_storage": {"type": "graph", "edges": []}}}]}
    assert list(v.iter_errors(bad_type))
    too_many = {"knowledge": [NESTED] * 3}
    assert list(v.iter_errors(too_many))
    with pytest.raises(ValueError, match="nests 7 structures deep"):
        parse_answer(_deep(7))
    assert len(parse_answer(_deep(5))) == 1
    with pytest.raises(ValueError, match="knowledge"):
        parse_answer({"knowledge": []})


def test_alpha_guide_range() -> None:
    assert "exact object" in alpha_guide(0.0)
    assert "placeholders" in alpha_guide(1.0)
    with pytest.raises(ConfigError):
        alpha_guide(1.5)


def test_rule_copilot_compositions_and_alpha() -> None:
    ep = make_episode()
    tree = preprocess(ep)
    low = RuleCopilot().abstract(ep, tree, 0.0)
    high = RuleCopilot().abstract(ep, tree, 1.0)
    assert [e.knowledge.structured_storage.type for e in low] == [
        "tree", "chain", "key_value", "natural_language"]
    assert "take apple 1 from countertop 1" in render_entry(low[0])
    assert "take <item> from <place>" in render_entry(high[0])
    assert "apple" not in render_entry(high[0])
    # the tree candidate nests chains in its leaves
    assert count_structures(low[0].knowledge.structured_storage)["chain"] == 3
    assert low[0].knowledge.source == ["put a clean apple in fridge"]


def test_rule_copilot_failure_reflection_names_rejected_actions() -> None:
    ep = make_episode(success=False, actions=(
        ("go to countertop 1", "On the countertop 1, you see a apple 1."),
        ("grab apple", "Nothing happens."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    ))
    entry, *others = RuleCopilot("failure").abstract(ep, preprocess(ep), 0.5)
    assert entry.knowledge.structured_storage.type == "key_value"
    text = render_entry(entry)
    assert "actions with no effect: grab apple" in text
    assert "failed after 3 steps" in text
    # the other compositions of the same reflection (Eq. 1): the useful steps as a chain
    kinds = [e.knowledge.structured_storage.type for e in others]
    assert kinds[0] == "chain" and "natural_language" in kinds
    chain = render_entry(others[0])
    assert "take apple from countertop" in chain and "grab apple" not in chain
    assert len(RuleCopilot("failure").abstract(ep, preprocess(ep), 0.5, 1)) == 1


def test_babyai_fixture_gives_structured_candidates() -> None:
    path = Path(__file__).parent / "fixtures" / "babyai.jsonl"
    for line in path.read_text().splitlines():
        ep = Episode.from_dict(json.loads(line))
        out = RuleCopilot().abstract(ep, preprocess(ep), 1.0)
        assert out and all("red" not in render_entry(e).split("\n", 2)[-1] for e in out)


def test_llm_copilot_valid_answer() -> None:
    llm = ScriptedLLM([{"knowledge": [NESTED]}])
    out = LLMCopilot(llm).abstract(make_episode(), preprocess(make_episode()), 0.8, 2)
    assert [e.name for e in out] == [NESTED["name"]]
    purpose, messages, _ = llm.calls[0]
    assert purpose == "abstract"
    assert "alpha = 0.80" in messages[1]["content"]
    assert "put a clean apple in fridge" in messages[1]["content"]


def test_llm_copilot_repairs_once_then_rejects() -> None:
    llm = ScriptedLLM([_deep(7), "{not json"])
    cop = LLMCopilot(llm, role="failure")
    with pytest.raises(ExtractionError, match="rejected after one repair"):
        cop.abstract(make_episode(success=False), preprocess(make_episode()), 0.5, 1)
    assert "nests 7 structures deep" in llm.calls[1][1][-1]["content"]
    assert len(cop.rejections) == 1
    ok = ScriptedLLM([_deep(7), {"knowledge": [NESTED]}])
    assert LLMCopilot(ok).abstract(make_episode(), preprocess(make_episode()), 0.5, 1)
