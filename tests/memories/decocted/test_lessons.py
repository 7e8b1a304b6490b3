"""Lesson, raw-experience and k-means memories: contract, distillation, recall and logging."""

from __future__ import annotations

import json

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.llm import ScriptedLLM
from deltamem.memories import list_memories, make_memory
from deltamem.memories.decocted.lessons import LessonMemory, RawExperienceMemory, lesson_schema
from deltamem.testing import check_memory, make_episode

from .decocted_helpers import LESSON, responder

NAMES = ("lessons", "lessons-raw", "lessons-kmeans", "concept-tree")


def test_registered():
    assert set(NAMES) <= set(list_memories())


@pytest.mark.parametrize("name", NAMES)
def test_check_memory_deterministic(name):
    mem = make_memory(name, embedder=HashingEmbedder(64), extractor="structural")
    check_memory(mem)
    assert mem.stats()["units"] == 1


@pytest.mark.parametrize("name", NAMES)
def test_check_memory_llm(name):
    llm = ScriptedLLM(responder=responder())
    mem = make_memory(name, embedder=HashingEmbedder(64), llm=llm, extractor="llm")
    check_memory(mem)
    assert mem.stats()["units"] == 1
    r = mem.recall(make_episode().task)
    assert r.details["quality"]["k"] == 1 and r.details["quality"]["rel"] == pytest.approx(1.0)


def test_recall_is_top_k_by_task_similarity_and_logs_quality():
    mem = LessonMemory.open(embedder=HashingEmbedder(128), mode="deterministic", k=2)
    goals = ["put a clean apple in fridge", "put a clean mug in fridge",
             "heat some egg and put it in garbagecan"]
    for i, g in enumerate(goals):
        mem.learn(make_episode(goal=g, task_id=f"t{i}", episode_id=f"e{i}"))
    r = mem.recall(make_episode(goal="put a clean apple in fridge").task)
    assert [m["task"] for m in r.details["matches"]] == goals[:2]
    scores = [m["score"] for m in r.details["matches"]]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(1.0)
    q = r.details["quality"]
    assert q["rel"] == pytest.approx(sum(scores) / 2)
    assert q["q"] == pytest.approx(q["rel"] + 0.6 * q["div"]) and q["div"] < 0
    assert r.text.startswith(LessonMemory.header)
    assert "### Past task: put a clean mug in fridge" in r.text
    assert json.dumps(r.to_dict())


def test_deterministic_lesson_has_strategy_and_pitfalls():
    mem = LessonMemory.open(embedder=HashingEmbedder(64), mode="deterministic")
    ok = make_episode()
    bad = make_episode(success=False, actions=(("go to fridge 1", "The fridge 1 is closed."),
                                               ("take apple 1 from fridge 1", "Nothing happened.")))
    lesson = mem.distill([bad, ok])
    assert lesson.strategy[:2] == ("go to countertop", "take {A} from countertop")
    assert any("had no effect" in p for p in lesson.pitfalls)
    assert any("failed after 2 steps" in p for p in lesson.pitfalls)
    text = lesson.render()
    assert "Strategy:\n1. go to countertop" in text and "Pitfalls:\n- " in text
    with pytest.raises(InvalidInputError):
        mem.distill([ok, make_episode(goal="another goal")])
    with pytest.raises(InvalidInputError):
        mem.distill([])


def test_llm_lesson_is_validated_repaired_and_rejected():
    llm = ScriptedLLM(['{"task_type": "x"}', json.dumps(LESSON)])
    mem = LessonMemory.open(embedder=HashingEmbedder(64), llm=llm, mode="llm")
    changes = mem.learn(make_episode(episode_id="e1"))
    assert [c.kind for c in changes] == ["written"]
    assert len(llm.calls) == 2 and "rejected" in llm.calls[1][1][-1]["content"]
    stored = mem.entries()[0]
    assert stored.payload["structured"] == LESSON
    assert "1. find the object" in stored.text
    llm.push("not json", json.dumps({**LESSON, "strategy": []}))
    changes = mem.learn(make_episode(episode_id="e2"))
    assert [c.kind for c in changes] == ["rejected"]
    assert mem.stats()["rejections"] == 1 and mem.stats()["units"] == 1
    assert mem.store.rejections()[0]["raw"].startswith('{"task_type"')


def test_lesson_schema_bounds_every_string():
    s = lesson_schema()
    assert s["properties"]["task_type"]["maxLength"] == 200
    assert s["properties"]["strategy"]["items"]["maxLength"] == 200
    assert s["properties"]["strategy"]["minItems"] == 1


def test_raw_memory_stores_successful_trajectories_only():
    mem = RawExperienceMemory.open(embedder=HashingEmbedder(64))
    assert [c.kind for c in mem.learn(make_episode(success=False, episode_id="e0"))] == \
        ["skipped"]
    mem.learn(make_episode(episode_id="e1"))
    r = mem.recall(make_episode().task)
    assert "> take apple 1 from countertop 1" in r.text
    assert r.items[0].role == "experience"
    with pytest.raises(ConfigError):
        RawExperienceMemory.open(embedder=HashingEmbedder(64), mode="llm", k=0)


def test_learn_is_idempotent_and_bank_persists(tmp_path):
    path = tmp_path / "b.db"
    mem = make_memory("lessons", bank=str(path), embedder=HashingEmbedder(64))
    mem.learn(make_episode(episode_id="e1"))
    assert [c.kind for c in mem.learn(make_episode(episode_id="e1"))] == ["unchanged"]
    mem.close()
    again = make_memory("lessons", bank=str(path), embedder=HashingEmbedder(64))
    assert again.stats()["units"] == 1 and again.stats()["last_episode_id"] == "e1"


def test_a_failed_episodes_lesson_is_recalled_as_a_warning():
    mem = LessonMemory.open(embedder=HashingEmbedder(64))
    assert not mem.config.successes_only
    mem.learn(make_episode(success=False, episode_id="f"))
    mem.learn(make_episode(episode_id="s"))
    roles = {i.id: i.role for i in mem.recall(make_episode().task).items}
    keys = {i.id: i.key for i in mem.store.items()}
    assert {keys[i]: r for i, r in roles.items()} == {"failure": "warning", "success": "lesson"}
