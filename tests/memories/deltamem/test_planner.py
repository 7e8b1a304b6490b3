"""The write planner (memories/deltamem/planner.py): a learn's plan is a list of data records
that says what it will write (Eq. 4, 5, 8) before anything is written, and one applier
(memories/plan.py) writes it; a learn without a recall matches, it never renders a recall."""

from __future__ import annotations

import math
from typing import Any

import pytest

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.memories.deltamem import render
from deltamem.memories.plan import (
    IncrementFailures,
    IncrementHits,
    InsertNode,
    Plan,
    TouchNodes,
    apply,
)
from deltamem.testing import TableEmbedder, make_episode
from deltamem.types import Episode, Recall

H = HashingEmbedder(dim=64)
OTHER_STEPS = (
    ("go to cabinet 2", "On the cabinet 2, you see a apple 2."),
    ("take apple 2 from cabinet 2", "You pick up the apple 2 from the cabinet 2."),
    ("go to microwave 1", "The microwave 1 is closed."),
    ("heat apple 2 with microwave 1", "You heat the apple 2 using the microwave 1."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("put apple 2 in/on fridge 1", "You put the apple 2 in/on the fridge 1."),
)


def open_mem(emb: Any = H, **kw: Any) -> DeltaMem:
    return DeltaMem.open(":memory:", embedder=emb, domain="alfworld", task_trigger="goal",
                         env_trigger="scene", **kw)


def plan_of(mem: DeltaMem, episode: Episode, recall: Recall | None) -> Plan:
    """The plan ``mem.learn(episode, recall)`` would apply (its first attempt's)."""
    return mem._plan_learn(episode, recall, mem._prepare_learn(episode, recall))


def names(plan: Plan) -> list[str]:
    return [type(w).__name__ for w in plan.writes]


def test_a_warm_start_success_plans_a_residual_under_v_star_and_a_hit_on_it():
    mem = open_mem()
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER_STEPS, episode_id="e1")
    recall = mem.recall(ep.task)
    v = {t: m.node_id for t, m in recall.matches.items()}
    assert all(m.accepted for m in recall.matches.values())
    plan = plan_of(mem, ep, recall)
    assert names(plan) == ["InsertNode", "IncrementHits", "InsertNode", "IncrementHits",
                           "TouchNodes"]
    inserts = [w.node for w in plan.writes if isinstance(w, InsertNode)]
    assert [(n.tree, n.kind, n.parent, n.depth) for n in inserts] == [
        ("task", "RESIDUAL", v["task"], 2), ("env", "RESIDUAL", v["env"], 2)]
    assert [(w.node_id, w.consolidate) for w in plan.writes
            if isinstance(w, IncrementHits)] == [(v["task"], None), (v["env"], None)]
    touch = plan.writes[-1]
    assert isinstance(touch, TouchNodes)
    assert set(touch.node_ids) == {v["task"], v["env"], *(n.id for n in inserts)}
    assert [c.kind for c in plan.changes] == ["written", "hit", "written", "hit"]
    # nothing is written while planning
    assert mem.stats()["nodes"] == {"task": 1, "env": 1}
    assert not mem.store.is_learned("e1")
    # the applier writes what the records say
    with mem.store.transaction():
        apply(mem.store, plan)
    mem.bank.reload(force=True)  # as learn does after its own commit
    assert [(n.kind, n.parent) for n in mem.nodes("task")] == [("ROOT", None),
                                                              ("RESIDUAL", v["task"])]
    assert mem.nodes("task")[0].success_hits == 1


def test_a_cold_start_plans_roots_and_no_hit():
    mem = open_mem()
    ep = make_episode(episode_id="e0")
    plan = plan_of(mem, ep, mem.recall(ep.task))
    assert names(plan) == ["InsertNode", "InsertNode", "TouchNodes"]
    assert [(w.node.kind, w.node.parent, w.node.depth) for w in plan.writes
            if isinstance(w, InsertNode)] == [("ROOT", None, 1), ("ROOT", None, 1)]


