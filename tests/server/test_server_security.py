"""Keys, tenant isolation and body limits, for every endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.errors import ConfigError

from .server_cases import ENDPOINTS, GOALS, episode_body, learn, task_body

pytest.importorskip("fastapi")
from deltamem.service.keys import KeyRing, add_key, hash_key


def call(svc, method, path, body, headers, bank="shared"):
    kw = {"headers": headers}
    if body is not None:
        kw["json"] = body
    return getattr(svc.http, method)(f"/v1/banks/{bank}{path}", **kw)


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": ""}])
def test_requests_without_a_valid_key_are_401(service, method, path, body, headers):
    r = call(service, method, path, body, headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "API key" in r.json()["detail"]


def tenant_b_bank(svc) -> str:
    """B's bank "shared" with two episodes; returns its export text."""
    for i, g in enumerate(GOALS[:2]):
        assert learn(svc, svc.b(), "shared", g, f"b{i}").status_code == 200
    return svc.http.get("/v1/banks/shared/export", headers=svc.b()).text


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_tenant_a_can_neither_read_nor_write_tenant_bs_bank(service, method, path, body):
    before = tenant_b_bank(service)
    r = call(service, method, path, body, service.a())
    if path == "/recall":
        assert r.status_code == 200 and r.json()["text"] == ""  # A's own (missing) bank
    elif path in ("/stats", "/tree", "/export", "/explain", ""):  # "": DELETE the bank
        assert r.status_code == 404 and "shared" in r.json()["detail"]
    elif path == "/learn":
        assert r.status_code == 200
        assert [c["kind"] for c in r.json()["changes"]] == ["written", "written"]  # cold start
        stats = service.http.get("/v1/banks/shared/stats", headers=service.a()).json()
        assert stats["episodes_learned"] == 1  # A's own bank of the same name
    else:  # import lands in A's own bank (here: refused, no embedder, nothing created)
        assert r.status_code in (200, 422)
    after = service.http.get("/v1/banks/shared/export", headers=service.b()).text
    assert after == before
    if service.storage and "://" not in service.storage:
        assert (Path(service.storage) / service.tenant_b / "shared.db").exists()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": ""}])
