"""A service per test on SQLite (a temp folder) and, when configured, PostgreSQL.

Two tenants, ``A`` and ``B``, with keys ``KEY_A`` / ``KEY_B``. On PostgreSQL the tenant
names are unique per test and their banks are dropped afterwards.
"""

from __future__ import annotations

import os
import uuid

import pytest

from .server_cases import Service, make_service

PG_URL = os.environ.get("DELTAMEM_TEST_PG_URL", "")


def drop_tenant_banks(url: str, tenant: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE obj_description(oid, 'pg_namespace') LIKE %s",
            (f'deltamem bank "{tenant}/%',),
        ).fetchall()
        for (schema,) in rows:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request) -> str:
    if request.param == "postgres":
        if not PG_URL:
            pytest.skip("DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
        pytest.importorskip("psycopg")
    return request.param


@pytest.fixture
def service_factory(backend, tmp_path):
    made: list[Service] = []

    def make(**kw) -> Service:
        tag = uuid.uuid4().hex[:8]
        storage = str(tmp_path / f"banks-{tag}") if backend == "sqlite" else PG_URL
        svc = make_service(storage, (f"alice-{tag}", f"bob-{tag}"), **kw)
        svc.http.__enter__()
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.http.__exit__(None, None, None)
        if backend == "postgres":
            drop_tenant_banks(PG_URL, svc.tenant_a)
            drop_tenant_banks(PG_URL, svc.tenant_b)


@pytest.fixture
def service(service_factory) -> Service:
    return service_factory()
