"""AriGraph and baselines as step-level memories, and the Ariadne agent playing with them."""

from __future__ import annotations

import pytest

pytest.importorskip("networkx")

from typer.testing import CliRunner

from deltamem.agents.ariadne import AGENT_SYSTEM, AriadneAgent, Plan, needs_exploration
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories import make_memory
from deltamem.memories.arigraph.arigraph import AriGraphMemory, load_graphs
from deltamem.memories.arigraph.triplets import Triplet as T
from deltamem.testing import check_memory
from deltamem.types import Recall, Step

from .arigraph_helpers import MapEnv, Responder

SYSTEMS = ["arigraph", "fullhistory", "summary", "rag", "reflexion", "simulacra"]


@pytest.mark.parametrize("name", SYSTEMS)
@pytest.mark.parametrize("mode", ["deterministic", "llm"])
def test_check_memory(name: str, mode: str) -> None:
    llm = ScriptedLLM(responder=Responder([]))
    m = make_memory(name, embedder=HashingEmbedder(), llm=llm, domain="alfworld",
                    options={"mode": mode})
    check_memory(m)
    assert m.stats()["episodes_learned"] == 1
    assert m.agent == "ariadne"


def test_observe_builds_graph_and_learn_persists(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = MapEnv()
    bank = tmp_path / "bank.db"
    m = AriGraphMemory.open(bank, embedder=HashingEmbedder())
    task = env.reset("map-0")
    assert m.recall(task).text == ""
    r = m.observe(Step("", task.observation))
    assert r is not None and r.details["location"] == "hall"
    assert r.details["unexplored_exits"] == ["hall, has exit, east"]
    r = m.observe(Step("go east", env.step("go east").observation))
    assert r.details["location"] == "kitchen"
    assert ["kitchen", "is east of", "hall"] in r.details["spatial"]
    assert "hall, has exit, east" not in r.details["unexplored_exits"]
    graph = m.working_graph()
    assert T("kitchen", "contains", "knife") in graph
    r = m.observe(Step("take knife", env.step("take knife").observation))
    assert T("knife", "is in", "inventory") in graph
    assert T("kitchen", "contains", "knife") not in graph  # replaced
    assert graph.growth[-1].replaced == 1
    assert "knife, is in, inventory" in r.text
    m.close()
    # nothing was persisted before learn
    m = AriGraphMemory.open(bank, embedder=HashingEmbedder())
    assert m.stats()["graphs"] == 0
    m.close()


def test_learn_replays_an_unobserved_episode_to_the_same_graph(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from deltamem.types import Episode

    env = MapEnv()
    task = env.reset("map-0")
    steps = []
    a = AriGraphMemory.open(tmp_path / "a.db", embedder=HashingEmbedder())
    a.recall(task)
    a.observe(Step("", task.observation))
    for act in ["go east", "take knife", "go east"]:
        t = env.step(act)
        steps.append(Step(act, t.observation))
        a.observe(steps[-1])
    ep = Episode(task, tuple(steps), success=False, reward=0.0)
    changes = a.learn(ep)
    assert changes.written and "replaced" in changes.written[0].reason
    assert a.learn(ep).of("unchanged")
    b = AriGraphMemory.open(tmp_path / "b.db", embedder=HashingEmbedder())
    b.learn(ep)  # never observed: ingests the episode
    ga, gb = load_graphs(tmp_path / "a.db")["map-0"], load_graphs(tmp_path / "b.db")["map-0"]
    assert ga.triplets() == gb.triplets() and ga.growth == gb.growth
    # the same game played again starts from its graph; another game starts empty
    assert "garden" in b.recall(task).text or b.recall(task).items
    assert env.reset("map-1") and b.recall(env.reset("map-1")).text == ""
    a.close()
    b.close()


def test_goto_and_exploration_helpers() -> None:
    details = {"location": "hall", "spatial": [["kitchen", "is east of", "hall"],
                                               ["garden", "is east of", "kitchen"]]}
    routes = AriGraphMemory.open(embedder=HashingEmbedder()).routes
    assert routes(details) == {"go to garden": ["go east", "go east"],
                               "go to kitchen": ["go east"]}
    assert routes({"location": None, "spatial": []}) == {}
    assert needs_exploration(Plan("g", [("find the key", "r")]))
    assert not needs_exploration(Plan("g", [("take the key", "r")]))


def test_ariadne_plays_with_arigraph_and_goes_to_known_places() -> None:
    env = MapEnv()
    resp = Responder(["go east", "go east", "go to hall", "go to garden", "take golden key"])
    llm = ScriptedLLM(responder=resp)
    m = AriGraphMemory.open(embedder=HashingEmbedder())
    task = env.reset("map-0")
    ep = AriadneAgent(llm).play(env, task, m.recall(task), memory=m)
    assert ep.success and ep.reward == 1.0
    # "go to hall" and "go to garden" ran as two moves each, one step per move
    assert env.actions == ["go east", "go east", "go west", "go west", "go east", "go east",
                           "take golden key"]
    assert [s.action for s in ep.steps] == env.actions
    assert "[go to hall]" in ep.steps[2].thought
    act_prompts = resp.prompts["act"]
    assert "go to hall" in act_prompts[2] and "Yet unexplored exits" in act_prompts[0]
    assert ep.usage.by_purpose["plan"].calls == 5 and ep.usage.by_purpose["act"].calls == 5


def test_ariadne_invalid_choice_is_not_sent() -> None:
    env = MapEnv(max_steps=3)
    llm = ScriptedLLM(responder=Responder(["fly away", "fly away", "go east", "go west"]))
    task = env.reset("map-0")
    ep = AriadneAgent(llm, max_steps=3).play(env, task, make_memory(
        "fullhistory", embedder=HashingEmbedder()).recall(task))
    # "fly away" twice: the answer and its repair are rejected -> one invalid, unsent step
    assert [s.valid for s in ep.steps] == [False, True, True]
    assert env.actions == ["go east", "go west"]
    assert ep.usage.by_purpose["act"].calls == 4


def test_reflexion_trials_reflect_between_attempts() -> None:
    env = MapEnv(max_steps=2)
    resp = Responder(["go east", "go north", "go east", "go east"])
    llm = ScriptedLLM(responder=resp)
    m = make_memory("reflexion", embedder=HashingEmbedder(), llm=llm,
                    options={"mode": "llm", "trials": 2})
    task = env.reset("map-0")
    ep = AriadneAgent(llm, max_steps=2).play(env, task, m.recall(task), memory=m)
    assert ep.usage.by_purpose["reflect"].calls == 1
    assert "Look in the garden next time." in resp.prompts["plan"][-1]
    changes = m.learn(ep)
    assert any("1 reflections" in c.reason for c in changes.written)
    assert "Look in the garden" in m.recall(task).text


def test_graph_show_cli(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import typer

    from deltamem.cli.graph import register

    env = MapEnv()
    bank = tmp_path / "run" / "bank.db"
    m = AriGraphMemory.open(bank, embedder=HashingEmbedder())
    task = env.reset("map-0")
    llm = ScriptedLLM(responder=Responder(["go east", "take knife"]))
    ep = AriadneAgent(llm, max_steps=2).play(env, task, m.recall(task), memory=m)
    m.learn(ep)
    m.close()
    app = typer.Typer()
    register(app)

    @app.command()
    def _noop() -> None:  # a second command keeps "graph" a sub-command
        pass

    res = CliRunner().invoke(app, ["graph", "show", str(tmp_path / "run"),
                                   "--export", str(tmp_path / "g.graphml")])
    assert res.exit_code == 0, res.output
    assert "map-0" in res.output and "replaced" in res.output and "take knife" in res.output
    assert (tmp_path / "g.graphml").is_file()


@pytest.mark.parametrize("limit", [None, 1])
def test_ariadne_repeat_limit_leaves_out_a_worn_out_action(limit: int | None) -> None:
    # the model shuttles east/west; with repeat_limit=1, "go west" was already taken once from
    # the east room, so on the second visit it is not offered and the next answer is used
    env = MapEnv(max_steps=4)
    llm = ScriptedLLM(responder=Responder(["go east", "go west"] * 4))
    task = env.reset("map-0")
    agent = AriadneAgent(llm, max_steps=4, repeat_limit=limit)
    ep = agent.play(env, task, make_memory("fullhistory", embedder=HashingEmbedder()).recall(task))
    expected = (["go east", "go west"] * 2 if limit is None
                else ["go east", "go west", "go east", "go east"])
    assert env.actions == expected and all(s.valid for s in ep.steps)


def test_ariadne_repeat_limit_must_be_positive() -> None:
    env = MapEnv()
    task = env.reset("map-0")
    with pytest.raises(ConfigError, match="repeat_limit"):
        AriadneAgent(ScriptedLLM(), repeat_limit=0).play(env, task, Recall())


def test_ariadne_plan_and_decision_share_the_working_memory_prefix() -> None:
    """The decision's prompt opens with the planner's working memory (a cached prefix for a
    local model); each call's own part follows it, after the agent's system message."""
    env = MapEnv(max_steps=2)
    resp = Responder(["go east", "go east"])
    llm = ScriptedLLM(responder=resp)
    m = AriGraphMemory.open(embedder=HashingEmbedder())
    task = env.reset("map-0")
    AriadneAgent(llm, max_steps=2, temperature=0.4).play(env, task, m.recall(task), memory=m)
    for plan, act in zip(resp.prompts["plan"], resp.prompts["act"], strict=True):
        head = plan.split("5. Your previous plan:")[0]
        assert head.startswith("1. Main goal:") and "4. From your memory:" in head
        assert act.startswith(head) and "Possible actions:" not in head
    assert {messages[0]["content"] for _, messages, _ in llm.calls} == {AGENT_SYSTEM}
    assert set(llm.temperatures) == {0.4}
