"""OpenAPI-driven fuzzing (schemathesis): no generated request makes the service answer 5xx.

Bounded (``max_examples`` per operation) so the run stays near a minute. Requests carry
tenant A's key, so they reach the endpoints' logic rather than stopping at 401.
"""

from __future__ import annotations

import tempfile

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")

from hypothesis import HealthCheck, settings  # noqa: E402

from .server_cases import KEY_A, learn, make_service  # noqa: E402

_svc = make_service(tempfile.mkdtemp(prefix="deltamem-fuzz-"), ("fuzz-a", "fuzz-b"))
learn(_svc, _svc.a(), "b1")  # one populated bank, so reads of it get past 404
schema = schemathesis.openapi.from_asgi("/openapi.json", _svc.app)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=40, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_request_makes_the_service_fail(case):
    response = case.call(headers={"Authorization": f"Bearer {KEY_A}"})
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
