"""``deltamem stats`` / ``export`` / ``tree`` on the bank of a system other than DeltaMem: every
registered system's bank opens (issue 28: a lessons bank was 'unknown memory system')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deltamem.cli import app
from deltamem.embed import HashingEmbedder
from deltamem.errors import DeltaMemError
from deltamem.memories import make_memory
from deltamem.testing import make_episode

runner = CliRunner()


@pytest.fixture(params=["lessons", "lessons-raw", "lessons-kmeans", "concept-tree"])
def bank(request, tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "bank.db"
    mem = make_memory(request.param, bank=str(path), embedder=HashingEmbedder(dim=64),
                      domain="alfworld")
    mem.learn(make_episode(episode_id="e1"))
    mem.learn(make_episode("put a hot egg in garbagecan", success=False, episode_id="e2"))
    mem.close()
    return request.param, path


def test_stats_of_a_lesson_bank(bank: tuple[str, Path]) -> None:
    system, path = bank
    res = runner.invoke(app, ["stats", str(path)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["system"] == system and out["episodes_learned"] == 2
    assert out["last_episode_id"] == "e2"


def test_export_and_import_of_a_lesson_bank(bank: tuple[str, Path], tmp_path: Path) -> None:
    system, path = bank
    out = tmp_path / "b.jsonl"
    res = runner.invoke(app, ["export", str(path), str(out)])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["type"] == "header" and records[-1]["type"] == "trailer"
    assert records[1]["type"] == "meta" and records[1]["system"] == system
    assert sum(r["type"] == "learned" for r in records) == 2
    copy = tmp_path / "copy.db"
    assert runner.invoke(app, ["import", str(out), str(copy)]).exit_code == 0
    res = runner.invoke(app, ["stats", str(copy)])
    assert res.exit_code == 0 and json.loads(res.output)["system"] == system


def test_tree_of_a_lesson_bank_says_trees_are_deltamems(bank: tuple[str, Path]) -> None:
    """A clear library error (the CLI's ``main`` prints it as one line, exit code 1)."""
    system, path = bank
    res = runner.invoke(app, ["tree", "show", str(path)])
    assert isinstance(res.exception, DeltaMemError)
    assert f"is a '{system}' bank; trees exist only in DeltaMem banks" in str(res.exception)
