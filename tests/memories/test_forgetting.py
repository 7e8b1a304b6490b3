"""DeltaMem's forgetting and correction: failure hits and the standing penalty, supersession
of contradicted knowledge, ``prune`` with its audit trail, and the recall budget."""

from __future__ import annotations

import pytest

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing import make_episode

SCENE = ("You are in the middle of a room. Looking quickly around you, you see a countertop 1, "
         "a fridge 1 and a sinkbasin 1.")
GOAL = "heat some egg and put it in countertop"


def episode(where: str, i: int, ok: bool = True, goal: str = GOAL):
    return make_episode(goal, scene=SCENE, success=ok, episode_id=f"e{i}", actions=[
        (f"go to {where} 1", f"On the {where} 1, you see a egg 1."),
        (f"take egg 1 from {where} 1", f"You pick up the egg 1 from the {where} 1."),
        ("go to countertop 1", "On the countertop 1, you see nothing."),
        ("move egg 1 to countertop 1", "You move the egg 1 to the countertop 1.")])


def bank(path=":memory:", **cfg) -> DeltaMem:
    return DeltaMem.open(path, embedder=HashingEmbedder(), domain="alfworld", **cfg)


def test_failure_hits_are_counted_and_cost_standing_only_with_a_weight() -> None:
    plain, weighted = bank(), bank(failure_weight=0.2)
    for mem in (plain, weighted):
        mem.learn(episode("sinkbasin", 0))
        root = mem.nodes("task")[0]
        changes = mem.learn(episode("sinkbasin", 1, ok=False))
        (failed,) = changes.of("failed")
        assert failed.id == root.id and "failure hit 1" in failed.reason
        assert mem.nodes("task")[0].failure_hits == 1
        assert mem.stats()["failure_hits"] == {"task": 1, "env": 0}
    assert plain.store.audit() == [] and "standing" not in plain.learn(
        episode("sinkbasin", 2, ok=False)).of("failed")[0].reason
    (entry,) = weighted.store.audit()
    assert entry["action"] == "penalised" and entry["policy"] == "standing"
    assert "f(v) = 1" in entry["reason"]


def test_the_penalty_moves_recall_away_from_a_node_that_keeps_failing() -> None:
    mem = bank(failure_weight=0.2, tie_rule="deepest")  # ties: the newest residual first
    mem.learn(episode("sinkbasin", 0))
    mem.learn(episode("fridge", 1))  # a residual: same goal, another place
    deep = mem.recall(episode("x", 9).task).matches["task"].node_id
    root = mem.nodes("task")[0].id
    assert deep != root
    mem.learn(episode("fridge", 2, ok=False), mem.recall(episode("x", 9).task))
    again = mem.recall(episode("x", 9).task).matches["task"]
    # equal cosine, the residual now penalised: the root (never followed into failure) wins
    assert again.node_id not in (deep,) and again.accepted
    assert mem.chain(again.node_id)[-1].failure_hits == 0


def test_newer_knowledge_of_the_same_place_supersedes_the_older() -> None:
    keep, sup = bank(), bank(supersede=True)
    for mem in (keep, sup):
        mem.learn(episode("sinkbasin", 0))
        changes = mem.learn(episode("fridge", 1))
    assert keep.learn(episode("fridge", 2)).of("superseded") == []
    task = episode("x", 9).task
    assert "found in/on sinkbasin" in keep.recall(task).text
    recall = sup.recall(task)
    assert "found in/on fridge" in recall.text and "found in/on sinkbasin" not in recall.text
    (gone,) = recall.details["env"]["superseded"]
    root = sup.nodes("env")[0]
    assert gone["node"] == root.id and gone["subject"] == "egg"
    assert [c.id for c in changes.of("superseded")] == [root.id]
    (entry,) = sup.store.audit()
    assert entry["action"] == "superseded"
    assert entry["record"]["line"] == "- egg: found in/on sinkbasin"
    assert root.payload.procedure.count("sinkbasin")  # the bank itself keeps the observation