def test_a_failure_plans_a_failure_hit_on_the_task_tree_only():
    mem = open_mem()
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER_STEPS, success=False, episode_id="e1")
    recall = mem.recall(ep.task)
    plan = plan_of(mem, ep, recall)
    fails = [w for w in plan.writes if isinstance(w, IncrementFailures)]
    assert [(w.node_id, w.tree, w.episode_id, w.weight) for w in fails] == [
        (recall.matches["task"].node_id, "task", "e1", 0.0)]
    assert not any(isinstance(w, IncrementHits) for w in plan.writes)
    env = [w.node for w in plan.writes if isinstance(w, InsertNode) and w.node.tree == "env"]
    assert [n.label for n in env] == ["SUCCESS"]  # knowledge is valid whatever the outcome


def test_the_kth_hit_plans_the_consolidation_as_a_compare_and_set():
    emb = TableEmbedder({"base goal": [0.8, 0.6] + [0.0] * 62,
                         "variant goal": [1.0] + [0.0] * 63},
                        default=lambda t: H.embed_queries([t])[0])
    mem = open_mem(emb, k_cons=2, use_env_tree=False)
    mem.learn(make_episode("base goal", episode_id="e0"))
    mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e1"))
    mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e2"))
    residual = next(n for n in mem.nodes("task") if n.kind == "RESIDUAL")
    assert residual.success_hits == 1
    ep = make_episode("variant goal", actions=OTHER_STEPS, episode_id="e3")
    plan = plan_of(mem, ep, mem.recall(ep.task))
    hit = next(w for w in plan.writes if isinstance(w, IncrementHits))
    root = hit.consolidate
    assert hit.node_id == residual.id and hit.k == 2
    assert root is not None and (root.kind, root.origin, root.source, root.parent) == (
        "ROOT", "consolidated", residual.id, None)
    assert [c.kind for c in plan.changes] == ["skipped", "hit", "consolidated"]
    assert len(mem.nodes("task")) == 2  # planned, not written
    # the store decides: a hit that does not reach K_cons inserts no root
    early = IncrementHits(residual.id, consolidate=root, k=math.inf)
    with mem.store.transaction():
        apply(mem.store, Plan(writes=[early]))
    mem.bank.reload(force=True)
    assert len(mem.nodes("task")) == 2 and not mem.nodes("task")[1].consolidated


def test_learn_without_a_recall_matches_and_never_renders(monkeypatch):
    """The write decision reads typed matches (``match``), not a whole ``recall()`` with its
    rendering and budget; the bank it builds is the one learning with recalls builds."""
    eps = [make_episode(episode_id="e0"), make_episode(actions=OTHER_STEPS, episode_id="e1"),
           make_episode(success=False, episode_id="e2"),
           make_episode("put a hot egg in garbagecan", episode_id="e3")]
    with_recall = open_mem()
    for ep in eps:
        with_recall.learn(ep, with_recall.recall(ep.task))

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("learn rendered a recall")

    monkeypatch.setattr(DeltaMem, "recall", refuse)
    monkeypatch.setattr(render, "render", refuse)
    alone = open_mem()
    kinds = [[c.kind for c in alone.learn(ep)] for ep in eps]
    assert kinds[1] == ["written", "hit", "written", "hit"]

    def shape(mem: DeltaMem) -> list[tuple[Any, ...]]:
        return [(n.kind, n.label, n.depth, n.success_hits, n.failure_hits)
                for t in ("task", "env") for n in mem.nodes(t)]

    assert shape(alone) == shape(with_recall)


@pytest.mark.parametrize("given", [True, False])
def test_a_plan_carries_the_basis_its_decision_read(given):
    mem = open_mem()
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER_STEPS, episode_id="e1")
    plan = plan_of(mem, ep, mem.recall(ep.task) if given else None)
    root = {t: mem.nodes(t)[0] for t in ("task", "env")}
    assert plan.basis.version == mem.store.version()
    assert plan.basis.basis == tuple((t, root[t].id, 0, False) for t in ("task", "env"))
