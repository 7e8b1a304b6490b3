"""ReasoningBank: strategy and warning lessons from successes and failures, top-k recall."""

from __future__ import annotations

import pytest

from deltamem.errors import ConfigError
from deltamem.llm import ScriptedLLM
from deltamem.memories.reasoningbank import (
    CONTENT_MAX,
    Lesson,
    ReasoningBank,
    lessons_schema,
)
from deltamem.testing import make_episode
from deltamem.types import Step, Task

from .baseline_helpers import HEAT_STEPS, LESSONS, MUG_STEPS, H, good_llm, table, unit


def test_failures_are_kept_as_warnings():
    mem = ReasoningBank.open(embedder=H, mode="deterministic")
    fail = make_episode("heat some egg and put it in garbagecan", actions=HEAT_STEPS[:3],
                        success=False, episode_id="f")
    (c,) = mem.learn(fail)
    assert c.kind == "written" and c.reason.startswith("warning from a failed episode")
    (item,) = mem.store.items()
    assert item.key == "warning" and item.payload["tag"] == "warning"
    assert "[FAILED]" in item.payload["content"]
    r = mem.recall(fail.task)
    (ri,) = r.items
    assert ri.role == "warning" and ri.id == item.id
    assert "## Warnings: mistakes to avoid" in r.text and "[Warning] Failed attempt" in r.text
    assert "## Strategies" not in r.text
    assert mem.stats()["lessons"] == {"strategy": 0, "warning": 1}


def test_success_gives_a_strategy_and_a_warning_for_rejected_commands():
    mem = ReasoningBank.open(embedder=H, mode="deterministic")
    ep = make_episode("put a clean mug in shelf", actions=MUG_STEPS, episode_id="m")
    changes = mem.learn(ep)
    assert [c.kind for c in changes] == ["written", "written"]
    strategy, warning = mem.store.items()
    assert (strategy.key, warning.key) == ("strategy", "warning")
    assert "clean {A} with sinkbasin" in strategy.payload["content"]
    assert "Nothing happened" in warning.payload["content"]
    r = mem.recall(ep.task)
    assert {i.role for i in r.items} == {"strategy", "warning"}
    assert r.text.index("## Strategies") < r.text.index("## Warnings")
    # one episode's lesson set is one memory unit (Table 5)
    stats = mem.stats()
    assert (stats["units"], stats["items"]) == (1, 2)
    assert stats["avg_tokens"] == len(strategy.text.split()) + len(warning.text.split())


def test_step_flagged_invalid_counts_as_rejected():
    steps = (Step("frobnicate", "OK.", valid=False), Step("put apple 1 in/on fridge 1", "Done."))
    ep = make_episode(episode_id="v")
    ep = type(ep)(ep.task, steps, True, 1.0, id="v")
    mem = ReasoningBank.open(embedder=H, mode="deterministic")
    assert len(mem.learn(ep).written) == 2


def test_items_retrieval_is_top_k_lessons_by_cosine_with_the_goal():
    names = ["alpha", "beta", "gamma", "delta", "epsilon"]  # no numbers: those are abstracted
    eps = [make_episode(f"goal {x}", success=False, episode_id=x) for x in names]
    cosines = [0.1, 0.9, 0.5, 0.7, 0.3]
    probe = ReasoningBank.open(embedder=H, mode="deterministic")
    keys = [probe.distill(ep)[0].key_text for ep in eps]  # title + description are embedded
    emb = table({"query goal": unit(1.0)} | dict(zip(keys, map(unit, cosines), strict=True)))
    mem = ReasoningBank.open(embedder=emb, mode="deterministic", retrieval="items", k=3)
    for ep in eps:
        mem.learn(ep)
    r = mem.recall(Task(id="q", goal="query goal", domain="alfworld"))
    assert len(r.items) == 3
    assert [round(i.score, 3) for i in r.items] == [0.9, 0.7, 0.5]
    assert [m["score"] for m in r.details["matches"]] == [i.score for i in r.items]
    assert "goal beta" in r.items[0].text
    assert ReasoningBank(mem.store, emb).config.retrieval == "items"  # as it was built
    floor = ReasoningBank(mem.store, emb, min_score=0.6, k=5)
    assert [round(i.score, 3) for i in floor.recall(Task(id="q", goal="query goal")).items] \
        == [0.9, 0.7]
    assert ReasoningBank(mem.store, emb, min_score=0.95).recall(
        Task(id="q", goal="query goal")).empty


