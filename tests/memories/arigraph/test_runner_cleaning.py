"""The runner drives step-level memories with the Ariadne agent; the Cleaning game."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("networkx")

from deltamem.bench import load_config, run
from deltamem.embed import HashingEmbedder
from deltamem.envs.textworld_cleaning import CATALOG, LEVELS, design
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories.arigraph.arigraph import load_graphs

from .arigraph_helpers import MapEnv, Responder


def test_runner_plays_arigraph_with_ariadne(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(run_dir=tmp_path / "run", env="map", split="seen", memory="arigraph",
                      llm="scripted", episodes=2, max_steps=4)
    llm = ScriptedLLM(responder=Responder(["go east", "go east", "take golden key"] * 2))
    result = run(cfg, env=MapEnv(), llm=llm, embedder=HashingEmbedder(), progress=False)
    recs = [json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert result.episodes == 2 and [r["success"] for r in recs] == [True, True]
    assert llm.usage.by_purpose["plan"].calls == 6  # the Ariadne planner ran, not ReAct
    graphs = load_graphs(tmp_path / "run")
    assert set(graphs) == {"map-0", "map-1"} and len(graphs["map-0"].observations) == 4
    assert recs[0]["bank"]["graphs"] == 1 and recs[1]["bank"]["graphs"] == 2


def test_runner_passes_repeat_limit_to_ariadne(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # the model shuttles east/west; the run's repeat_limit reaches the Ariadne agent
    def played(limit: int | None, name: str) -> list[str]:
        cfg = load_config(run_dir=tmp_path / name, env="map", split="seen", memory="fullhistory",
                          llm="scripted", episodes=1, max_steps=4, repeat_limit=limit)
        env = MapEnv()
        llm = ScriptedLLM(responder=Responder(["go east", "go west"] * 4))
        run(cfg, env=env, llm=llm, embedder=HashingEmbedder(), progress=False)
        return env.actions

    assert played(None, "off") == ["go east", "go west"] * 2
    assert played(1, "on") == ["go east", "go west", "go east", "go east"]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_cleaning_design_is_deterministic_and_consistent(level: int) -> None:
    a, b = design(level, 2_000_003), design(level, 2_000_003)
    assert a == b and a != design(level, 2_000_004)
    n_rooms, n_mis = LEVELS[level]
    assert len(a["rooms"]) == n_rooms and len(a["misplaced"]) == n_mis
    assert len(a["passages"]) >= n_rooms - 1
    for item in a["misplaced"]:
        assert a["start"][item][0] != a["homes"][item][0]  # really in another room
    for room, furn in a["start"].values():
        assert room in a["rooms"] and (furn is None or furn in CATALOG[room])


@pytest.mark.envs
@pytest.mark.slow
def test_cleaning_walkthrough_wins_and_run_through_runner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("textworld")
    from deltamem.envs.registry import make_env

    env = make_env("textworld:cleaning", n_games=1, cache_dir=tmp_path / "games")
    tid = env.task_ids("seen")[0]
    task = env.reset(tid)
    assert "-= " in task.observation and task.max_steps == 150
    t = None
    for action in env.walkthrough():
        t = env.step(action)
    assert t is not None and t.success and t.score == 1.0
    again = env.reset(tid)
    assert again.observation == task.observation
    cfg = load_config(run_dir=tmp_path / "run", env="textworld:cleaning", split="seen",
                      memory="arigraph", llm="scripted", episodes=1, max_steps=6)
    llm = ScriptedLLM(responder=Responder(env.walkthrough()))
    run(cfg, env=env, llm=llm, embedder=HashingEmbedder(), progress=False)
    (graph,) = load_graphs(tmp_path / "run").values()
    assert len(graph.observations) == 7 and len(graph) > 5
    env.close()