def test_prune_dry_run_then_remove_with_the_audit_trail(tmp_path) -> None:
    path = tmp_path / "b.db"
    mem = bank(path)
    mem.learn(episode("sinkbasin", 0))
    for i in range(1, 4):
        mem.learn(episode("sinkbasin", i, ok=False))
    other = bank(path)  # a second process on the same bank
    root, *warnings = mem.nodes("task")  # each failure wrote a FAILURE delta under the root
    assert len(other.nodes("task")) == 4 and {n.label for n in warnings} == {"FAILURE"}
    assert (root.success_hits, root.failure_hits) == (0, 3)
    dry = mem.prune(["harmful:2"], dry_run=True)
    assert [(e.node_id, e.policy) for e in dry] == [(n.id, "harmful:2") for n in [root, *warnings]]
    assert "net-harmful: 3 failed vs 0 successful" in dry[0].reason
    assert all(e.reason == f"below node {root.id}, which the policy names" for e in dry[1:])
    assert len(mem.nodes("task")) == 4 and mem.store.audit() == []
    removed = mem.prune(["harmful:2"])
    assert len(removed) == 4 and mem.nodes("task") == []
    entries = mem.store.audit()
    assert [e["node_id"] for e in entries] == [e.node_id for e in removed]
    assert entries[0]["action"] == "pruned"
    assert entries[0]["record"]["payload"]["execution_procedure"]
    assert other.nodes("task") == []  # the other process sees the removal
    assert other.recall(episode("x", 9).task).matches["task"].node_id is None
    with pytest.raises(ConfigError):
        mem.prune(["oldest"])
    with pytest.raises(ConfigError):
        mem.prune([])


def test_prune_unused_takes_whole_subtrees() -> None:
    mem = bank()
    mem.learn(episode("sinkbasin", 0))
    mem.learn(episode("fridge", 1))
    egg_task = mem.nodes("task")
    assert [n.kind for n in egg_task] == ["ROOT", "RESIDUAL"]
    for i in range(2, 6):  # other goals, other places: the egg nodes are not used
        mem.learn(make_episode(f"put a clean mug{i} in desk{i}", scene=f"a bedroom {i}",
                               episode_id=f"o{i}"))
    names = {e.node_id: e.reason for e in mem.prune(["unused:4"], dry_run=True)}
    assert {n.id for n in egg_task} <= set(names)
    assert names[egg_task[0].id] == "not used in the last 4 learned episodes (policy: 4)"
    assert all(n.id not in names for n in mem.nodes("task")[2:])  # used since


def test_the_recall_budget_keeps_the_task_root_and_is_recorded() -> None:
    full, small = bank(), None
    for i, where in enumerate(["sinkbasin", "fridge", "countertop"]):
        full.learn(episode(where, i))
    task = episode("x", 9).task
    whole = full.recall(task)
    tokens = len(whole.text.split())
    path_free = full.store  # the same bank, reopened with a budget
    small = DeltaMem(path_free, HashingEmbedder(), max_recall_tokens=tokens - 10)
    cut = small.recall(task)
    budget = cut.details["budget"]
    assert budget["tokens_before"] == tokens and budget["tokens_after"] <= tokens - 10
    left_out = [i for ids in budget["left_out"].values() for i in ids]
    assert left_out and all(i not in [it.id for it in cut.items] for i in left_out)
    assert cut.matches == whole.matches  # the match (and so learn's decision) is unchanged
    assert "left out: recall budget" in cut.text
    root = next(it.id for it in whole.items if it.source == "task")
    assert root in [it.id for it in cut.items]  # the base skill every delta patches
    assert "max_recall_tokens" not in small.store.meta()["config"]  # a per-open choice
    assert DeltaMem(path_free, HashingEmbedder()).recall(task).text == whole.text
    with pytest.raises(ConfigError):
        bank(max_recall_tokens=5)


def test_policies_are_stored_with_the_bank(tmp_path) -> None:
    path = tmp_path / "p.db"
    bank(path, failure_weight=0.1, supersede=True).close()
    reopened = bank(path)
    assert reopened.config.failure_weight == 0.1 and reopened.config.supersede is True
