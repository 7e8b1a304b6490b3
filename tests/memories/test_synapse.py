"""Synapse: successful trajectories only, nearest one recalled as an exemplar."""

from __future__ import annotations

import pytest

from deltamem.errors import ConfigError
from deltamem.memories.synapse import Synapse
from deltamem.testing import make_episode

from .baseline_helpers import HEAT_STEPS, MUG_STEPS, H, good_llm, table, unit


def test_cold_start_recalls_nothing():
    mem = Synapse.open(embedder=H)
    r = mem.recall(make_episode().task)
    assert r.empty and r.items == () and r.details == {"matches": []}


def test_only_successes_are_stored():
    mem = Synapse.open(embedder=H)
    fail = make_episode(success=False, episode_id="f")
    (skip,) = mem.learn(fail)
    assert skip.kind == "skipped" and "successful trajectories only" in skip.reason
    assert mem.stats()["units"] == 0
    assert mem.recall(fail.task).empty
    assert mem.stats()["episodes_learned"] == 1  # seen, just not stored
    (w,) = mem.learn(make_episode(episode_id="s"))
    assert w.kind == "written" and w.id is not None
    (item,) = mem.store.items()
    assert item.id == w.id and item.episode_id == "s" and item.kind == "trajectory"
    assert item.text.startswith("Task: put a clean apple in fridge\n")
    assert "> put apple 1 in/on fridge 1\nYou put the apple 1 in/on the fridge 1." in item.text


def test_recalls_the_nearest_trajectory_as_exemplar():
    a = make_episode("goal a", actions=MUG_STEPS, scene="", episode_id="a")
    b = make_episode("goal b", actions=HEAT_STEPS, scene="", episode_id="b")
    q = make_episode("goal q", scene="", episode_id="q")
    keys = {ep.id: ep.task.goal for ep in (a, b, q)}
    emb = table({keys["a"]: unit(0.2), keys["b"]: unit(0.9), keys["q"]: unit(1.0)})
    mem = Synapse.open(embedder=emb)
    ids = {ep.id: mem.learn(ep).written[0].id for ep in (a, b)}
    r = mem.recall(q.task)
    (item,) = r.items
    assert item.id == ids["b"] and item.role == "exemplar"
    assert item.score == pytest.approx(0.9, abs=1e-6)
    assert r.text.startswith(Synapse.header)
    assert "Task: goal b" in r.text and "Task: goal a" not in r.text
    assert r.details["matches"][0]["id"] == ids["b"]


def test_k_recalls_several_by_decreasing_similarity():
    eps = [make_episode(f"goal {n}", scene="", episode_id=str(n)) for n in range(3)]
    q = make_episode("goal q", scene="")
    emb = table({e.task.goal: unit(c) for e, c in zip(eps, (0.3, 0.8, 0.6),
                                                                    strict=True)}
                | {q.task.goal: unit(1.0)})
    mem = Synapse.open(embedder=emb, k=2)
    for e in eps:
        mem.learn(e)
    r = mem.recall(q.task)
    assert [round(i.score, 3) for i in r.items] == [0.8, 0.6]
    assert r.text.index("Task: goal 1") < r.text.index("Task: goal 2")


def test_query_is_the_goal_text_and_the_scene_only_when_asked(tmp_path):
    task = make_episode().task
    assert Synapse.open(embedder=H).query_text(task) == task.goal
    assert Synapse.open(embedder=H, with_scene=True).query_text(task) == \
        f"{task.goal}\n{task.scene}"
    abstract = Synapse.open(embedder=H, query_text="abstract")
    assert abstract.query_text(task) == "put a clean {A} in {B}"
    # a bank keeps the text its keys were built with
    mem = Synapse.open(tmp_path / "b.db", embedder=H, query_text="abstract")
    mem.learn(make_episode(episode_id="s"))
    mem.close()
    with pytest.raises(ConfigError, match="query_text"):
        Synapse.open(tmp_path / "b.db", embedder=H, query_text="goal")
    assert Synapse.open(tmp_path / "b.db", embedder=H).config.query_text == "abstract"


def test_long_trajectories_are_cut_to_the_budget():
    steps = tuple((f"go to cabinet {n}", f"On the cabinet {n}, you see nothing.")
                  for n in range(1, 80))
    mem = Synapse.open(embedder=H, max_chars=600)
    (w,) = mem.learn(make_episode(actions=steps, episode_id="long"))
    (item,) = mem.store.items()
    assert len(item.text) <= 600 and "characters omitted" in item.text
    assert item.text.startswith("Task: put a clean apple")
    assert "cabinet 79" in item.text  # the end is kept
    assert "middle cut" in w.reason


def test_never_calls_the_llm():
    llm = good_llm()
    mem = Synapse.open(embedder=H, llm=llm, mode="llm")
    mem.learn(make_episode(episode_id="x"))
    mem.recall(make_episode().task)
    assert llm.calls == [] and llm.usage.calls == 0


def test_invalid_options_are_config_errors():
    with pytest.raises(ConfigError):
        Synapse.open(embedder=H, max_chars=10)
    with pytest.raises(ConfigError):
        Synapse.open(embedder=H, domain="nowhere")
