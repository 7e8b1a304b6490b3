"""The CLI prints correct counts for a bank built here, and fails cleanly on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from deltamem import DeltaMem
from deltamem.cli import app
from deltamem.embed import HashingEmbedder
from deltamem.testing import make_episode

runner = CliRunner()
H = HashingEmbedder(dim=64)


@pytest.fixture
def bank(tmp_path):
    path = tmp_path / "bank.db"
    # raw texts as triggers, so the counts below do not depend on the domain's default modes
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", k_cons=2, task_trigger="goal",
                        env_trigger="scene")
    mem.learn(make_episode(episode_id="e1"))
    mem.learn(make_episode("put a hot egg in garbagecan", success=False, episode_id="e2"))
    mem.learn(
        make_episode(
            "put a clean apple in fridge",
            episode_id="e3",
            actions=[
                ("go to cabinet 4", "On the cabinet 4, you see a apple 3."),
                ("take apple 3 from cabinet 4", "You pick up the apple 3."),
            ],
        )
    )
    mem.close()
    return path


def test_stats_json_counts(bank):
    res = runner.invoke(app, ["stats", str(bank), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["nodes"] == {"task": 3, "env": 2}
    assert data["kind"]["task"] == {"ROOT": 2, "RESIDUAL": 1}
    assert data["label"]["task"] == {"SUCCESS": 2, "FAILURE": 1}
    assert data["episodes_learned"] == 3
    assert data["meta"]["embedder_name"] == H.name


def test_stats_table_and_tree_show(bank):
    res = runner.invoke(app, ["stats", str(bank)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "│ task │ 3     │ 2    │ 1 " in res.output
    assert "Table 5" in res.output
    res = runner.invoke(app, ["tree", "show", str(bank)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Task-Tree (skills) — 3 nodes" in res.output
    assert "Env-Tree (knowledge) — 2 nodes" in res.output
    assert res.output.count("RESIDUAL SUCCESS d=2") == 2  # one per tree
    assert "ROOT FAILURE d=1" in res.output


def test_export_import_via_cli(bank, tmp_path):
    out = tmp_path / "x.jsonl"
    assert runner.invoke(app, ["export", str(bank), str(out)]).exit_code == 0
    res = runner.invoke(app, ["import", str(out), str(tmp_path / "copy.db")])
    assert res.exit_code == 0 and "imported 5 nodes" in res.output
    res = runner.invoke(app, ["stats", str(tmp_path / "copy.db"), "--json"])
    assert json.loads(res.output)["nodes"] == {"task": 3, "env": 2}


def test_missing_bank_is_a_clean_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "deltamem.cli", "stats", str(tmp_path / "none.db")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "error: no memory bank" in proc.stderr and "Traceback" not in proc.stderr


def test_every_command_has_help():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    for name in names:
        assert name in res.output
        sub = runner.invoke(app, [name, "--help"])
        assert sub.exit_code == 0 and "Usage" in sub.output
