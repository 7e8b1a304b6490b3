"""The MCMA paper's baselines: raw trajectory, TRAD, ExpeL."""

from __future__ import annotations

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories import make_memory
from deltamem.memories.mcma.baselines import TRAD, ExpeL, RawTrajectory
from deltamem.testing import check_memory, make_episode
from deltamem.types import Step, Task


@pytest.mark.parametrize("name", ["raw-trajectory", "trad", "expel"])
def test_contract_via_registry(name: str) -> None:
    check_memory(make_memory(name, embedder=HashingEmbedder()))


def test_raw_trajectory_top_n_by_characters() -> None:
    mem = RawTrajectory.open(embedder=HashingEmbedder(), top_n=1)
    mem.learn(make_episode("put a clean apple in fridge", episode_id="a"))
    mem.learn(make_episode("heat a mug and put it in cabinet", episode_id="b"))
    mem.learn(make_episode("put a clean egg in fridge", success=False, episode_id="c"))
    r = mem.recall(Task("q", "put a clean apple in the fridge", domain="alfworld"))
    assert len(r.items) == 1 and "Task: put a clean apple in fridge" in r.text
    assert "> take apple 1 from countertop 1" in r.text
    assert mem.stats()["units"] == 2  # the failure was not kept


def test_trad_expands_retrieved_steps_with_order_marks() -> None:
    mem = TRAD.open(embedder=HashingEmbedder(), k=1, expand=1)
    ep = make_episode(episode_id="a")
    mem.learn(ep)
    task = Task("q", "put a clean apple in fridge", domain="alfworld",
                observation="You are in the middle of a room.")
    r = mem.recall(task)
    assert len(r.items) == 1
    assert "[Step 0] >" in r.text
    assert r.text.count("[Step ") in (2, 3)  # the step and its neighbours (1 each side)
    later = mem.observe(Step("go to fridge 1", "The fridge 1 is closed.",
                             thought="I need to open the fridge"))
    assert later is not None and "[Step 0]" in later.text


def test_expel_insights_vote_and_examples() -> None:
    mem = ExpeL.open(embedder=HashingEmbedder(), mode="deterministic", k=1)
    mem.learn(make_episode(episode_id="a"))
    mem.learn(make_episode(episode_id="b"))  # same insight again: upvoted, not duplicated
    fail = make_episode(success=False, episode_id="c", actions=(
        ("grab apple", "Nothing happens."), ("go to fridge 1", "The fridge 1 is closed.")))
    mem.learn(fail)
    st = mem.stats()
    assert st["insights"] == 2 and st["examples"] == 2
    r = mem.recall(Task("q", "put a clean apple in fridge", domain="alfworld"))
    assert "## Insights" in r.text and "## Example" in r.text
    assert "'grab apple' have no effect" in r.text
    first = r.text.split("## Insights\n", 1)[1].splitlines()[0]
    assert first.startswith("1. To put a clean apple in fridge")  # 3 votes, ranked first


def test_expel_llm_operations_are_validated() -> None:
    llm = ScriptedLLM([{"operations": [{"op": "ADD", "text": "Open closed receptacles."}]},
                       {"operations": [{"op": "UPVOTE", "index": 1},
                                       {"op": "ADD", "text": "Clean before placing."}]},
                       {"operations": [{"op": "DOWNVOTE", "index": 7}]},
                       "still wrong"])
    mem = ExpeL.open(embedder=HashingEmbedder(), llm=llm, mode="llm")
    mem.learn(make_episode(episode_id="a"))
    mem.learn(make_episode(episode_id="b"))
    ch = mem.learn(make_episode(episode_id="c"))  # index out of range, then invalid: rejected
    assert ch.items[0].kind == "rejected"
    r = mem.recall(Task("q", "anything", domain="alfworld"))
    assert "1. Open closed receptacles." in r.text
    assert mem.stats()["rejections"] == 1
