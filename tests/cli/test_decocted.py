"""The ``decocted`` CLI group: consolidate a bank, correlate Q with improvement."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from deltamem.cli.decocted import register
from deltamem.embed import HashingEmbedder
from deltamem.memories.decocted.lessons import LessonMemory
from deltamem.testing import make_episode

GOALS = ["put a clean apple in fridge", "put a clean mug in shelf", "heat some egg and put it "
         "in garbagecan", "cool some apple and put it in microwave"]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def noop() -> None:  # a second command keeps `decocted` a sub-command group
        """Nothing."""

    register(app)
    return app


def test_every_command_has_help():
    runner = CliRunner()
    for cmd in ("consolidate", "quality"):
        res = runner.invoke(_app(), ["decocted", cmd, "--help"])
        assert res.exit_code == 0 and "Usage" in res.output


def test_consolidate_reports_what_was_kept(tmp_path):
    run_dir = tmp_path / "run"  # a run directory stands for its bank.db
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    bank = run_dir / "bank.db"
    mem = LessonMemory.open(bank, embedder=HashingEmbedder(64))
    for i, g in enumerate(GOALS):
        mem.learn(make_episode(goal=g, task_id=f"t{i}", episode_id=f"e{i}"))
    mem.close()
    res = CliRunner().invoke(_app(), ["decocted", "consolidate", str(run_dir),
                                      str(tmp_path / "small.db"), "--size", "2",
                                      "--embedder", "hashing:64"])
    assert res.exit_code == 0, res.output
    assert "kept 2 of 4 entries" in res.output
    assert len(LessonMemory.open(tmp_path / "small.db", embedder=HashingEmbedder(64))
               .entries()) == 2


def test_quality_prints_the_correlation(tmp_path):
    for name, rows in (("run", [("a", 1.0, 0.9), ("b", 0.0, 0.2), ("c", 1.0, 0.5)]),
                       ("none", [("a", 0.0, None), ("b", 0.0, None), ("c", 1.0, None)])):
        d = tmp_path / name
        d.mkdir()
        with open(d / "episodes.jsonl", "w") as f:
            for i, (tid, reward, rel) in enumerate(rows):
                details = {} if rel is None else {
                    "quality": {"rel": rel, "div": -0.5, "q": rel - 0.3, "lambda": 0.6, "k": 2}}
                f.write(json.dumps({"index": i, "phase": "online", "task_id": tid,
                                    "reward": reward, "recall": {"details": details}}) + "\n")
    out = tmp_path / "q.md"
    res = CliRunner().invoke(_app(), ["decocted", "quality", str(tmp_path / "run"),
                                      str(tmp_path / "none"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "Pearson r" in res.output and "| 0.6 |" in out.read_text()
