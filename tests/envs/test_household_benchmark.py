"""``benchmarks/household_world.py`` still runs (a smoke run; nothing is timed here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.envs

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "household_world.py"


def test_quick_run_prints_a_row_per_pass_and_wins_every_walkthrough(tmp_path: Path) -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    p = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--cache-dir", str(tmp_path),
                        "--passes", "2"], capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in p.stdout.splitlines() if line.startswith("| first") or
            line.startswith("| warm")]
    assert [r[0] for r in rows] == ["first", "warm"]
    for row in rows:
        resets, steps, wins = int(row[1]), int(row[4]), row[7]
        assert resets == 2 and steps > 2 and wins == "2/2"
        assert all(float(cell) >= 0 for cell in (row[2], row[3], row[5], row[6], row[8]))
    assert list(tmp_path.rglob("game.compiled.json.gz"))   # the first pass wrote them
