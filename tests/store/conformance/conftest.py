"""The backend fixture: every store test runs on SQLite and, when a server is given, PostgreSQL.

PostgreSQL tests need ``DELTAMEM_TEST_PG_URL`` (``scripts/postgres-test-server.sh`` prints
one) and psycopg; without them that parametrization is skipped. Each bank gets a fresh key
and is dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from .store_cases import PG_URL, pg_url_or_skip


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request) -> str:
    if request.param == "postgres":
        pg_url_or_skip()
    return request.param


@pytest.fixture
def new_bank(backend, tmp_path_factory) -> Iterator[Callable[[], str]]:
    """Factory of fresh bank locations (a file path or a ``postgresql://…?bank=`` URL)."""
    made: list[str] = []

    def make() -> str:
        name = "conf-" + uuid.uuid4().hex[:12]
        if backend == "sqlite":
            loc = str(tmp_path_factory.mktemp("bank") / f"{name}.db")
        else:
            sep = "&" if "?" in PG_URL else "?"
            loc = f"{PG_URL}{sep}bank={name}"
        made.append(loc)
        return loc

    yield make
    if backend == "postgres":
        from deltamem.store.postgres import drop_bank

        for loc in made:
            drop_bank(loc)
