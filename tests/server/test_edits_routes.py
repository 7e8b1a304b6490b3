"""The inspector's HTTP routes: edit, hide, relabel, delete, undo, list; who may call them
(a write key; not a read-only key, another tenant, or the read-only ``deltamem view``)."""

from __future__ import annotations

import uuid

import pytest

from .conftest import PG_URL, drop_tenant_banks
from .server_cases import GOALS, KEY_A, KEY_B, learn, task_body
from .viewer_cases import make_bank

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient

from deltamem.embed import HashingEmbedder
from deltamem.server.app import create_app
from deltamem.server.viewer import make_view_app
from deltamem.service.keys import KeyRing

KEY_R = "dmk_test_read_only_key_for_tenant_a"
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"X-API-Key": KEY_B}
R = {"Authorization": f"Bearer {KEY_R}"}


@pytest.fixture
def http(backend, tmp_path):
    """Tenant ``alice`` (write key A, read-only key R) with bank ``b1``, ``bob`` (key B); on
    SQLite or, when configured, PostgreSQL (unique tenant names, dropped afterwards)."""
    tag = uuid.uuid4().hex[:8]
    alice, bob = f"alice-{tag}", f"bob-{tag}"
    storage = str(tmp_path / "banks") if backend == "sqlite" else PG_URL
    app = create_app(storage, embedder=HashingEmbedder(dim=64),
                     keys=KeyRing.from_keys({KEY_A: alice, KEY_B: bob, KEY_R: alice},
                                            read_only=[KEY_R]),
                     config={"domain": "alfworld"})
    try:
        with TestClient(app) as client:
            client.tenant = alice
            for i, (goal, ok) in enumerate([(GOALS[0], True), (GOALS[0], False),
                                            (GOALS[1], True), (GOALS[0], True)]):
                assert learn(client_svc(client), A, "b1", goal, f"e{i}", ok).status_code == 200
            yield client
    finally:
        if backend == "postgres":
            drop_tenant_banks(PG_URL, alice)
            drop_tenant_banks(PG_URL, bob)


class client_svc:  # what server_cases.learn expects: an object with .http
    def __init__(self, http) -> None:
        self.http = http


def _nodes(http, headers=A) -> list[dict]:
    r = http.get("/v1/banks/b1/tree", headers=headers)
    assert r.status_code == 200
    return r.json()["nodes"]


def _recall(http, goal=GOALS[0]) -> dict:
    r = http.post("/v1/banks/b1/recall", headers=A, json={"task": task_body(goal)})
    assert r.status_code == 200
    return r.json()


def test_edit_is_audited_recalled_and_undone(http):
    nodes = _nodes(http)
    leaf = next(n for n in nodes if n["tree"] == "task" and n["kind"] == "ROOT")
    r = http.post(f"/v1/banks/b1/nodes/{leaf['id']}/edit", headers=A,
                  json={"procedure": "1. look around\n2. open fridge 1", "reason": "clearer"})
    assert r.status_code == 200, r.text
    edit = r.json()
    fp = KeyRing.fingerprint(KEY_A)
    assert edit["op"] == "edit" and edit["who"] == f"tenant {http.tenant} (key {fp})"
    assert edit["before"][leaf["id"]]["payload"]["execution_procedure"] == \
        leaf["payload"]["procedure"]
    assert edit["after"][leaf["id"]]["payload"]["execution_procedure"].startswith("1. look")
    assert "1. look around" in _recall(http)["text"]
    listed = http.get("/v1/banks/b1/edits", headers=A).json()["edits"]
    assert [e["id"] for e in listed] == [edit["id"]] and listed[0]["reason"] == "clearer"
    u = http.post(f"/v1/banks/b1/edits/{edit['id']}/undo", headers=A, json={})
    assert u.status_code == 200 and u.json()["undoes"] == edit["id"]
    assert _nodes(http) == nodes
    assert "1. look around" not in _recall(http)["text"]
    again = http.post(f"/v1/banks/b1/edits/{edit['id']}/undo", headers=A, json={})
    assert again.status_code == 409  # already undone: the node no longer holds that edit


