"""OpenAPI-driven fuzzing (schemathesis): no generated request makes the service fail, changes
anything when it is refused, or reaches another tenant's banks (issues 26, 51).

Every generated request is sent three times:

1. with no key: refused (4xx), and tenant A's banks are what they were;
2. with tenant B's key: tenant A's banks are what they were and the answer holds nothing of
   A's (a canary goal and A's node ids, planted in every bank of A);
3. with tenant A's key: never 5xx; a refused one (4xx) leaves A's banks as they were.

"As they were" is a checksum of tenant A's storage: the names of its bank files and, for each,
SHA-256 over ``iterdump()`` of the SQLite database (every table, row by row), taken before
and after each call. A refused request must not create a bank file either.

Bounded (``max_examples`` per operation, default 15) so the suite's run stays near a minute.
A longer opt-in run: ``DELTAMEM_FUZZ_EXAMPLES=500`` (per operation); with
``DELTAMEM_FUZZ_REPORT=path.json`` the figures (cases per route, status classes, 5xx,
checksum comparisons, tenant checks) are written there at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

from hypothesis import HealthCheck, settings  # noqa: E402

from .server_cases import KEY_A, KEY_B, learn  # noqa: E402
from .server_cases import make_service as _make_service  # noqa: E402

EXAMPLES = int(os.environ.get("DELTAMEM_FUZZ_EXAMPLES", "15"))
REPORT = os.environ.get("DELTAMEM_FUZZ_REPORT")
CANARY = "canary zebra quartz 7731 put the violet teapot in drawer"

_svc = _make_service(tempfile.mkdtemp(prefix="deltamem-fuzz-"), ("fuzz-a", "fuzz-b"))
A_BANKS = ("b1", "kitchen")


def _seed() -> None:
    """Tenant A's banks (with the canary) and one bank of B's, so reads get past 404."""
    for bank in A_BANKS:
        if not (Path(_svc.storage) / _svc.tenant_a / f"{bank}.db").exists():
            assert learn(_svc, _svc.a(), bank, CANARY, f"canary-{bank}").status_code == 200
    if not (Path(_svc.storage) / _svc.tenant_b / "b1.db").exists():
        assert learn(_svc, _svc.b(), "b1").status_code == 200


_seed()
schema = schemathesis.openapi.from_asgi("/openapi.json", _svc.app)
FIGURES: dict[str, Counter[str]] = defaultdict(Counter)


class Checksum:
    """A tenant's storage: the names of its bank files and SHA-256 over each bank's dump."""

    def __init__(self, tenant: str) -> None:
        folder = Path(_svc.storage) / tenant
        self.banks: dict[str, str] = {}
        self.ids: set[str] = set()
        for f in sorted(folder.glob("*.db")) if folder.is_dir() else []:
            h = hashlib.sha256()
            con = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
            try:
                for line in con.iterdump():
                    h.update(line.encode("utf-8", "surrogatepass") + b"\n")
                self.ids.update(r[0] for r in con.execute("SELECT id FROM nodes"))
            finally:
                con.close()
            self.banks[f.name] = h.hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checksum) and self.banks == other.banks

    def __repr__(self) -> str:
        return repr({k: v[:12] for k, v in self.banks.items()})


def _leaks(text: str, ids: set[str]) -> list[str]:
    found = [CANARY] if CANARY in text else []
    return found + [i for i in ids if i in text]


def _send(case: Any, key: dict[str, str] | None) -> Any:
    headers = {k: v for k, v in (case.headers or {}).items()
               if k.lower() not in ("authorization", "x-api-key")}
    case.headers = headers
    return case.call(headers=key or {})


@pytest.fixture(autouse=True)
def _report():
    yield
    if REPORT:  # after every operation, so a long run's figures survive an interruption
        Path(REPORT).write_text(json.dumps({"examples_per_operation": EXAMPLES, "routes": {
            k: dict(sorted(v.items())) for k, v in sorted(FIGURES.items())}}, indent=1))


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_fails_changes_anything_when_refused_or_crosses_tenants(case):
    _seed()  # a generated DELETE may have removed a bank
    route = f"{case.method.upper()} {case.operation.path}"
    fig = FIGURES[route]
    fig["cases"] += 1
    before = Checksum(_svc.tenant_a)
    ids = before.ids

    # 1. no key: refused, nothing of A's changed or shown
    r = _send(case, None)
    public = case.operation.path in ("/healthz", "/", "/openapi.json") \
        or not case.operation.path.startswith("/v1")
    fig[f"no key {r.status_code // 100}xx"] += 1
    assert public or 400 <= r.status_code < 500, (route, "no key", r.status_code, r.text[:300])
    assert not _leaks(r.text, ids), (route, "no key", r.text[:300])
    assert Checksum(_svc.tenant_a) == before, (route, "no key changed A's banks")
    fig["tenant checks"] += 1

    # 2. tenant B's key: whatever it does to B's banks, A's are untouched and unseen
    r = _send(case, {"X-API-Key": KEY_B})
    fig[f"key B {r.status_code // 100}xx"] += 1
    assert r.status_code < 500, (route, "key B", r.status_code, r.text[:500])
    assert not _leaks(r.text, ids), (route, "key B", r.text[:300])
    assert Checksum(_svc.tenant_a) == before, (route, "key B changed A's banks")
    fig["tenant checks"] += 1

    # 3. tenant A's key: no 5xx; a refused request changes nothing
    r = _send(case, {"Authorization": f"Bearer {KEY_A}"})
    fig[f"key A {r.status_code // 100}xx"] += 1
    assert r.status_code < 500, (case.method, case.path, r.text[:500])
    if 400 <= r.status_code < 500:
        assert Checksum(_svc.tenant_a) == before, (
            route, r.status_code, r.text[:300], "a refused request changed A's banks")
        fig["refused: checksum equal"] += 1
