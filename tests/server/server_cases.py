"""Request bodies shared by the service tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from deltamem.testing import make_episode

KEY_A, KEY_B = "dmk_test_key_for_tenant_a", "dmk_test_key_for_tenant_b"
GOALS = ["put a clean apple in fridge", "heat some egg and put it in garbagecan",
         "examine the book with the desklamp"]  # fmt: skip


def episode_body(goal: str = GOALS[0], eid: str = "e1", success: bool = True) -> dict[str, Any]:
    ep = make_episode(goal, success=success, episode_id=eid)
    d = ep.to_dict()
    d.pop("usage")
    d["task"].pop("meta")
    return d


def learn(svc, headers, bank: str, goal: str = GOALS[0], eid: str = "e1", success: bool = True):
    return svc.http.post(f"/v1/banks/{bank}/learn", headers=headers,
                         json={"episode": episode_body(goal, eid, success)})


def task_body(goal: str = GOALS[0]) -> dict[str, Any]:
    return episode_body(goal)["task"]


# every endpoint: (method, path after /v1/banks/{bank}, json body or None)
ENDPOINTS = [
    ("post", "/recall", {"task": task_body()}),
    ("post", "/learn", {"episode": episode_body(eid="probe")}),
    ("get", "/stats", None),
    ("get", "/tree", None),
    ("post", "/explain", {"query": GOALS[0]}),
    ("get", "/export", None),
    ("post", "/import", {"records": [{"type": "meta", "schema_version": 1}]}),
    ("delete", "", None),
]


@dataclass
class Service:
    app: object
    http: object  # starlette TestClient
    storage: str
    tenant_a: str
    tenant_b: str
    embedder: object

    def a(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEY_A}"}

    def b(self) -> dict[str, str]:
        return {"X-API-Key": KEY_B}


def make_service(storage: str, tenants: tuple[str, str], **kw) -> Service:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from deltamem.embed import HashingEmbedder
    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing

    emb = kw.pop("embedder", None) or HashingEmbedder(dim=64)
    app = create_app(
        storage,
        embedder=emb,
        keys=KeyRing.from_keys({KEY_A: tenants[0], KEY_B: tenants[1]}),
        config={"domain": "alfworld"},
        **kw,
    )
    return Service(app, TestClient(app), storage, tenants[0], tenants[1], emb)
