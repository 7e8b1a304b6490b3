"""ACE: counters from the episodes that used a bullet, deterministic ADD merge, de-duplication."""

from __future__ import annotations

import re

import pytest

from deltamem.llm import ScriptedLLM
from deltamem.memories.ace import ACE, Bullet
from deltamem.testing import make_episode

from .baseline_helpers import CURATION, HEAT_STEPS, REFLECTION, H, episodes

EGG = "heat some egg and put it in garbagecan"


def test_a_won_episode_adds_a_strategy_and_a_lost_one_a_pitfall():
    mem = ACE.open(embedder=H, domain="alfworld", dedup_threshold=0.99)
    for ep in episodes():
        mem.learn(ep, mem.recall(ep.task))
    stats = mem.stats()
    assert stats["bullets"] == {"strategies": 3, "pitfalls": 1, "others": 0}
    r = mem.recall(make_episode(EGG, actions=HEAT_STEPS).task)
    assert [i.role for i in r.items] == ["strategy"] * 3 + ["warning"]
    assert r.text.index("## STRATEGIES") < r.text.index("## COMMON MISTAKES")
    first = r.items[0].text.splitlines()
    assert re.match(r"\[str-00001\] helpful=\d+ harmful=\d+ :: When the task is like: ",
                    first[0])
    assert first[1] == "1. go to countertop"
    assert r.items[3].text.startswith("[pit-00004]")  # ids count across the playbook


def test_counters_follow_the_outcome_of_the_episode_that_used_the_bullet():
    mem = ACE.open(embedder=H, domain="alfworld")
    mem.learn(make_episode(episode_id="e0"))
    r = mem.recall(make_episode().task)
    top = r.items[0].id
    won = mem.learn(make_episode(episode_id="e1"), r)
    assert [c.kind for c in won] == ["hit", "skipped"]  # counted; its ADD is a duplicate
    assert "duplicate of str-00001" in won.items[1].reason
    lost = mem.learn(make_episode(success=False, episode_id="e2"), r)
    assert lost.items[0].kind == "failed"
    bullet = Bullet.of(mem.store.get(top))
    assert (bullet.helpful, bullet.harmful) == (1, 1)
    assert mem.stats()["units"] == 2  # one strategy, one pitfall


def test_without_a_recall_nothing_is_counted():
    mem = ACE.open(embedder=H, domain="alfworld")
    mem.learn(make_episode(episode_id="e0"))
    assert [c.kind for c in mem.learn(make_episode(episode_id="e1"))] == ["skipped"]
    assert mem.stats()["helpful"] == 0


def test_prune_harmful_leaves_a_bullet_out_of_recall_but_in_the_bank():
    mem = ACE.open(embedder=H, domain="alfworld", prune_harmful=2)
    mem.learn(make_episode(episode_id="e0"))
    for n in range(2):
        r = mem.recall(make_episode().task)
        assert any(i.role == "strategy" for i in r.items)
        mem.learn(make_episode(success=False, episode_id=f"lost{n}",
                               actions=HEAT_STEPS[:1]), r)
    assert all(i.role != "strategy" for i in mem.recall(make_episode().task).items)
    assert mem.stats()["bullets"]["strategies"] == 1


def test_llm_roles_tag_only_used_bullets_and_the_curator_adds():
    tags = {**REFLECTION, "bullet_tags": [{"id": "str-00001", "tag": "harmful"},
                                           {"id": "str-09999", "tag": "helpful"}]}
    llm = ScriptedLLM([REFLECTION, CURATION, tags, CURATION])
    mem = ACE.open(embedder=H, domain="alfworld", mode="llm", llm=llm)
    assert [c.kind for c in mem.learn(make_episode(episode_id="e0"))] == ["written"]
    r = mem.recall(make_episode().task)
    changes = mem.learn(make_episode(success=False, episode_id="e1"), r)
    assert [c.kind for c in changes] == ["failed", "skipped"]  # the same ADD: a duplicate
    assert (mem.stats()["helpful"], mem.stats()["harmful"]) == (0, 1)


def test_an_invalid_curator_answer_is_rejected_and_logged():
    bad = {"reasoning": "x", "operations": [{"type": "DELETE", "section": "strategies",
                                             "content": "y"}]}
    mem = ACE.open(embedder=H, domain="alfworld", mode="llm",
                   llm=ScriptedLLM([REFLECTION, bad, bad]))
    changes = mem.learn(make_episode(episode_id="e0"))
    assert changes.rejected and mem.stats()["units"] == 0 and mem.stats()["rejections"] == 1


@pytest.mark.parametrize("threshold, units", [(0.9, 1), (None, 2)])
def test_dedup_threshold(threshold, units):
    mem = ACE.open(embedder=H, domain="alfworld", dedup_threshold=threshold)
    mem.learn(make_episode(episode_id="e0"))
    mem.learn(make_episode(episode_id="e1"))
    assert mem.stats()["units"] == units


def test_the_reader_score_compares_the_goal_with_the_situation_line():
    from deltamem.memories.ace import situation

    assert situation("When the task is like: put a hot {A} in {B}\n1. go to x") == \
        "put a hot {A} in {B}"
    assert situation("Open closed receptacles first.") == "Open closed receptacles first."
    mem = ACE.open(embedder=H, domain="alfworld", dedup_threshold=0.99)
    for ep in episodes():
        mem.learn(ep)
    heat = mem.recall(make_episode(EGG, actions=HEAT_STEPS).task)
    best = max((i for i in heat.items if i.role == "strategy"), key=lambda i: i.score)
    assert best.score == pytest.approx(1.0, abs=1e-5) and "heat" in best.text.splitlines()[0]


def test_reader_key_content_scores_the_whole_bullet():
    mem = ACE.open(embedder=H, domain="alfworld", dedup_threshold=0.99)
    for ep in episodes():
        mem.learn(ep)
    task = make_episode(EGG, actions=HEAT_STEPS).task
    by_line = {i.id: i.score for i in mem.recall(task).items}
    mem.config = mem.config.model_copy(update={"reader_key": "content"})
    by_content = {i.id: i.score for i in mem.recall(task).items}
    assert by_content.keys() == by_line.keys() and by_content != by_line
    assert max(by_content.values()) < 1.0 - 1e-3  # the steps are in what is compared