def test_hide_relabel_delete_and_their_errors(http):
    nodes = _nodes(http)
    parent = next(n for n in nodes if any(c["parent"] == n["id"] for c in nodes))
    r = http.post(f"/v1/banks/b1/nodes/{parent['id']}/hide", headers=A, json={"hidden": True})
    assert r.status_code == 200
    shown = {n["id"]: n["hidden"] for n in _nodes(http)}
    assert shown[parent["id"]] and len(shown) == len(nodes)  # still listed, flagged
    assert parent["id"] not in _recall(http)["details"]["task"]["chain"]
    r = http.post(f"/v1/banks/b1/nodes/{parent['id']}/hide", headers=A, json={"hidden": False})
    assert r.status_code == 200 and not any(n["hidden"] for n in _nodes(http))
    r = http.post(f"/v1/banks/b1/nodes/{parent['id']}/relabel", headers=A,
                  json={"label": "FAILURE"})
    assert r.status_code == 200 and r.json()["after"][parent["id"]]["label"] == "FAILURE"
    bad = http.post(f"/v1/banks/b1/nodes/{parent['id']}/relabel", headers=A,
                    json={"label": "MAYBE"})
    assert bad.status_code == 422
    r = http.delete(f"/v1/banks/b1/nodes/{parent['id']}", headers=A)
    assert r.status_code == 409 and "descendant" in r.json()["detail"]
    r = http.delete(f"/v1/banks/b1/nodes/{parent['id']}?subtree=true&reason=wrong", headers=A)
    assert r.status_code == 200 and len(r.json()["before"]) > 1
    assert parent["id"] not in {n["id"] for n in _nodes(http)}
    assert http.post(f"/v1/banks/b1/edits/{r.json()['id']}/undo", headers=A,
                     json={}).status_code == 200
    assert {n["id"] for n in _nodes(http)} == {n["id"] for n in nodes}
    assert http.post("/v1/banks/b1/nodes/nosuch/hide", headers=A,
                     json={}).status_code == 404
    assert http.post("/v1/banks/b1/edits/ed-0123456789abcdef/undo", headers=A,
                     json={}).status_code == 404
    assert http.post("/v1/banks/b1/edits/not-an-edit/undo", headers=A,
                     json={}).status_code == 422
    assert http.post(f"/v1/banks/b1/nodes/{parent['id']}/edit", headers=A,
                     json={"trigger": ""}).status_code == 422
    assert http.post(f"/v1/banks/b1/nodes/{parent['id']}/edit", headers=A,
                     json={"colour": "red"}).status_code == 422


def test_read_only_keys_other_tenants_and_no_key_cannot_edit(http):
    node = _nodes(http)[0]
    before = http.get("/v1/banks/b1/export", headers=A).text
    assert _nodes(http, R) == _nodes(http)  # a read-only key reads
    assert http.get("/v1/banks/b1/tree", headers=R).json()["writable"] is False
    assert http.get("/v1/banks/b1/tree", headers=A).json()["writable"] is True
    writes = [
        ("post", f"/v1/banks/b1/nodes/{node['id']}/edit", {"procedure": "x"}),
        ("post", f"/v1/banks/b1/nodes/{node['id']}/hide", {}),
        ("post", f"/v1/banks/b1/nodes/{node['id']}/relabel", {"label": "FAILURE"}),
        ("delete", f"/v1/banks/b1/nodes/{node['id']}?subtree=true", None),
        ("post", "/v1/banks/b1/edits/ed-0123456789abcdef/undo", {}),
        ("post", "/v1/banks/b1/learn", {"episode": {}}),
        ("post", "/v1/banks/b1/import", {"records": []}),
        ("delete", "/v1/banks/b1", None),
    ]
    for method, path, body in writes:
        kw = {"json": body} if body is not None else {}
        r = getattr(http, method)(path, headers=R, **kw)
        assert r.status_code == 403 and "read-only" in r.json()["detail"], (path, r.text)
        assert getattr(http, method)(path, **kw).status_code == 401, path
        if "/nodes/" in path:  # tenant B has no bank b1
            assert getattr(http, method)(path, headers=B, **kw).status_code == 404, path
    assert http.get("/v1/banks/b1/edits", headers=B).status_code == 404
    assert http.get("/v1/banks/b1/export", headers=A).text == before  # nothing changed


def test_the_read_only_viewer_cannot_edit(tmp_path):
    make_bank(tmp_path / "bank.db")
    with TestClient(make_view_app(str(tmp_path / "bank.db"))) as http:
        node = http.get("/v1/banks/local/tree").json()["nodes"][0]
        r = http.post(f"/v1/banks/local/nodes/{node['id']}/hide", json={})
        assert r.status_code == 403 and "read-only" in r.json()["detail"]
        assert http.get("/v1/banks/local/edits").json()["edits"] == []


def test_view_edit_needs_its_one_time_key(tmp_path):
    make_bank(tmp_path / "bank.db")
    key = "dmk_one_time_key_of_this_viewer"
    with TestClient(make_view_app(str(tmp_path / "bank.db"), edit_key=key)) as http:
        assert http.get("/v1/banks/local/tree").status_code == 401
        auth = {"Authorization": f"Bearer {key}"}
        tree = http.get("/v1/banks/local/tree", headers=auth).json()
        assert tree["writable"] is True
        node = tree["nodes"][0]
        r = http.post(f"/v1/banks/local/nodes/{node['id']}/hide", headers=auth, json={})
        assert r.status_code == 200 and r.json()["who"].startswith("tenant local (key ")
    with TestClient(make_view_app(str(tmp_path / "bank.db"))) as http:
        tree = http.get("/v1/banks/local/tree").json()
        assert tree["writable"] is False
        assert [n["hidden"] for n in tree["nodes"] if n["id"] == node["id"]] == [True]
