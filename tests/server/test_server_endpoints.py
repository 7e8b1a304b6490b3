"""Every endpoint of the service, on SQLite and PostgreSQL storage."""

from __future__ import annotations

import json

import pytest
from server_cases import GOALS, episode_body, learn, task_body

from deltamem.core.payload import Payload
from deltamem.llm.scripted import ScriptedLLM


def test_learn_then_recall_stats_tree_explain(service):
    r = service.http.post("/v1/banks/b1/recall", headers=service.a(), json={"task": task_body()})
    assert r.status_code == 200 and r.json()["text"] == ""  # a missing bank recalls nothing
    r = learn(service, service.a(), "b1")
    assert r.status_code == 200, r.text
    assert [c["kind"] for c in r.json()["changes"]] == ["written", "written"]
    assert r.json()["usage"] == {"by_purpose": {}, "total_tokens": 0}
    r = service.http.post("/v1/banks/b1/recall", headers=service.a(), json={"task": task_body()})
    body = r.json()
    assert r.status_code == 200 and body["text"] and body["details"]["task"]["accepted"]
    r2 = service.http.post("/v1/banks/b1/learn", headers=service.a(),
                           json={"episode": episode_body(eid="e2"), "recall": body})
    assert "hit" in [c["kind"] for c in r2.json()["changes"]]
    stats = service.http.get("/v1/banks/b1/stats", headers=service.a()).json()
    assert stats["episodes_learned"] == 2 and stats["bank"] == "b1"
    assert stats["meta"]["embedder_name"] == service.embedder.name
    tree = service.http.get("/v1/banks/b1/tree", headers=service.a()).json()
    assert len(tree["nodes"]) == stats["units"] and tree["embedder"] == service.embedder.name
    task_only = service.http.get("/v1/banks/b1/tree?tree=task", headers=service.a()).json()
    assert {n["tree"] for n in task_only["nodes"]} == {"task"}
    ex = service.http.post("/v1/banks/b1/explain", headers=service.a(),
                           json={"query": GOALS[0]}).json()
    task_ex = ex["trees"]["task"]
    assert task_ex["match"]["accepted"]
    assert task_ex["chain"][-1]["id"] == task_ex["match"]["node_id"]
    assert task_ex["top"][0]["score"] == pytest.approx(task_ex["match"]["score"])


def test_export_then_import_into_a_new_bank(service):
    for i, g in enumerate(GOALS):
        assert learn(service, service.a(), "src", g, f"e{i}").status_code == 200
    r = service.http.get("/v1/banks/src/export", headers=service.a())
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    records = [json.loads(line) for line in r.text.splitlines()]
    units = service.http.get("/v1/banks/src/stats", headers=service.a()).json()["units"]
    assert records[0]["type"] == "meta" and sum(x["type"] == "node" for x in records) == units
    r = service.http.post("/v1/banks/copy/import", headers=service.a(), json={"records": records})
    assert r.status_code == 200 and r.json() == {"nodes": units} and units >= 4
    again = service.http.get("/v1/banks/copy/export", headers=service.a()).text
    assert again == service.http.get("/v1/banks/src/export", headers=service.a()).text
    r = service.http.post("/v1/banks/copy/import", headers=service.a(), json={"records": records})
    assert r.status_code == 409 and "already has nodes" in r.json()["detail"]


def test_import_of_another_embedders_bank_is_refused(service):
    learn(service, service.a(), "src")
    records = [json.loads(x) for x in
               service.http.get("/v1/banks/src/export", headers=service.a()).text.splitlines()]
    records[0]["embedder_name"] = "other-model"
    r = service.http.post("/v1/banks/dst/import", headers=service.a(), json={"records": records})
    assert r.status_code == 409 and "other-model" in r.json()["detail"]
    assert service.http.get("/v1/banks/dst/stats", headers=service.a()).status_code == 404


class CountingExtractor:
    """Writes a fixed payload after one LLM call, so the service has tokens to report."""

    name = "counting"

    def __init__(self, llm):
        self.llm = llm

    def extract(self, role, episode, chain, domain):
        text = self.llm.complete([{"role": "user", "content": episode.task.goal}],
                                 purpose="extract").text
        return Payload(text, "do it", "done")

    def consolidate(self, tree, chain, domain):
        return Payload("fused", "do it", "done")


def test_learn_reports_llm_token_usage(service_factory):
    llm = ScriptedLLM(responder=lambda messages, purpose, choices: "when asked")
    svc = service_factory(extractor=CountingExtractor(llm), llm=llm)
    r = learn(svc, svc.a(), "b1")
    usage = r.json()["usage"]
    assert usage["by_purpose"]["extract"]["calls"] == 2  # one per tree
    assert usage["total_tokens"] == llm.usage.total_tokens > 0
    r = learn(svc, svc.a(), "b1", GOALS[1], "e2")
    assert r.json()["usage"]["by_purpose"]["extract"]["calls"] == 2  # per request, not cumulative


def test_missing_banks_are_404_on_reads(service):
    for path in ("/stats", "/tree", "/export"):
        r = service.http.get(f"/v1/banks/nobank{path}", headers=service.a())
        assert r.status_code == 404 and "nobank" in r.json()["detail"]
    r = service.http.post("/v1/banks/nobank/explain", headers=service.a(), json={"query": "x"})
    assert r.status_code == 404


def test_openapi_lists_every_endpoint_with_models(service):
    spec = service.http.get("/openapi.json").json()
    paths = spec["paths"]
    for name in ("recall", "learn", "stats", "tree", "explain", "export", "import"):
        assert f"/v1/banks/{{bank}}/{name}" in paths
    schemas = spec["components"]["schemas"]
    assert {"LearnRequest", "LearnResponse", "RecallResponse", "StatsResponse"} <= set(schemas)
    assert {"HTTPBearer", "APIKeyHeader"} <= set(spec["components"]["securitySchemes"])
