"""Recall rendering (memories/deltamem/render.py): a recall served from the RecallCache is the
recall rendering gives, and the cache holds for one generation of the bank view only (any
write, by this handle or another, empties it); the tree keeps the text of the nodes it was
opened with, so a recall on a small bank reads no text from the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.memories.deltamem import render, search
from deltamem.testing import make_episode
from deltamem.types import Recall

H = HashingEmbedder(dim=64)
OTHER = (
    ("go to cabinet 2", "On the cabinet 2, you see a apple 2."),
    ("take apple 2 from cabinet 2", "You pick up the apple 2 from the cabinet 2."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("put apple 2 in/on fridge 1", "You put the apple 2 in/on the fridge 1."),
)


def open_mem(path: Any = ":memory:", **kw: Any) -> DeltaMem:
    return DeltaMem.open(path, embedder=H, domain="alfworld", task_trigger="goal",
                         env_trigger="scene", **kw)


def rendered(mem: DeltaMem, ep: Any) -> Recall:
    """The recall rendered afresh, bypassing the cache."""
    return render.render(search.found(mem.bank, mem.match(ep.task)), mem.config)


def test_a_cached_recall_equals_the_rendered_one_with_its_own_scores():
    mem = open_mem()
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER, episode_id="e1")
    first = mem.recall(ep.task)
    assert first.text and all(m.accepted for m in first.matches.values())
    again = mem.recall(ep.task)  # served from the cache
    assert again == first == rendered(mem, ep)
    assert len(mem.recalls._entries) == 1
    # another query on the same chains: the same text, its own scores
    other = make_episode("put a clean apple in the fridge", actions=OTHER, episode_id="e2")
    r = mem.recall(other.task)
    assert r == rendered(mem, other)
    assert r.text == first.text
    assert r.details["task"]["score"] != first.details["task"]["score"]
    scored = [it for it in r.items if it.score is not None]
    assert {it.score for it in scored} <= {m.score for m in r.matches.values()}
    # a recall's details are its own: changing one does not change the next
    r.details["task"]["chain"].append("x")  # type: ignore[index]
    assert mem.recall(other.task).details["task"]["chain"] == first.details["task"]["chain"]


def test_a_cached_recall_keeps_superseded_lines_and_the_budget():
    mem = open_mem(max_recall_tokens=40)
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER, episode_id="e1")
    first = mem.recall(ep.task)
    assert "budget" in first.details
    assert mem.recall(ep.task) == first == rendered(mem, ep)


def test_a_learn_empties_the_cache_and_the_next_recall_shows_the_new_node():
    mem = open_mem(tie_rule="deepest")  # the new residual is the match
    mem.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER, episode_id="e1")
    before = mem.recall(ep.task)
    generation = mem.bank.generation
    mem.learn(ep, before)
    assert mem.bank.generation > generation
    after = mem.recall(ep.task)
    assert after == rendered(mem, ep)
    assert len(after.matches["task"].chain) == len(before.matches["task"].chain) + 1


def test_a_write_by_another_handle_empties_the_cache(tmp_path: Path):
    path = tmp_path / "bank.db"
    a, b = open_mem(path), open_mem(path)
    a.learn(make_episode(episode_id="e0"))
    ep = make_episode(actions=OTHER, episode_id="e1")
    r = b.recall(ep.task)
    assert b.recall(ep.task) == r
    a.learn(ep, a.recall(ep.task))
    fresh = b.recall(ep.task)
    assert fresh != r and fresh == rendered(b, ep)
    a.close()
    b.close()


def test_a_bank_opened_small_reads_no_text_when_recalling(tmp_path: Path):
    path = tmp_path / "bank.db"
    mem = open_mem(path)
    mem.learn(make_episode(episode_id="e0"))
    mem.close()
    mem = open_mem(path)
    reads: list[list[str]] = []
    for tree in mem.bank.trees.values():
        source = tree._source
        assert source is not None

        def counted(ids: Any, source: Any = source) -> Any:
            reads.append(list(ids))
            return source(ids)

        tree._source = counted
    ep = make_episode(actions=OTHER, episode_id="e1")
    assert mem.recall(ep.task).text
    assert reads == []
    mem.close()


def test_the_one_pass_rendering_equals_render_on_deep_chains_failures_and_both_trees():
    """A first recall (the cache's one-pass rendering, ``RecallCache._plain``) gives what
    :func:`render.render` gives: chains of several deltas and failure records in both trees,
    with supersede on and off; the cached form then serves the same recall again."""
    goals = ["put a clean apple in fridge", "put a clean apple in the fridge",
             "put a hot apple in fridge", "clean an apple and put it in a fridge"]
    for supersede in (True, False):
        mem = open_mem(supersede=supersede, k_cons=100)
        for i in range(8):
            ep = make_episode(goals[i % len(goals)], actions=OTHER if i % 3 else OTHER[:2],
                              success=i % 4 != 3,
                              episode_id=f"e{i}")
            mem.learn(ep, mem.recall(ep.task))
        depths = [len(m.chain) for g in goals
                  for m in mem.recall(make_episode(g).task).matches.values()]
        assert max(depths) >= 3
        roles = {it.role for g in goals for it in mem.recall(make_episode(g).task).items}
        assert roles == {"base", "delta", "warning"}
        for g in [*goals, "heat a potato in the microwave"]:
            task = make_episode(g).task
            mem.recalls._entries.clear()
            first = mem.recall(task)  # one-pass rendering
            assert first == rendered(mem, make_episode(g))
            assert mem.recall(task) == first  # from the cache
        mem.close()
