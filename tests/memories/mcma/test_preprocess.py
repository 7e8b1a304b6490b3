"""MCMA trajectory preprocessing (§3.1, Algorithm 1) on the paper's example, on recorded
trajectories of three environments, and with a scripted LLM splitter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories.mcma.grammar import grammar_for
from deltamem.memories.mcma.preprocess import (
    LLMSplitter,
    RuleSplitter,
    Segment,
    TaskNode,
    check_split,
    decompose,
    preprocess,
    prune,
    render_tree,
)
from deltamem.types import Episode, Step, Task

FIXTURES = Path(__file__).parent / "fixtures"

# Figure 10 of the paper (ALFWorld), observations shortened
PAPER = [
    "go to cabinet 2", "open cabinet 2", "take bowl 1 from cabinet 2", "go to diningtable 1",
    "move bowl 1 to diningtable 1", "take bowl 1 from diningtable 1", "go to fridge 1",
    "open fridge 1", "cool bowl 1 with fridge 1", "go to diningtable 1",
    "move bowl 1 to diningtable 1",
]


def _episode(actions, observations=None, domain="alfworld", goal="put a cool bowl in "
             "diningtable", valid=None) -> Episode:
    observations = observations or [f"observation {i}" for i in range(len(actions))]
    valid = valid or [True] * len(actions)
    steps = tuple(Step(a, o, valid=v) for a, o, v in zip(actions, observations, valid,
                                                          strict=True))
    return Episode(Task("t", goal, domain=domain), steps, success=True, reward=1.0)


def _walk(node: TaskNode):
    yield node
    for c in node.children:
        yield from _walk(c)


def test_paper_example_gives_the_figure_11_tree() -> None:
    tree = preprocess(_episode(PAPER))
    assert tree.steps_count == 11
    assert [(c.name, c.steps_count) for c in tree.children] == [
        ("Take bowl from cabinet", 3), ("Move bowl to diningtable", 2),
        ("Cool bowl with fridge", 4), ("Move bowl to diningtable", 2)]
    cool = tree.children[2]
    assert [(c.name, c.steps_count) for c in cool.children] == [
        ("Take bowl from diningtable", 1), ("Cool bowl with fridge", 3)]
    # segments of >= 3 actions were tried again; the 3-action 'take' one cannot split
    assert tree.children[0].children == []
    text = render_tree(tree)
    assert "Subtask: Cool bowl with fridge (4 steps)" in text


def test_pruning_drops_rejected_observe_loops_and_detours() -> None:
    acts = ["look", "go to cabinet 1", "go to cabinet 2", "open cabinet 2", "inventory",
            "take bowl 1 from cabinet 2", "go to shelf 1", "go to diningtable 1",
            "put x on y", "move bowl 1 to diningtable 1"]
    obs = ["room", "c1", "c2 closed", "opened", "carry nothing", "took", "shelf", "table",
           "Nothing happens.", "moved"]
    kept = prune(_episode(acts, obs).steps, grammar_for("alfworld"))
    assert [s.action for s in kept] == ["go to cabinet 2", "open cabinet 2",
                                        "take bowl 1 from cabinet 2", "go to diningtable 1",
                                        "move bowl 1 to diningtable 1"]
    assert [s.index for s in kept] == [2, 3, 5, 7, 9]


def test_pruning_removes_loops_by_revisited_observation() -> None:
    acts = ["go to kitchen", "go to hallway", "go to kitchen", "pick up apple"]
    obs = ["kitchen view", "hallway view", "kitchen view", "you take the apple"]
    kept = prune(_episode(acts, obs, domain="scienceworld").steps, grammar_for("scienceworld"))
    assert [s.action for s in kept] == ["go to kitchen", "pick up apple"]


def test_babyai_turn_rules() -> None:
    g = grammar_for("generic", ("turn left", "move forward"))
    assert g.name == "babyai"
    acts = ["turn left", "turn right", "move forward", "turn left", "turn left", "turn left",
            "move forward", "turn right", "turn right", "turn right", "turn right", "pick up"]
    kept = prune(_episode(acts, [f"v{i}" for i in range(len(acts))], domain="generic").steps, g)
    assert [s.action for s in kept] == ["move forward", "turn right", "move forward", "pick up"]


def test_check_split_finds_gaps_overlaps_and_order() -> None:
    assert check_split(5, [Segment(0, 2, "a"), Segment(2, 5, "b")]) == []
    assert check_split(5, [Segment(0, 5, "a")])  # one piece is no split
    assert check_split(5, [Segment(0, 2, "a"), Segment(3, 5, "b")])  # gap
    assert check_split(5, [Segment(0, 3, "a"), Segment(2, 5, "b")])  # overlap
    assert check_split(5, [Segment(2, 5, "b"), Segment(0, 2, "a")])  # order
    assert check_split(5, [Segment(0, 2, " "), Segment(2, 5, "b")])  # unnamed
    assert check_split(6, [Segment(0, 2, "a"), Segment(2, 5, "b")])  # short


@given(st.lists(st.sampled_from(["go to desk 1", "take pen 1 from desk 1", "open drawer 1",
                                 "put pen 1 in drawer 1", "use desklamp 1", "close drawer 1",
                                 "turn left", "move forward", "heat mug 1 with microwave 1"]),
                min_size=1, max_size=25))
def test_rule_tree_invariants(actions: list[str]) -> None:
    g = grammar_for("alfworld")
    tree = decompose("a goal", actions, RuleSplitter(g))
    for node in _walk(tree):
        if node.children:
            assert node.steps_count >= 3
            assert [a for c in node.children for a in c.actions] == node.actions
            assert sum(c.steps_count for c in node.children) == node.steps_count
        assert node.steps_count == len(node.actions) >= 0
        assert node.name
    assert [a for leaf in tree.leaves() for a in leaf.actions] == actions


def _fixture(name: str) -> list[Episode]:
    path = FIXTURES / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"fixture {path.name} not recorded (tests/memories/mcma/fixtures/record.py)")
    return [Episode.from_dict(json.loads(x)) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("env", ["babyai", "household", "scienceworld"])
def test_recorded_trajectories(env: str) -> None:
    for ep in _fixture(env):
        g = grammar_for(ep.task.domain, tuple(s.action for s in ep.steps))
        kept = prune(ep.steps, g)
        raw = [s.action for s in ep.steps]
        # the inserted noise is gone, the order of what is kept is the raw order
        assert len(kept) < len(raw)
        assert [s.index for s in kept] == sorted(s.index for s in kept)
        assert not any(s.action in ("look", "inventory", "look around", "jump around",
                                    "fly to the moon", "drop") and not ep.steps[s.index].valid
                       for s in kept)
        assert all(ep.steps[s.index].valid for s in kept)
        tree = preprocess(ep)
        assert [a for leaf in tree.leaves() for a in leaf.actions] == [s.action for s in kept]
        for node in _walk(tree):
            assert not node.children or node.steps_count >= 3
        if len(kept) >= 6:
            assert tree.children, f"{ep.task.id}: a {len(kept)}-action trajectory was not split"


def test_llm_splitter_valid_answer_is_used() -> None:
    llm = ScriptedLLM([{"subtasks": [{"name": "Fetch bowl", "first": 1, "last": 5},
                                     {"name": "Cool and place bowl", "first": 6, "last": 11}]},
                       {"subtasks": [{"name": "Get it", "first": 1, "last": 3},
                                     {"name": "Put it", "first": 4, "last": 5}]}],
                      responder=lambda *_: "not json")  # deeper nodes: rules
    splitter = LLMSplitter(llm, RuleSplitter(grammar_for("alfworld")))
    tree = decompose("put a cool bowl in diningtable", PAPER, splitter)
    assert [c.name for c in tree.children] == ["Fetch bowl", "Cool and place bowl"]
    assert tree.children[0].source == "llm"
    assert [c.name for c in tree.children[0].children] == ["Get it", "Put it"]
    assert llm.calls[0][0] == "preprocess"
    assert tree.children[1].children[0].source == "rule"  # its LLM answer was rejected
    assert splitter.used_llm == 2 and splitter.rejections


def test_llm_splitter_inconsistent_answer_is_repaired_then_rejected() -> None:
    bad = {"subtasks": [{"name": "A", "first": 1, "last": 4}, {"name": "B", "first": 6,
                                                                "last": 11}]}  # gap at 5
    llm = ScriptedLLM([bad, bad], responder=lambda *_: "not json")
    splitter = LLMSplitter(llm, RuleSplitter(grammar_for("alfworld")))
    tree = decompose("put a cool bowl in diningtable", PAPER, splitter)
    # the repair request said what was wrong
    assert "starts at action 6, expected 5" in llm.calls[1][1][-1]["content"]
    assert splitter.rejections and tree.children[0].name == "Take bowl from cabinet"
    assert tree.children[0].source == "rule"


def test_repeated_generic_observation_is_not_a_loop() -> None:
    # ScienceWorld answers "The door is already open." for every door: not a loop, and the
    # no-op itself is pruned; what was achieved in between stays
    acts = ["open door to hallway", "go to hallway", "pick up seed jar",
            "open door to kitchen", "go to kitchen", "go to hallway"]
    obs = ["The door is already open.", "You move to the hallway.",
           "You move the seed jar to the inventory.", "The door is already open.",
           "You move to the kitchen.", "You move to the hallway."]
    kept = prune(_episode(acts, obs, domain="scienceworld").steps, grammar_for("scienceworld"))
    assert [s.action for s in kept] == ["go to hallway", "pick up seed jar", "go to kitchen",
                                        "go to hallway"]
