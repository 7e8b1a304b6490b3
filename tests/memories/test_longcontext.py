"""The long-context baseline: every trajectory, newest first, up to a token budget."""

from __future__ import annotations

from deltamem.memories.longcontext import LongContext
from deltamem.testing import check_memory, make_episode

from .baseline_helpers import H, episodes


def filled(**options) -> LongContext:
    mem = LongContext.open(embedder=H, domain="alfworld", **options)
    for ep in episodes():
        mem.learn(ep, mem.recall(ep.task))
    return mem


def test_contract_and_reopen(tmp_path):
    check_memory(LongContext.open(tmp_path / "b.db", embedder=H), bank=tmp_path / "b.db")


def test_every_trajectory_newest_first_won_and_lost():
    mem = filled(reader_top=None)
    r = mem.recall(make_episode().task)
    goals = [i.text.splitlines()[0] for i in r.items]
    assert goals == ["Task: heat some egg and put it in garbagecan"] * 2 + [
        "Task: put a clean mug in shelf", "Task: put a clean apple in fridge"]
    assert [i.role for i in r.items] == ["warning", "exemplar", "exemplar", "exemplar"]
    assert "Outcome: FAILURE" in r.items[0].text and r.details["shown"] == 4
    assert mem.stats()["units"] == 4 and mem.stats()["won"] == 3


def test_the_budget_keeps_the_newest_that_fit():
    mem = filled(reader_top=None)
    sizes = [len(i.text.split()) for i in mem.recall(make_episode().task).items]
    small = filled(budget_tokens=sizes[0] + sizes[1], reader_top=None)
    r = small.recall(make_episode().task)
    assert len(r.items) == 2 and r.details["shown"] == 2 and r.details["stored"] == 4
    assert r.details["tokens"] == sizes[0] + sizes[1]


def test_reader_scores_order_the_guide_not_the_prompt():
    r = filled(reader_top=None).recall(make_episode().task)
    assert all(i.score is not None for i in r.items)
    clean = [i.score for i in r.items if "clean" in i.text.splitlines()[0]]
    heat = [i.score for i in r.items if "heat" in i.text.splitlines()[0]]
    assert min(clean) > max(heat)  # the goal's kind of task scores first, though older
    plain = filled(item_scores="none", reader_top=None).recall(make_episode().task)
    assert all(i.score is None for i in plain.items)


def test_failures_can_be_left_out():
    mem = filled(with_failures=False)
    assert mem.stats()["units"] == 3
    assert all(i.role == "exemplar" for i in mem.recall(make_episode().task).items)


def test_the_reader_follows_its_best_few_and_the_prompt_holds_all():
    r = filled(reader_top=1).recall(make_episode().task)
    assert [i.role for i in r.items] == ["warning", "exemplar"]  # the loss stays a warning
    assert r.items[1].text.startswith("Task: put a clean")
    assert r.details["shown"] == 4 and r.text.count("## Episode") == 4
    assert r.details["followed"] == [r.items[1].id]