def test_query_retrieval_recalls_the_lesson_sets_of_the_k_most_similar_past_goals():
    """The paper's retrieval: every lesson keyed by its episode's goal; top-1 by default,
    ties to the earliest episode; a success's strategy and warning come together."""
    goals = {"goal alpha": 0.1, "goal beta": 0.9, "put a clean mug in shelf": 0.7,
             "goal delta": 0.9}
    emb = table({"query goal": unit(1.0)} | {g: unit(c) for g, c in goals.items()})
    mem = ReasoningBank.open(embedder=emb, mode="deterministic", query_text="goal")
    assert mem.config.retrieval == "query" and mem.config.k == 1
    for n, goal in enumerate(goals):
        ok = goal.startswith("put")
        extra = {"actions": MUG_STEPS} if ok else {}
        mem.learn(make_episode(goal, success=ok, episode_id=f"e{n}", **extra))
    query = Task(id="q", goal="query goal", domain="alfworld")
    (only,) = mem.recall(query).items  # beta and delta tie at 0.9: the earlier, beta
    assert "goal beta" in only.text and only.role == "warning"
    top3 = ReasoningBank(mem.store, emb, k=3).recall(query)
    assert [round(i.score, 3) for i in top3.items] == [0.9, 0.9, 0.7, 0.7]
    assert [i.role for i in top3.items][2:] == ["strategy", "warning"]  # the mug episode's set
    with pytest.raises(ConfigError, match="retrieval='query'"):
        ReasoningBank(mem.store, emb, retrieval="items")


def test_llm_mode_distils_with_purpose_extract():
    llm = good_llm()
    mem = ReasoningBank.open(embedder=H, llm=llm, mode="llm", domain="alfworld")
    changes = mem.learn(make_episode(episode_id="s"))
    assert [c.kind for c in changes] == ["written", "written"]
    assert [p for p, _, _ in llm.calls] == ["extract"]
    assert llm.usage.by_purpose["extract"].total_tokens > 0
    assert set(llm.usage.by_purpose) == {"extract"}
    prompt = llm.calls[0][1][1]["content"]
    assert "SUCCESSFULLY" in prompt and "at most 3 lessons" in prompt
    stored = [i.payload for i in mem.store.items()]
    assert stored == LESSONS["items"]
    mem.learn(make_episode(success=False, episode_id="f"))
    assert "FAILED" in llm.calls[1][1][1]["content"]
    assert "SUCCESSFULLY" not in llm.calls[1][1][1]["content"]


def test_llm_may_answer_no_lesson():
    mem = ReasoningBank.open(embedder=H, llm=ScriptedLLM([{"items": []}]), mode="llm")
    (c,) = mem.learn(make_episode(episode_id="s"))
    assert c.kind == "skipped" and mem.stats()["units"] == 0


@pytest.mark.parametrize("bad", [
    {"items": [dict(LESSONS["items"][0], tag="hint")]},
    {"items": [dict(LESSONS["items"][0], content="x" * (CONTENT_MAX + 1))]},
    {"items": [dict(LESSONS["items"][0], title="   ")]},
    {"items": [dict(LESSONS["items"][0], title="bell\x07")]},
    {"items": [LESSONS["items"][0]] * 4},
    {"items": LESSONS["items"], "extra": 1},
    '{"items": [], "items": []}',
    '{"items": [NaN]}',
])
def test_invalid_lessons_are_rejected_after_one_repair(bad):
    mem = ReasoningBank.open(embedder=H, llm=ScriptedLLM([bad, bad]), mode="llm")
    (c,) = mem.learn(make_episode(episode_id="s"))
    assert c.kind == "rejected" and mem.stats()["items"] == 0
    assert mem.stats()["rejections"] == 1


def test_fenced_answer_is_accepted_and_max_items_is_enforced():
    import json

    fenced = "```json\n" + json.dumps(LESSONS) + "\n```"
    mem = ReasoningBank.open(embedder=H, llm=ScriptedLLM([fenced, fenced]), mode="llm",
                             max_items=1)
    (c,) = mem.learn(make_episode(episode_id="s"))  # 2 items > max_items=1 → repair
    assert c.kind == "rejected"
    mem = ReasoningBank.open(embedder=H, llm=ScriptedLLM([fenced]), mode="llm")
    assert len(mem.learn(make_episode(episode_id="s")).written) == 2


def test_schema_and_lesson_rendering():
    s = lessons_schema(2)
    assert s["properties"]["items"]["maxItems"] == 2
    item = s["properties"]["items"]["items"]
    assert all(item["properties"][k]["maxLength"] > 0 for k in ("title", "description",
                                                                 "content"))
    le = Lesson("  Open   first ", "When closed.", "Open it.", "warning")
    assert le.render() == "[Warning] Open first\nWhen closed.\nOpen it."
    assert le.key_text == "Open first\nWhen closed."
