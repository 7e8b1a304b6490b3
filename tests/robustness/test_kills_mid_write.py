"""SIGKILL in the middle of an import, a prune, a learn with consolidation and the decocted
memories' consolidation (issue 51): a small bounded run of ``benchmarks/kill_loop.py`` on SQLite
(PostgreSQL too when ``DELTAMEM_TEST_PG_URL`` is set). After every kill the bank opens, passes
its invariants and is the bank before or after the operation; re-running the operation gives
the bank of an uninterrupted run. The script exits 1 otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"),
                                reason="needs fork and SIGKILL")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kill_loop.py"


def run(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "rows.json"
    p = subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(out)],
                       capture_output=True, text=True, timeout=600, check=False,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(out.read_text())


def test_kills_in_import_prune_and_learn_leave_whole_banks(tmp_path):
    rows = run(tmp_path, "--kills", "4", "--episodes", "24", "--ops", "import,prune,learn",
               "--stores", "sqlite")
    assert [r["op"] for r in rows] == ["import", "prune", "learn"]
    for r in rows:
        assert r["kills"] == 4 and r["failed"] == 0 and r["between"] == 0
        assert r["equal"] == 4 and r["before"] + r["mid"] + r["after"] == 4


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("DELTAMEM_TEST_PG_URL"),
                    reason="DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
def test_kills_on_postgres_and_in_the_service(tmp_path):
    rows = run(tmp_path, "--kills", "3", "--episodes", "24", "--stores", "sqlite,postgres",
               "--ops", "import,learn,service-learn")
    assert all(r["failed"] == 0 and r["equal"] == r["kills"] == 3 for r in rows)


@pytest.mark.slow
def test_kills_in_the_decocted_consolidation_leave_no_partial_bank(tmp_path):
    """Each consolidation is a fresh process (k-means hangs in a forked child): slow."""
    rows = run(tmp_path, "--kills", "2", "--episodes", "8", "--ops", "consolidate",
               "--stores", "sqlite")
    assert [r["op"] for r in rows] == ["consolidate"]
    assert rows[0]["failed"] == rows[0]["between"] == 0 and rows[0]["equal"] == 2