def test_listing_banks_without_a_valid_key_is_401(service, headers):
    r = service.http.get("/v1/banks", headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def bank_names(svc, headers) -> list[str]:
    r = svc.http.get("/v1/banks", headers=headers)
    assert r.status_code == 200, r.text
    return [b["name"] for b in r.json()["banks"]]


def test_tenants_list_only_their_own_banks(service):
    tenant_b_bank(service)
    learn(service, service.b(), "b-only", eid="b9")
    assert service.http.get("/v1/banks", headers=service.a()).json() == {"banks": []}
    learn(service, service.a(), "a-only")
    learn(service, service.a(), "shared", eid="a2")
    assert bank_names(service, service.a()) == ["a-only", "shared"]
    assert bank_names(service, service.b()) == ["b-only", "shared"]
    # A deleting its "shared" leaves B's "shared" untouched
    before = service.http.get("/v1/banks/shared/export", headers=service.b()).text
    assert service.http.delete("/v1/banks/shared", headers=service.a()).status_code == 200
    assert service.http.get("/v1/banks/shared/export", headers=service.b()).text == before
    assert service.http.get("/v1/banks/shared/stats", headers=service.a()).status_code == 404
    assert bank_names(service, service.b()) == ["b-only", "shared"]
    assert bank_names(service, service.a()) == ["a-only"]


def test_the_tenant_is_part_of_the_storage_key(service):
    learn(service, service.a(), "x")
    learn(service, service.b(), "x")
    loc_a = service.app.state.service.space.location(service.tenant_a, "x")
    loc_b = service.app.state.service.space.location(service.tenant_b, "x")
    assert loc_a != loc_b and service.tenant_a in loc_a and service.tenant_b in loc_b


def test_oversized_bodies_are_413_and_store_nothing(service_factory):
    svc = service_factory(max_body_bytes=4096)
    body = {"episode": episode_body()}
    body["episode"]["steps"][0]["observation"] = "x" * 5000
    r = svc.http.post("/v1/banks/big/learn", headers=svc.a(), json=body)
    assert r.status_code == 413 and "4096" in r.json()["detail"]
    data = json.dumps(body).encode()

    def chunks():  # no Content-Length: counted while streaming
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    r = svc.http.post("/v1/banks/big/learn", headers={**svc.a(), "content-type":
                      "application/json"}, content=chunks())
    assert r.status_code == 413
    assert svc.http.get("/v1/banks/big/stats", headers=svc.a()).status_code == 404


def bad_bodies():
    ep = episode_body()
    nan = json.dumps({"episode": ep}).replace('"reward": 1.0', '"reward": NaN', 1)
    yield "not json", b"{not json"
    yield "wrong type", {"episode": {**ep, "success": "maybe"}}
    yield "missing field", {"episode": {k: v for k, v in ep.items() if k != "steps"}}
    yield "empty trajectory", {"episode": {**ep, "steps": []}}
    yield "NaN reward", nan.encode()
    yield "NUL in text", {"episode": {**ep, "task": {**ep["task"], "goal": "a\x00b"}}}
    yield "blank goal", {"episode": {**ep, "task": {**ep["task"], "goal": "   "}}}
    yield "unknown domain", {"episode": {**ep, "task": {**ep["task"], "domain": "mars"}}}
    yield "extra field", {"episode": ep, "admin": True}
    yield "forged recall", {"episode": ep, "recall": {"details": {"task": {"score": "high"}}}}


@pytest.mark.parametrize(("why", "body"), list(bad_bodies()), ids=[w for w, _ in bad_bodies()])
def test_malformed_learn_bodies_are_4xx_and_store_nothing(service, why, body):
    kw = {"content": body, "headers": {**service.a(), "content-type": "application/json"}} if (
        isinstance(body, bytes)) else {"json": body, "headers": service.a()}
    r = service.http.post("/v1/banks/bad/learn", **kw)
    assert 400 <= r.status_code < 500 and r.status_code != 401, (why, r.text)
    assert r.json()["detail"]
    assert service.http.get("/v1/banks/bad/stats", headers=service.a()).status_code == 404


def test_bad_bank_names_and_recall_bodies_are_422(service):
    assert call(service, "get", "/stats", None, service.a(), bank="..").status_code in (404, 422)
    assert call(service, "get", "/stats", None, service.a(), bank="a b").status_code == 422
    r = call(service, "post", "/recall", {"task": {**task_body(), "goal": ""}}, service.a())
    assert r.status_code == 422


def test_malformed_import_stores_nothing(service):
    learn(service, service.a(), "src")
    recs = [json.loads(x) for x in
            service.http.get("/v1/banks/src/export", headers=service.a()).text.splitlines()]
    del recs[2]["trigger"]  # the first node (after the header and the meta record)
    r = call(service, "post", "/import", {"records": recs}, service.a(), bank="dst")
    assert r.status_code == 422 and "record 2: node misses trigger" in r.json()["detail"]
    assert call(service, "get", "/stats", None, service.a(), bank="dst").status_code == 404
    r = call(service, "post", "/import", {"records": [{"type": "node"}]}, service.a(), bank="d2")
    assert r.status_code == 422


def test_key_file_keeps_only_hashes(tmp_path):
    path = tmp_path / "keys.json"
    key = add_key(path, "team-a", note="ci")
    text = path.read_text()
    assert key not in text and hash_key(key) in text
    ring = KeyRing.from_file(path)
    assert ring.tenant(key) == "team-a" and ring.tenant(key + "x") is None
    assert ring.tenant(None) is None
    with pytest.raises(ConfigError):
        KeyRing({"abc": "t"})
    with pytest.raises(ConfigError, match="no API key file"):
        KeyRing.from_file(tmp_path / "missing.json")


def test_a_writable_service_needs_keys(tmp_path):
    from deltamem.embed import HashingEmbedder
    from deltamem.server.app import create_app

    with pytest.raises(ConfigError, match="needs API keys"):
        create_app(tmp_path, embedder=HashingEmbedder(), keys=None)
