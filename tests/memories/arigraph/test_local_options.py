"""Bounded JSON answers and the cheaper configurations for small local models."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("networkx")

from deltamem.agents.ariadne import DEFAULTS, AriadneAgent, decision_schema, plan_schema
from deltamem.bench import load_config, run
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories import make_memory
from deltamem.memories.arigraph.extract import (
    ENTITY_MAX,
    LLMOutdatedDetector,
    LLMTripletExtractor,
    RuleOutdatedDetector,
    RuleTripletExtractor,
    _triplet_schema,
)

from .arigraph_helpers import MapEnv, Responder, plan_json


class SchemaLLM(ScriptedLLM):
    """A scripted LLM that also keeps every (purpose, schema) it was asked with."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schemas: list[tuple[str, Any]] = []

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):  # type: ignore[no-untyped-def]
        self.schemas.append((purpose, schema))
        return super()._complete(messages, schema=schema, choices=choices, max_tokens=max_tokens,
                                 temperature=temperature, purpose=purpose)


def _max_json_chars(schema: dict[str, Any]) -> int:
    """Longest JSON text an answer of ``schema`` can be (strings at maxLength, arrays at
    maxItems), measured by building that answer."""
    def fill(s: dict[str, Any]) -> Any:
        if s["type"] == "object":
            return {k: fill(v) for k, v in s["properties"].items()}
        if s["type"] == "array":
            return [fill(s["items"])] * s["maxItems"]
        if s["type"] == "string":
            return max(s["enum"], key=len) if "enum" in s else "x" * s["maxLength"]
        return 10 ** 6
    return len(json.dumps(fill(schema)))


def test_schemas_are_tight_and_fit_the_token_budgets() -> None:
    plan = plan_schema(3)
    assert plan["properties"]["plan_steps"]["maxItems"] == 3
    assert plan_schema()["properties"]["plan_steps"]["maxItems"] == DEFAULTS["plan_steps"]
    # ~3 characters per token is pessimistic for English JSON; the worst case must fit.
    assert _max_json_chars(plan_schema()) / 3 < AriadneAgent.max_tokens
    assert _max_json_chars(decision_schema(["go east"] * 1)) / 3 < AriadneAgent.max_tokens
    extract = _triplet_schema(LLMTripletExtractor.max_triplets)
    assert _max_json_chars(extract) / 3 < LLMTripletExtractor.max_tokens
    assert ENTITY_MAX <= 40
    with pytest.raises(ConfigError):
        plan_schema(0)


def test_decision_schema_lists_options_as_enum_up_to_the_limit() -> None:
    s = decision_schema(["go east", "look"], max_listed=2)
    assert s["properties"]["action_to_take"]["enum"] == ["go east", "look"]
    s = decision_schema(["go east", "look", "take key"], max_listed=2)
    assert "enum" not in s["properties"]["action_to_take"]
    assert s["properties"]["action_to_take"]["maxLength"] == 200


def test_agent_settings_come_from_the_memory_unless_given() -> None:
    llm = ScriptedLLM(responder=Responder([]))
    m = make_memory("rag", embedder=HashingEmbedder(), llm=llm,
                    options={"plan_steps": 2, "explore_check": "llm", "history": 3})
    assert AriadneAgent(llm).settings() == DEFAULTS
    assert AriadneAgent(llm).settings(m) == {"history": 3, "explore_check": "llm",
                                             "plan_steps": 2}
    assert AriadneAgent(llm, plan_steps=4).settings(m)["plan_steps"] == 4
    with pytest.raises(ConfigError):
        AriadneAgent(llm, plan_steps=0).settings(m)
    with pytest.raises(ConfigError):
        AriadneAgent(llm, explore_check="sometimes").settings()  # type: ignore[arg-type]
    m.close()


def test_agent_plans_within_the_memorys_plan_steps() -> None:
    env = MapEnv()
    llm = SchemaLLM(responder=Responder(["go east", "go east", "take golden key"],
                                        plan=("a", "b", "c")))
    m = make_memory("fullhistory", embedder=HashingEmbedder(), llm=llm,
                    options={"plan_steps": 2})
    task = env.reset("map-0")
    ep = AriadneAgent(llm).play(env, task, m.recall(task), memory=m)
    plans = [s for p, s in llm.schemas if p == "plan"]
    assert ep.success and plans and all(
        s["properties"]["plan_steps"]["maxItems"] == 2 for s in plans)
    # The 3-step plans broke the bound: each was asked once more (repair), then dropped.
    assert len(plans) == 2 * 3
    m.close()


def test_arigraph_extraction_and_replacement_are_selectable() -> None:
    llm = ScriptedLLM(responder=Responder([]))
    emb = HashingEmbedder()
    m = make_memory("arigraph", embedder=emb, llm=llm, options={"mode": "llm"})
    assert isinstance(m.extractor, LLMTripletExtractor)
    assert isinstance(m.detector, LLMOutdatedDetector)
    assert m.extractor.max_triplets == 12
    m = make_memory("arigraph", embedder=emb, llm=llm,
                    options={"mode": "llm", "replacement": "rules", "max_triplets": 6})
    assert isinstance(m.extractor, LLMTripletExtractor) and m.extractor.max_triplets == 6
    assert isinstance(m.detector, RuleOutdatedDetector)
    m = make_memory("arigraph", embedder=emb, llm=llm, options={"extraction": "llm"})
    assert m.config.mode == "deterministic"
    assert isinstance(m.extractor, LLMTripletExtractor)
    assert isinstance(m.detector, RuleOutdatedDetector)
    m = make_memory("arigraph", embedder=emb, llm=None)
    assert isinstance(m.extractor, RuleTripletExtractor)
    with pytest.raises(ConfigError):
        make_memory("arigraph", embedder=emb, llm=None, options={"replacement": "llm"})
    with pytest.raises(ConfigError):
        make_memory("arigraph", embedder=emb, llm=llm, options={"extraction": "regex"})


def test_rule_replacement_saves_one_llm_call_per_observation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    extract = {"triplets": [{"subject": "kitchen", "relation": "contains", "object": "knife"}]}
    calls = {}
    for replacement in ("llm", "rules"):
        cfg = load_config(run_dir=tmp_path / replacement, env="map", split="seen",
                          memory="arigraph", llm="scripted", episodes=1, max_steps=3,
                          extractor="llm", memory_options={"replacement": replacement})
        llm = ScriptedLLM(responder=Responder(["go east", "go east", "take golden key"],
                                              extract=extract))
        run(cfg, env=MapEnv(), llm=llm, embedder=HashingEmbedder(), progress=False)
        calls[replacement] = llm.usage.by_purpose["extract"].calls
    # 4 observations: the LLM detector is asked each time the graph already has neighbours.
    assert calls["rules"] == 4 and calls["llm"] > calls["rules"]


def test_scripted_plans_fit_the_default_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(plan_json("find the golden key", "take it")), plan_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(plan_json(*"abcdef")), plan_schema())


def test_summary_answer_is_bounded_by_max_chars() -> None:
    from deltamem.types import Step

    env = MapEnv()
    llm = SchemaLLM(responder=Responder([]))
    m = make_memory("summary", embedder=HashingEmbedder(), llm=llm,
                    options={"mode": "llm", "max_chars": 300})
    task = env.reset("map-0")
    m.recall(task)
    m.observe(Step("", task.observation))
    (schema,) = [s for p, s in llm.schemas if p == "summarize"]
    assert schema["properties"]["summary"]["maxLength"] == 300
    assert _max_json_chars(schema) / 3 < 300 // 2 + 50
    m.close()
