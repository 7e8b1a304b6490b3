"""AWM: one workflow document per (inferred) task type, merged online."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from deltamem.errors import ConfigError, InvalidInputError
from deltamem.llm import ScriptedLLM
from deltamem.memories.awm import AWM, Workflow, workflow_schema
from deltamem.testing import make_episode
from deltamem.types import Episode, Task

from .baseline_helpers import (
    HEAT_STEPS,
    MERGED,
    MUG_STEPS,
    WORKFLOW,
    H,
    good_llm,
    table,
    unit,
)

APPLE = "put a clean apple in fridge"
MUG = "put a clean mug in shelf"
EGG = "heat some egg and put it in garbagecan"


def kinds_embedder(mug_cos: float = 0.9, egg_cos: float = 0.3):
    """apple goal = e0; the mug goal at ``mug_cos`` to it; the egg goal at ``egg_cos``."""
    return table({APPLE: unit(1.0), MUG: unit(mug_cos), EGG: unit(egg_cos)})


def eps():
    return (
        make_episode(APPLE, episode_id="apple"),
        make_episode(MUG, actions=MUG_STEPS, episode_id="mug"),
        make_episode(EGG, actions=HEAT_STEPS, episode_id="egg"),
    )


def with_type(ep: Episode, task_type: str) -> Episode:
    task = Task(**{**ep.task.to_dict(), "meta": {"task_type": task_type}})
    return Episode(task, ep.steps, ep.success, ep.reward, id=ep.id)


def test_same_kind_merges_and_another_kind_starts_a_document():
    mem = AWM.open(embedder=kinds_embedder(), mode="deterministic", domain="alfworld",
                   type_text="goal")
    apple, mug, egg = eps()
    (c1,) = mem.learn(apple)
    assert c1.kind == "written" and "new task type 'type-1'" in c1.reason
    (c2,) = mem.learn(mug, mem.recall(mug.task))
    assert c2.kind == "consolidated" and c2.id == c1.id
    assert "0.900 ≥ τ 0.75" in c2.reason
    assert mem.stats()["workflows"] == 1
    (c3,) = mem.learn(egg)
    assert c3.kind == "written" and "'type-2'" in c3.reason and "< τ 0.75" in c3.reason
    stats = mem.stats()
    assert (stats["units"], stats["workflows"]) == (2, 2)
    assert stats["task_types"] == {"type-1": 2, "type-2": 1}
    assert stats["oracle_types"] is False
    doc1 = mem.store.get(c1.id)
    # deterministic merge = union of the abstract steps of both episodes
    assert "go to countertop" in doc1.text and "take {A} from cabinet" in doc1.text
    assert doc1.text.count("\n") == len(doc1.payload["steps"])
    # centroid = mean of both goals' embeddings
    expected = (np.asarray(unit(1.0)) + np.asarray(unit(0.9))) / 2
    assert np.allclose(doc1.embedding, expected, atol=1e-6)


def test_recall_returns_the_document_of_the_inferred_type():
    mem = AWM.open(embedder=kinds_embedder(), mode="deterministic", domain="alfworld")
    apple, _mug, egg = eps()
    mem.learn(apple)
    mem.learn(egg)
    r = mem.recall(egg.task)
    (item,) = r.items
    assert item.role == "workflow" and item.score == pytest.approx(1.0, abs=1e-6)
    assert r.details["type"] == "type-2"
    assert r.text.startswith(AWM.header) and "heat {A}" in r.text
    assert "{A} = e.g. egg" in r.text
    assert "apple" not in r.text


def test_goal_below_the_threshold_recalls_nothing():
    emb = table({APPLE: unit(1.0), "novel goal": unit(0.5)})
    mem = AWM.open(embedder=emb, mode="deterministic", type_threshold=0.6)
    mem.learn(make_episode(APPLE, episode_id="a"))
    r = mem.recall(Task(id="n", goal="novel goal", domain="alfworld"))
    assert r.empty and r.details["type"] is None
    assert r.details["score"] == pytest.approx(0.5, abs=1e-6)


def test_type_inference_embeds_and_thresholds_goals_as_the_task_tree_does():
    from deltamem.domains import MINILM

    cfg = AWM.open(embedder=H, domain="scienceworld").config
    assert (cfg.text_mode(H.name), cfg.threshold(H.name)) == ("abstract", 0.82)
    assert cfg.threshold(MINILM) == 0.77  # ScienceWorld's measured abstracted-goal τ
    cfg = AWM.open(embedder=H, domain="alfworld", type_threshold=0.5).config
    assert cfg.threshold(H.name) == 0.5
    # household with MiniLM: the abstracted goal at the measured Task-Tree τ, as DeltaMem
    cfg = AWM.open(embedder=H, domain="alfworld").config
    assert (cfg.text_mode(MINILM), cfg.threshold(MINILM)) == ("abstract", 0.95)
    mem = AWM.open(embedder=H, domain="alfworld")
    task = eps()[0].task
    assert mem.type_query(task) != task.goal and "{A}" in mem.type_query(task)


def test_a_bank_made_before_type_text_keeps_the_raw_goal(tmp_path):
    path = tmp_path / "old.db"
    mem = AWM.open(path, embedder=H, domain="alfworld", mode="deterministic")
    mem.learn(eps()[0])
    config = {k: v for k, v in mem.store.meta()["config"].items() if k != "type_text"}
    mem.close()
    conn = sqlite3.connect(path)  # the config as an older deltamem recorded it
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(config),))
    conn.close()
    again = AWM.open(path, embedder=H, mode="deterministic")
    assert again.config.type_text == "goal"
    assert again.type_query(eps()[0].task) == eps()[0].task.goal


def test_documents_are_capped():
    mem = AWM.open(embedder=kinds_embedder(), mode="deterministic", max_steps=5)
    apple, mug, _ = eps()
    mem.learn(apple)
    mem.learn(mug)
    (doc,) = mem.store.items()
    assert len(doc.payload["steps"]) == 5


def test_failures_are_not_used():
    mem = AWM.open(embedder=H, mode="deterministic")
    (c,) = mem.learn(make_episode(success=False, episode_id="f"))
    assert c.kind == "skipped" and "successful episodes only" in c.reason
    assert mem.stats()["units"] == 0


def test_oracle_types_use_the_label_and_are_marked(tmp_path):
    path = tmp_path / "awm.db"
    # dissimilar goals, one oracle type → one document
    mem = AWM.open(path, embedder=kinds_embedder(mug_cos=0.1), mode="deterministic",
                   oracle_types=True)
    apple, mug, egg = eps()
    mem.learn(with_type(apple, "clean"))
    (c,) = mem.learn(with_type(mug, "clean"))
    assert c.kind == "consolidated" and "oracle task type 'clean'" in c.reason
    mem.learn(with_type(egg, "heat"))
    stats = mem.stats()
    assert stats["oracle_types"] is True
    assert stats["task_types"] == {"clean": 2, "heat": 1}
    r = mem.recall(with_type(egg, "heat").task)
    assert r.details["type"] == "heat" and r.details["oracle_types"] is True
    with pytest.raises(InvalidInputError, match="task_type"):
        mem.recall(apple.task)
    with pytest.raises(InvalidInputError, match="task_type"):
        mem.learn(make_episode(episode_id="unlabelled"))
    mem.close()
    with pytest.raises(ConfigError, match="oracle_types"):
        AWM.open(path, embedder=kinds_embedder(), oracle_types=False)
    again = AWM.open(path, embedder=kinds_embedder())
    assert again.stats()["oracle_types"] is True


def test_llm_mode_induces_then_merges_with_purposes_counted():
    llm = good_llm()
    mem = AWM.open(embedder=kinds_embedder(), llm=llm, mode="llm")
    apple, mug, _ = eps()
    (c1,) = mem.learn(apple)
    assert [p for p, _, _ in llm.calls] == ["extract"]
    doc = mem.store.get(c1.id)
    assert doc.text == Workflow(WORKFLOW["title"], WORKFLOW["steps"]).render()
    (c2,) = mem.learn(mug)
    assert [p for p, _, _ in llm.calls] == ["extract", "extract", "merge"]
    assert c2.kind == "consolidated"
    doc = mem.store.get(c1.id)
    assert doc.payload["steps"] == MERGED["steps"] and doc.payload["title"] == MERGED["title"]
    usage = llm.usage.by_purpose
    assert (usage["extract"].calls, usage["merge"].calls) == (2, 1)
    assert usage["extract"].prompt_tokens > 0 and usage["merge"].completion_tokens > 0
    # the merge prompt shows both the current document and the new workflow
    merge_prompt = llm.calls[2][1][1]["content"]
    assert merge_prompt.count("Workflow: Clean an object and place it") == 2
    induce_prompt = llm.calls[0][1][1]["content"]
    assert APPLE in induce_prompt and "> take apple 1 from countertop 1" in induce_prompt


def test_llm_merge_rejected_keeps_the_document():
    llm = ScriptedLLM([WORKFLOW, WORKFLOW, "not json", {"title": "t", "steps": ["s"] * 99}])
    mem = AWM.open(embedder=kinds_embedder(), llm=llm, mode="llm")
    apple, mug, _ = eps()
    (c1,) = mem.learn(apple)
    before = mem.store.get(c1.id)
    (c2,) = mem.learn(mug)
    assert c2.kind == "rejected" and "awm_merge" in c2.reason
    assert "steps has 99 items; at most 15 allowed" in c2.reason
    after = mem.store.get(c1.id)
    assert (after.text, after.payload) == (before.text, before.payload)
    assert np.array_equal(after.embedding, before.embedding)
    assert mem.store.rejections()[0]["role"] == "awm_merge"


def test_workflow_schema_bounds_strings_and_steps():
    s = workflow_schema(4)
    assert s["properties"]["steps"]["maxItems"] == 4
    assert s["properties"]["title"]["maxLength"] > 0
    assert s["properties"]["steps"]["items"]["maxLength"] > 0
    assert s["additionalProperties"] is False


def test_llm_steps_lose_their_numbering():
    w = Workflow("  A   title ", ["1. go to {x}", "- take {y}", "  ", "3) put {y}"])
    assert w.title == "A title" and w.steps == ["go to {x}", "take {y}", "put {y}"]


def test_merge_does_not_overwrite_a_document_changed_by_another_writer(tmp_path):
    path = tmp_path / "awm.db"
    mem = AWM.open(path, embedder=kinds_embedder(), mode="deterministic")
    other = AWM.open(path, embedder=kinds_embedder(), mode="deterministic")
    apple, mug, _ = eps()
    (c1,) = mem.learn(apple)
    merge = mem.merge

    def merge_while_another_writer_commits(current, new):
        other.store.update(c1.id, text="Workflow: theirs", payload={"title": "theirs",
                           "steps": ["x"], "episodes": 5}, embedding=None, episode_id="z")
        return merge(current, new)

    mem.merge = merge_while_another_writer_commits  # type: ignore[method-assign]
    (c2,) = mem.learn(mug)
    assert c2.kind == "skipped" and "changed in another process" in c2.reason
    assert mem.store.get(c1.id).text == "Workflow: theirs"
    assert mem.store.is_learned("mug")
