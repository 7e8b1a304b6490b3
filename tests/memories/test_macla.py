"""MACLA: Beta reliability per procedure, expected-utility selection, compression of
repeated procedures, contrastive refinement."""

from __future__ import annotations

import pytest

from deltamem.llm import ScriptedLLM
from deltamem.memories.macla import MACLA, contrast
from deltamem.testing import make_episode

from .baseline_helpers import REFINEMENT, H

LOST = {"success": False, "actions": (("go to garbagecan 1", "On the garbagecan 1, you see "
                                                            "nothing."),)}


def test_a_repeated_procedure_is_compressed_into_one_more_success():
    mem = MACLA.open(embedder=H, domain="alfworld")
    mem.learn(make_episode(episode_id="e0"))
    assert [c.kind for c in mem.learn(make_episode(episode_id="e1"))] == ["hit"]
    m = mem.recall(make_episode().task).details["matches"][0]
    assert (m["alpha"], m["beta"]) == (3.0, 1.0) and mem.stats()["procedures"] == 1


def test_a_loss_that_used_a_procedure_raises_beta_and_refines_it():
    mem = MACLA.open(embedder=H, domain="alfworld")
    mem.learn(make_episode(episode_id="e0"))
    r = mem.recall(make_episode().task)
    assert [c.kind for c in mem.learn(make_episode(episode_id="e1", **LOST), r)] == ["failed"]
    item = mem.recall(make_episode().task).items[0]
    assert item.text.splitlines()[-2].startswith("Do not skip: go to countertop;")
    assert item.text.splitlines()[-1] == "Avoid: go to garbagecan"
    assert mem.stats()["refined"] == 1
    assert [c.kind for c in mem.learn(make_episode(episode_id="e2", **LOST))] == ["skipped"]


def test_expected_utility_prefers_the_reliable_procedure_at_equal_relevance():
    mem = MACLA.open(embedder=H, domain="alfworld", merge_threshold=1.0)
    mem.learn(make_episode(episode_id="a"))
    alt = make_episode(episode_id="b", actions=(
        ("go to countertop 2", "On the countertop 2, you see a apple 1."),
        ("take apple 1 from countertop 2", "You pick up the apple 1 from the countertop 2."),
        ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
        ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
        ("go to fridge 1", "The fridge 1 is closed."),
        ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
    ))
    mem.learn(alt)
    assert mem.stats()["procedures"] == 2
    r = mem.recall(make_episode().task)
    first = r.items[0].id
    mem.learn(make_episode(episode_id="l0", **LOST), r)  # the one followed first loses
    r2 = mem.recall(make_episode().task)
    assert r2.items[0].id != first and r2.items[0].score > r2.items[1].score
    eu = [m["eu"] for m in r2.details["matches"]]
    assert eu == sorted(eu, reverse=True)


def test_utility():
    mem = MACLA.open(embedder=H, cost=0.5, explore=0.0)
    assert mem.utility(1.0, 1.0, 1.0) == pytest.approx(0.25)
    assert mem.utility(0.5, 3.0, 1.0) == pytest.approx(0.5 * (0.75 - 0.125))


def test_contrast():
    r = contrast([["a", "b", "c"], ["a", "c", "d"]], [["a", "x"], ["a", "c", "x", "y"]])
    assert r.keep == ["c"] and r.avoid == ["x", "y"]
    assert contrast([["a"]], []).keep == []


def test_llm_refinement_is_validated_and_shown():
    llm = ScriptedLLM([{"name": "Clean and place", "steps": ["take {object}"]}, REFINEMENT])
    mem = MACLA.open(embedder=H, domain="alfworld", mode="llm", llm=llm)
    mem.learn(make_episode(episode_id="e0"))
    mem.learn(make_episode(episode_id="e1", **LOST), mem.recall(make_episode().task))
    text = mem.recall(make_episode().task).items[0].text
    assert text.splitlines()[-1] == "Avoid: go to garbagecan"
