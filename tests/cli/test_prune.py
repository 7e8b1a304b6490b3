"""``deltamem prune``: a dry run lists, a real run removes and audits."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from deltamem import DeltaMem
from deltamem.cli import app
from deltamem.embed import HashingEmbedder
from deltamem.testing import make_episode

runner = CliRunner()


def _bank(path) -> str:
    mem = DeltaMem.open(path, embedder=HashingEmbedder(), domain="alfworld")
    mem.learn(make_episode("put a clean apple in fridge", episode_id="ok"))
    for i in range(3):
        mem.learn(make_episode("put a clean apple in fridge", success=False, episode_id=f"f{i}"))
    mem.close()
    return str(path)


def test_dry_run_lists_and_changes_nothing(tmp_path) -> None:
    bank = _bank(tmp_path / "b.db")
    out = runner.invoke(app, ["prune", bank, "--policy", "harmful:1", "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["dry_run"] and data["episodes_learned"] == 4
    (first, *_rest) = data["nodes"]
    assert first["policy"] == "harmful:1" and first["failure_hits"] == 3
    table = runner.invoke(app, ["prune", bank, "-p", "harmful:1", "--dry-run"])
    flat = " ".join(table.output.split())
    assert "would remove 4 nodes (task 4, env 0)" in flat
    mem = DeltaMem.open(bank, embedder=None, readonly=True)
    assert len(mem.nodes("task")) == len(data["nodes"]) and mem.store.audit() == []


def test_prune_removes_and_keeps_the_audit_trail(tmp_path) -> None:
    bank = _bank(tmp_path / "b.db")
    out = runner.invoke(app, ["prune", bank, "-p", "unused:100", "-p", "harmful"])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "removed 4 nodes" in flat and "audit trail" in flat
    mem = DeltaMem.open(bank, embedder=None, readonly=True)
    assert mem.nodes("task") == [] and {e["action"] for e in mem.store.audit()} == {"pruned"}
    bad = runner.invoke(app, ["prune", bank, "-p", "oldest"])
    assert bad.exit_code != 0 and "unknown prune policy" in str(bad.exception)
