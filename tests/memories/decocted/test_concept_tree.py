"""Concept tree (paper §5, Appendix C.2): branching formula, leaf sizes, leaf coverage, re-rank."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import ConfigError, InvalidInputError
from deltamem.llm import ScriptedLLM
from deltamem.memories.decocted.concept_tree import (
    ConceptTreeMemory,
    branching_factor,
    build_tree,
    leaves_covered,
    pool_candidates,
    select_round_robin,
)
from deltamem.memories.decocted.lessons import LessonMemory
from deltamem.testing import make_episode

from .decocted_helpers import (
    GROUPS,
    MEMBERS,
    SUBGROUPS,
    grouped_episodes,
    responder,
    structured_vector,
)


@given(n=st.integers(0, 5000), s=st.integers(1, 60), levels=st.integers(1, 4))
def test_branching_is_the_ceiling_of_the_root(n, s, levels):
    b = branching_factor(n, s, levels)
    # b = ceil((n/s)^(1/L)): the least integer with b^L >= n/s
    assert b >= 1 and b**levels * s >= n
    assert b == 1 or (b - 1) ** levels * s < n
    if n and (n / s) ** (1 / levels) % 1 > 1e-6:
        assert b == max(1, math.ceil((n / s) ** (1 / levels)))


def test_branching_examples_and_errors():
    assert branching_factor(200, 20, 2) == 4  # sqrt(10) = 3.16
    assert branching_factor(80, 20, 2) == 2
    assert branching_factor(27, 1, 3) == 3  # float (27)**(1/3) is 3.0000000000000004
    assert branching_factor(10, 20, 2) == 1
    with pytest.raises(ConfigError):
        branching_factor(10, 0, 2)


def _grouped_vectors() -> np.ndarray:
    return np.array([structured_vector(f"g{g} s{s} m{m}") for g in range(GROUPS)
                     for s in range(SUBGROUPS) for m in range(MEMBERS)])


def test_tree_branching_and_leaf_sizes_follow_the_formula():
    x = _grouped_vectors()  # N = 64
    tree = build_tree(x, levels=2, leaf_size=4)
    b = branching_factor(64, 4, 2)
    assert b == 4 == tree.branching
    root = tree.nodes[0]
    assert len(root.children) == b
    for cid in root.children:
        child = tree.nodes[cid]
        assert len(child.members) == 16 and len(child.children) == b
    leaves = tree.leaves
    assert len(leaves) == b**2
    assert all(len(leaf.members) == 4 and leaf.depth == 2 for leaf in leaves)
    # every entry sits in exactly one leaf; each leaf is one (group, subgroup)
    assert sorted(m for leaf in leaves for m in leaf.members) == list(range(64))
    assert all(len({m // 4 for m in leaf.members}) == 1 for leaf in leaves)


def test_small_nodes_and_depth_stop_the_split():
    x = _grouped_vectors()
    flat = build_tree(x, levels=1, leaf_size=16)  # b = 4, one level
    assert len(flat.leaves) == 4 and all(len(leaf.members) == 16 for leaf in flat.leaves)
    single = build_tree(x[:5], levels=2, leaf_size=20)  # b = 1: the root is the only leaf
    assert len(single.nodes) == 1 and single.nodes[0].is_leaf
    # the leaf rule: a node is a leaf at depth L, with at most s entries, or fewer than b
    for s in (3, 5, 8, 30):
        t = build_tree(x, levels=2, leaf_size=s)
        b = branching_factor(64, s, 2)
        for node in t.nodes:
            stops = node.depth == 2 or len(node.members) <= s or len(node.members) < b
            assert node.is_leaf == stops or (node.is_leaf and len(set(map(tuple, x[
                list(node.members)]))) < 2)
            if not node.is_leaf:
                assert 2 <= len(node.children) <= b
    with pytest.raises(InvalidInputError):
        build_tree(np.zeros((0, 3)))


def test_round_robin_covers_more_leaves_than_plain_top_k():
    x = _grouped_vectors()
    tree = build_tree(x, levels=2, leaf_size=4)
    query = np.array(structured_vector("g0 s0"))
    query /= np.linalg.norm(query)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    top_k = np.argsort(-(unit @ query), kind="stable")[:4]
    cands, ranked = pool_candidates(tree, query, unit, n_leaves=5, k_cand=300)
    picked = select_round_robin(cands, 4)
    assert len(ranked) == 5 and len(cands) == 20
    assert leaves_covered(tree, list(top_k)) == 1
    assert leaves_covered(tree, [c.index for c in picked]) == 4
    # still relevant: every pick is from the query's group
    assert all(c.index // 16 == 0 for c in picked)
    # K_cand caps the pool, the best first
    capped, _ = pool_candidates(tree, query, unit, n_leaves=5, k_cand=3)
    assert [c.index for c in capped] == [c.index for c in cands[:3]]


def _learn_all(mem) -> None:
    for ep in grouped_episodes():
        assert [c.kind for c in mem.learn(ep)] == ["written"]


def test_memory_recall_covers_more_leaves_than_lessons(tmp_path):
    from .decocted_helpers import structured_embedder

    emb = structured_embedder()
    tree_mem = ConceptTreeMemory.open(embedder=emb, mode="deterministic", leaf_size=4,
                                      max_select=4)
    flat = LessonMemory.open(embedder=emb, mode="deterministic", k=4)
    _learn_all(tree_mem)
    _learn_all(flat)
    task = make_episode(goal="solve g0 s0").task
    r_tree = tree_mem.recall(task)
    r_flat = flat.recall(task)
    tree, entries = tree_mem.tree()
    assert tree is not None and tree.branching == 4 and len(tree.leaves) == 16
    index = {e.payload["task"]: n for n, e in enumerate(entries)}
    flat_tasks = [m["task"] for m in r_flat.details["matches"]]
    tree_tasks = [m["task"] for m in r_tree.details["matches"]]
    assert leaves_covered(tree, [index[t] for t in flat_tasks]) == 1
    assert r_tree.details["leaves_covered"] == 4
    assert leaves_covered(tree, [index[t] for t in tree_tasks]) == 4
    # diversity logged by Q is higher for the tree's context
    assert r_tree.details["quality"]["div"] > r_flat.details["quality"]["div"]
    assert r_tree.details["quality"]["rel"] < r_flat.details["quality"]["rel"]
    assert tree_mem.stats()["tree"]["leaves"] == 16 and tree_mem.stats()["concepts"] == 64


def test_llm_mode_reranks_with_the_llm_and_writes_concepts():
    from .decocted_helpers import CONCEPT, structured_embedder

    llm = ScriptedLLM(responder=responder(selected=(3, 0, 3)))
    mem = ConceptTreeMemory.open(embedder=structured_embedder(), llm=llm, mode="llm",
                                 leaf_size=4, max_select=3)
    for ep in grouped_episodes()[:16]:
        mem.learn(ep)
    concepts = mem.store.items("concept")
    assert len(concepts) == 16 and concepts[0].payload == CONCEPT
    r = mem.recall(make_episode(goal="solve g0 s0").task)
    assert r.details["rerank"] == "llm"
    rerank_calls = [c for c in llm.calls if c[0] == "rerank"]
    assert len(rerank_calls) == 1
    prompt = rerank_calls[0][1][-1]["content"]
    listing = prompt.split("Candidate past tasks (index: task):\n")[1].split("\n\n")[0]
    tasks = [line.split(": ", 1)[1] for line in listing.splitlines()]
    # indices 3 then 0; the repeated 3 is dropped
    assert [i.text.splitlines()[0] for i in r.items] == [f"### Past task: {tasks[3]}",
                                                         f"### Past task: {tasks[0]}"]
    assert llm.usage.by_purpose["rerank"].calls == 1


def test_invalid_rerank_answer_is_recorded_and_round_robin_used():
    from .decocted_helpers import LESSON, structured_embedder

    def answer(messages, purpose, choices):
        if purpose == "rerank":
            return '{"selected": [99]}'
        return json.dumps(LESSON if "concept" not in messages[1]["content"][:200] else {
            "topic": "t", "pattern": "p", "technique": "q"})

    llm = ScriptedLLM(responder=answer)
    mem = ConceptTreeMemory.open(embedder=structured_embedder(), llm=llm, mode="llm",
                                 leaf_size=4)
    for ep in grouped_episodes()[:8]:
        mem.learn(ep)
    before = mem.stats()
    r = mem.recall(make_episode(goal="solve g0 s0").task)
    assert r.details["rerank"].startswith("rejected")
    assert len(r.items) == 4
    assert mem.stats() == before  # nothing written by recall


def test_rejected_concept_rejects_the_whole_entry():
    from .decocted_helpers import LESSON, structured_embedder

    def answer(messages, purpose, choices):
        if "concept" in messages[1]["content"][:200]:
            return '{"topic": ""}'
        return json.dumps(LESSON)

    mem = ConceptTreeMemory.open(embedder=structured_embedder(), llm=ScriptedLLM(responder=answer),
                                 mode="llm")
    changes = mem.learn(make_episode(goal="solve g0 s0 m0"))
    assert [c.kind for c in changes] == ["rejected"]
    assert mem.stats()["units"] == 0 and mem.stats()["rejections"] == 1
