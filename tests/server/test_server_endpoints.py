"""Every endpoint of the service, on SQLite and PostgreSQL storage."""

from __future__ import annotations

import json

import pytest

from deltamem.core.payload import Payload
from deltamem.llm.scripted import ScriptedLLM
from deltamem.testing import make_episode

from .server_cases import GOALS, episode_body, learn, task_body


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
    assert records[0]["type"] == "header" and records[-1]["type"] == "trailer"
    assert records[1]["type"] == "meta" and sum(x["type"] == "node" for x in records) == units
    r = service.http.post("/v1/banks/copy/import", headers=service.a(), json={"records": records})
    assert r.status_code == 200 and r.json() == {"nodes": units, "notes": []} and units >= 4
    again = service.http.get("/v1/banks/copy/export", headers=service.a()).text
    assert again == service.http.get("/v1/banks/src/export", headers=service.a()).text
    r = service.http.post("/v1/banks/copy/import", headers=service.a(), json={"records": records})
    assert r.status_code == 409 and "already has nodes" in r.json()["detail"]


def test_import_of_another_embedders_bank_is_refused(service):
    learn(service, service.a(), "src")
    records = [json.loads(x) for x in
               service.http.get("/v1/banks/src/export", headers=service.a()).text.splitlines()]
    records[1]["embedder_name"] = "other-model"
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
    assert "get" in paths["/v1/banks"] and "delete" in paths["/v1/banks/{bank}"]
    assert "404" in paths["/v1/banks/{bank}"]["delete"]["responses"]
    schemas = spec["components"]["schemas"]
    assert {"LearnRequest", "LearnResponse", "RecallResponse", "StatsResponse",
            "BankListResponse", "BankInfo", "DeleteResponse"} <= set(schemas)
    assert {"HTTPBearer", "APIKeyHeader"} <= set(spec["components"]["securitySchemes"])


def test_list_banks_gives_names_and_node_counts(service):
    assert service.http.get("/v1/banks", headers=service.a()).json() == {"banks": []}
    learn(service, service.a(), "zeta")
    for i, g in enumerate(GOALS):
        learn(service, service.a(), "alpha", g, f"e{i}")
    banks = service.http.get("/v1/banks", headers=service.a()).json()["banks"]
    assert [b["name"] for b in banks] == ["alpha", "zeta"]
    for b in banks:
        stats = service.http.get(f"/v1/banks/{b['name']}/stats", headers=service.a()).json()
        assert b["nodes"] == stats["nodes"] and sum(b["nodes"].values()) > 0


def _storage_has(service, bank: str) -> bool:
    loc = service.app.state.service.space.location(service.tenant_a, bank)
    if "://" not in service.storage:
        from pathlib import Path

        return any(Path(loc + s).exists() for s in ("", "-wal", "-shm"))
    from deltamem.store.postgres import list_banks

    return f"{service.tenant_a}/{bank}" in list_banks(service.storage)


def test_delete_removes_the_bank_and_its_storage(service):
    for i, g in enumerate(GOALS):
        learn(service, service.a(), "gone", g, f"e{i}")
    learn(service, service.a(), "kept")
    assert _storage_has(service, "gone")
    r = service.http.delete("/v1/banks/gone", headers=service.a())
    assert r.status_code == 200 and r.json() == {"bank": "gone", "deleted": True}
    assert not _storage_has(service, "gone") and _storage_has(service, "kept")
    for path in ("/stats", "/tree", "/export"):
        assert service.http.get(f"/v1/banks/gone{path}", headers=service.a()).status_code == 404
    r = service.http.post("/v1/banks/gone/recall", headers=service.a(), json={"task": task_body()})
    assert r.status_code == 200 and r.json()["text"] == ""
    names = [b["name"] for b in service.http.get("/v1/banks", headers=service.a()).json()["banks"]]
    assert names == ["kept"]
    r = service.http.delete("/v1/banks/gone", headers=service.a())
    assert r.status_code == 404 and "gone" in r.json()["detail"]
    # learning again creates a new, empty bank (the old episodes are forgotten too)
    r = learn(service, service.a(), "gone", GOALS[0], "e0")
    assert [c["kind"] for c in r.json()["changes"]] == ["written", "written"]
    stats = service.http.get("/v1/banks/gone/stats", headers=service.a()).json()
    assert stats["episodes_learned"] == 1


def test_delete_waits_for_requests_using_the_bank(service):
    import threading

    from deltamem.service.banks import BankNotFound

    learn(service, service.a(), "busy")
    banks = service.app.state.service.banks
    loc = service.app.state.service.space.location(service.tenant_a, "busy")
    holding, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def user() -> None:  # a request in progress: learns while the delete is pending
        with banks.use(loc, create=False) as mem:
            holding.set()
            release.wait(60)
            outcome["changes"] = mem.learn(make_episode(GOALS[1], episode_id="late"))

    def deleter() -> None:
        outcome["deleted"] = banks.delete(loc)

    def late_reader() -> None:  # arrives during the delete: waits, then finds no bank
        try:
            with banks.use(loc, create=False):
                outcome["late"] = "opened"
        except BankNotFound:
            outcome["late"] = "not found"

    t_user = threading.Thread(target=user)
    t_user.start()
    assert holding.wait(60)
    t_del = threading.Thread(target=deleter)
    t_del.start()
    for _ in range(6000):  # until the delete has claimed the bank (no timing assertion)
        with banks._guard:
            if loc in banks._deleting:
                break
        threading.Event().wait(0.01)
    assert loc in banks._deleting and "deleted" not in outcome
    t_late = threading.Thread(target=late_reader)
    t_late.start()
    release.set()
    for t in (t_user, t_del, t_late):
        t.join(60)
    assert [c.kind for c in outcome["changes"]][:1] == ["written"]  # finished before the drop
    assert outcome["deleted"] is True and outcome["late"] == "not found"
    assert not _storage_has(service, "busy")


def test_viewer_lists_its_one_bank_and_refuses_deletes(tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from deltamem import DeltaMem
    from deltamem.embed import HashingEmbedder
    from deltamem.server.app import create_app

    emb = HashingEmbedder(dim=64)
    path = str(tmp_path / "v.db")
    mem = DeltaMem.open(path, embedder=emb, domain="alfworld")
    mem.learn(make_episode(GOALS[0], episode_id="e0"))
    mem.close()
    app = create_app(tmp_path, embedder=emb, keys=None, readonly=True, fixed_bank=path)
    with TestClient(app) as http:
        assert http.get("/v1/banks").json() == {
            "banks": [{"name": "local", "nodes": {"task": 1, "env": 1}}]
        }
        assert http.delete("/v1/banks/local").status_code == 403
    mem = DeltaMem.open(path, embedder=emb)
    assert mem.stats()["units"] == 2
    mem.close()
