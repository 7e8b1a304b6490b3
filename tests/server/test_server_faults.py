"""The service under hostile input and failing storage (issue 17).

Strict body types, imports refused whole with 422, banks opened with their stored settings,
damaged or full storage as 503 (never 500, never one bad file hiding a tenant's other
banks), and no file-system path or database URL in any error detail.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .server_cases import GOALS, episode_body, learn, task_body

pytest.importorskip("fastapi")

from deltamem.embed import HashingEmbedder
from deltamem.memories.deltamem import DeltaMem
from deltamem.server.app import redact
from deltamem.testing import make_episode


def export_of(svc, bank: str, headers) -> list[dict[str, Any]]:
    text = svc.http.get(f"/v1/banks/{bank}/export", headers=headers).text
    return [json.loads(x) for x in text.splitlines()]


def with_residual(svc) -> list[dict[str, Any]]:
    assert learn(svc, svc.a(), "src", GOALS[0], "e0").status_code == 200
    assert learn(svc, svc.a(), "src", GOALS[0], "e1", success=False).status_code == 200
    recs = export_of(svc, "src", svc.a())
    assert any(r.get("kind") == "RESIDUAL" for r in recs)
    return recs


@pytest.mark.parametrize(("field", "value"), [
    ("success", "yes"), ("success", 1), ("reward", "1.0"), ("max_steps", "3"),
])
def test_episode_fields_are_not_coerced(service, field: str, value: Any) -> None:
    body = episode_body()
    body[field] = value
    r = service.http.post("/v1/banks/b/learn", headers=service.a(), json={"episode": body})
    assert r.status_code == 422 and field in json.dumps(r.json()["detail"])
    assert service.http.get("/v1/banks/b/stats", headers=service.a()).status_code == 404


def test_step_and_task_fields_are_not_coerced(service) -> None:
    body = episode_body()
    body["steps"][0]["done"] = "false"
    r = service.http.post("/v1/banks/b/learn", headers=service.a(), json={"episode": body})
    assert r.status_code == 422
    task = task_body()
    task["max_steps"] = "10"
    r = service.http.post("/v1/banks/b/recall", headers=service.a(), json={"task": task})
    assert r.status_code == 422


@pytest.mark.parametrize("mutation", ["own parent", "dict id", "list trigger", "bad dim",
                                      "seq 0"])
def test_an_import_breaking_an_invariant_is_422_and_creates_nothing(service, mutation: str
                                                                    ) -> None:
    recs = with_residual(service)
    child = next(r for r in recs if r.get("kind") == "RESIDUAL")
    root = next(r for r in recs if r.get("type") == "node")
    if mutation == "own parent":
        child["parent_id"] = child["id"]
    elif mutation == "dict id":
        root["id"] = {"a": 1}
    elif mutation == "list trigger":
        root["trigger"] = ["x"]
    elif mutation == "bad dim":
        root["embedding"] = "AAAAAAAAAAA="  # 2 floats
    else:
        child["seq"] = 0
    r = service.http.post("/v1/banks/dst/import", headers=service.a(), json={"records": recs})
    assert r.status_code == 422 and "record " in r.json()["detail"]
    assert service.http.get("/v1/banks/dst/stats", headers=service.a()).status_code == 404
    assert "dst" not in [b["name"] for b in
                         service.http.get("/v1/banks", headers=service.a()).json()["banks"]]


def test_an_imported_bank_keeps_its_own_settings(service) -> None:
    mem = DeltaMem.open(":memory:", embedder=service.embedder, domain="generic",
                        tau_task=0.3, tau_env=0.2, k_cons=7)
    mem.learn(make_episode(GOALS[0], episode_id="e0"))
    recs = list(mem.store.iter_export())
    mem.close()
    r = service.http.post("/v1/banks/c/import", headers=service.a(), json={"records": recs})
    assert r.status_code == 200
    cfg = service.http.get("/v1/banks/c/stats", headers=service.a()).json()["meta"]["config"]
    assert (cfg["tau_task"], cfg["tau_env"], cfg["k_cons"]) == (0.3, 0.2, 7)
    details = service.http.post("/v1/banks/c/recall", headers=service.a(),
                                json={"task": task_body()}).json()["details"]
    assert (details["task"]["tau"], details["env"]["tau"]) == (0.3, 0.2)
    # a learn after a service restart still uses the bank's settings, not --domain alfworld
    assert learn(service, service.a(), "c", GOALS[0], "e9").status_code == 200
    cfg = service.http.get("/v1/banks/c/stats", headers=service.a()).json()["meta"]["config"]
    assert cfg["tau_task"] == 0.3


def test_a_bank_made_by_another_program_is_served_with_its_settings(service_factory,
                                                                   backend) -> None:
    if backend != "sqlite":
        pytest.skip("places a bank file in the storage folder")
    svc = service_factory()
    path = Path(svc.storage) / svc.tenant_a / "mine.db"
    path.parent.mkdir(parents=True)
    mem = DeltaMem.open(path, embedder=svc.embedder, domain="webshop")
    mem.learn(make_episode(GOALS[1], episode_id="w0"))
    mem.close()
    details = svc.http.post("/v1/banks/mine/recall", headers=svc.a(),
                            json={"task": task_body()}).json()["details"]
    assert details["task"]["tau"] == 0.85  # WebShop preset, not the service's alfworld .75


# -- failing storage (SQLite files) ------------------------------------------------------------

@pytest.fixture
def sqlite_service(service_factory, backend):
    if backend != "sqlite":
        pytest.skip("damages SQLite files")
    return service_factory()


def _damaged(path: Path) -> None:
    mem = DeltaMem.open(path, embedder=HashingEmbedder(dim=64), domain="alfworld")
    for i in range(20):
        mem.learn(make_episode(f"goal {i} " + "w" * 50, episode_id=f"d{i}"))
    mem.close()
    data = bytearray(path.read_bytes())
    for off in range(4096, len(data), 4096):
        data[off + 8: off + 400] = bytes(range(256)) + bytes(136)
    path.write_bytes(bytes(data))


def test_a_damaged_bank_is_503_and_hides_none_of_the_tenants_other_banks(sqlite_service
                                                                         ) -> None:
    svc = sqlite_service
    assert learn(svc, svc.a(), "good").status_code == 200
    _damaged(Path(svc.storage) / svc.tenant_a / "bad.db")
    r = svc.http.get("/v1/banks", headers=svc.a())
    assert r.status_code == 200
    banks = {b["name"]: b["nodes"] for b in r.json()["banks"]}
    assert banks["bad"] is None and banks["good"] == {"task": 1, "env": 1}
    for method, path, body in [("get", "/stats", None), ("get", "/export", None),
                               ("post", "/learn", {"episode": episode_body()}),
                               ("post", "/recall", {"task": task_body()})]:
        kw = {"json": body} if body is not None else {}
        r = getattr(svc.http, method)(f"/v1/banks/bad{path}", headers=svc.a(), **kw)
        assert r.status_code == 503, (path, r.text)
        assert "damaged" in r.json()["detail"] and svc.storage not in r.text


def test_a_full_disk_is_503_with_nothing_half_written(sqlite_service, monkeypatch) -> None:
    svc = sqlite_service
    assert learn(svc, svc.a(), "b").status_code == 200
    svc.app.state.service.banks.close()  # reopen it with a page limit
    real = sqlite3.connect

    def capped(target: Any, *a: Any, **kw: Any) -> sqlite3.Connection:
        conn = real(target, *a, **kw)
        if str(target).endswith("b.db"):
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(sqlite3, "connect", capped)
    codes = []
    for i in range(4):
        # many one-letter words: an abstracted (household) trigger keeps them all
        body = episode_body(f"brand new goal {i} " + "y " * 1500, f"n{i}")
        r = svc.http.post("/v1/banks/b/learn", headers=svc.a(), json={"episode": body})
        codes.append(r.status_code)
        if r.status_code == 503:
            assert "disk is full" in r.json()["detail"] and svc.storage not in r.text
    assert 503 in codes and 500 not in codes
    stats = svc.http.get("/v1/banks/b/stats", headers=svc.a()).json()
    assert stats["episodes_learned"] == 1 + codes.count(200)


def test_no_error_detail_names_a_path(sqlite_service) -> None:
    from fastapi.testclient import TestClient

    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing

    from .server_cases import KEY_A

    svc = sqlite_service
    assert learn(svc, svc.a(), "b").status_code == 200
    other = create_app(svc.storage, embedder=HashingEmbedder(dim=32),
                       keys=KeyRing.from_keys({KEY_A: svc.tenant_a}))
    r = TestClient(other).get("/v1/banks/b/stats", headers=svc.a())
    assert r.status_code == 409
    assert svc.storage not in r.text and "/" not in r.json()["detail"].replace("n/a", "")
    assert "bank b was built with embedder" in r.json()["detail"]


def test_redact() -> None:
    root = "/srv/deltamem/banks"
    assert redact(f"bank {root}/alice/b1.db is damaged (x)", root) == "bank b1 is damaged (x)"
    assert redact(f"{root}/alice/b1.db is not a DeltaMem bank", root) == (
        "b1 is not a DeltaMem bank")
    assert redact("cannot open /etc/other/file.db: no", root) == "cannot open <path>: no"
    assert "secret" not in redact("postgresql://u:secret@h/db?bank=a/b failed", "x")
    assert redact("depth 2/3 and 1/2 done", root) == "depth 2/3 and 1/2 done"


def test_previous_guarantees_still_hold_after_a_refused_import(service) -> None:
    recs = with_residual(service)
    bad = copy.deepcopy(recs)
    bad[-2] = {"type": "learned", "episode_id": ["x"], "learned_at": 1.0}  # before the trailer
    assert service.http.post("/v1/banks/src/import", headers=service.b(),
                             json={"records": bad}).status_code == 422
    # tenant B's failed import never touched A's bank of the same name
    assert export_of(service, "src", service.a()) == recs
