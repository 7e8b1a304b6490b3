"""What a new user meets first: run directories accepted as banks, trees that tell scenes
apart, run output naming its mode and bank, missing extras named, tidy help."""

from __future__ import annotations

import json
import re
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from deltamem import DeltaMem
from deltamem.cli import app, main, missing_extra_message
from deltamem.cli.banks import common_start
from deltamem.embed import HashingEmbedder
from deltamem.envs import registry
from deltamem.envs.base import Environment, Transition
from deltamem.errors import InvalidInputError
from deltamem.store.location import resolve_bank
from deltamem.testing import make_episode
from deltamem.types import Task

runner = CliRunner()
H = HashingEmbedder(dim=64)
PREFIX = "You are in the middle of a room. Looking quickly around you, you see "


@pytest.fixture
def run_dir(tmp_path):
    """A run directory as `deltamem run` leaves it, with a bank of two distinct rooms."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"memory": "deltamem"}))
    # raw scene triggers (env_trigger="scene"), whose shared opening hid the difference
    mem = DeltaMem.open(d / "bank.db", embedder=H, domain="alfworld", tau_env=0.99,
                        env_trigger="scene")
    mem.learn(make_episode(scene=PREFIX + "a bed 1, a desk 1 and a drawer 3.", episode_id="a"))
    mem.learn(make_episode("put a hot egg in garbagecan", success=False, episode_id="b",
                           scene=PREFIX + "a stoveburner 2, a fridge 1 and a sinkbasin 1."))
    mem.close()
    return d


def test_run_directory_is_accepted_wherever_a_bank_is(run_dir):
    assert resolve_bank(run_dir) == str(run_dir / "bank.db")
    res = runner.invoke(app, ["stats", str(run_dir), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["bank"] == str(run_dir / "bank.db")
    res = runner.invoke(app, ["tree", "show", str(run_dir)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Task-Tree (skills)" in res.output


def test_run_directory_without_bank_says_so(tmp_path):
    d = tmp_path / "none-run"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"memory": "none"}))
    with pytest.raises(InvalidInputError, match=r"run directory without a bank.*'none'"):
        resolve_bank(d)
    with pytest.raises(InvalidInputError, match="is a directory, not a bank"):
        resolve_bank(tmp_path)
    # plain paths and URLs pass through unchanged
    assert resolve_bank(tmp_path / "x.db") == str(tmp_path / "x.db")
    assert resolve_bank("postgresql://u@h/db") == "postgresql://u@h/db"


def test_tree_show_prints_the_part_that_tells_scenes_apart(run_dir):
    res = runner.invoke(app, ["tree", "show", str(run_dir), "--tree", "env", "--width", "60"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "every trigger starts “You are in the middle of a room." in res.output
    assert "“…bed 1, a desk 1 and a drawer 3.”" in res.output
    assert "“…stoveburner 2, a fridge 1 and a sinkbasin 1.”" in res.output


def test_common_start_cuts_at_a_word_boundary():
    assert common_start([PREFIX + "a bed 1", PREFIX + "a bathtub 1"]) == PREFIX + "a "
    assert common_start(["only one text that is long enough to count"]) == ""
    assert common_start(["short a", "short b"]) == ""
    assert common_start(["the same opening words here then cat", "the same opening words "
                         "here then cab"]) == "the same opening words here then "


class TinyEnv(Environment):
    """Two rooms; ``go east`` wins, anything else does nothing."""

    name = "tiny"
    domain = "generic"
    splits = ("seen",)

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        return ["t0", "t1"]

    def reset(self, task_id: str) -> Task:
        return Task(id=task_id, goal="leave the room", scene=f"room {task_id}",
                    domain="generic", split="seen", observation=f"You are in room {task_id}.")

    def admissible_actions(self) -> list[str]:
        return ["go east", "look"]

    def step(self, action: str) -> Transition:
        won = action == "go east"
        return Transition("You leave." if won else "Nothing.", 1.0 if won else 0.0, won, won)


@pytest.fixture
def tiny_env():
    registry.register("tiny-cli-test", f"{__name__}:TinyEnv")
    yield "tiny-cli-test"
    registry.unregister("tiny-cli-test")


def test_run_prints_mode_bank_and_per_episode_lines(tmp_path, tiny_env):
    out = tmp_path / "r"
    res = runner.invoke(app, ["run", "--env", tiny_env, "--llm", "scripted", "--memory",
                              "deltamem", "--embedder", "hashing:32", "--episodes", "2",
                              "--constrained", "--max-steps", "2", "--run-dir", str(out),
                              "--no-report"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "decoding constrained (picks among the admissible actions)" in res.output
    assert f"bank: {out / 'bank.db'}" in res.output
    assert re.search(r"r: online \(seen\) episode 1/2 t\d: (success|failure), reward",
                     res.output)
    assert re.search(r"r: online \(seen\) episode 2/2 t\d: .*success so far \d/2", res.output)
    assert re.search(r"online: 2 episodes, .* s playing and learning", res.output)


def test_missing_extra_is_one_line_naming_it(monkeypatch, capsys):
    msg = missing_extra_message(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"))
    assert msg is not None and "pip install 'deltamem[server]'" in msg
    assert missing_extra_message(ModuleNotFoundError("x", name="no_such_thing")) is None

    def no_uvicorn(*a, **kw):
        raise ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn")

    monkeypatch.setattr("deltamem.server.viewer.view", no_uvicorn)
    monkeypatch.setattr(sys, "argv", ["deltamem", "view", "some.db"])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deltamem[server]" in err and "Traceback" not in err


def _all_commands():
    group = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append(path)

    walk(group, [])
    return out


@pytest.mark.parametrize("path", _all_commands(), ids=" ".join)
def test_help_is_tidy(path):
    res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    usage = next(ln for ln in res.output.splitlines() if "Usage:" in ln)
    assert "{" not in usage


@pytest.mark.parametrize("path", _all_commands(), ids=" ".join)
def test_command_summary_is_one_line(path):
    """The command list shows a help's first paragraph: it must be a whole sentence."""
    import inspect

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    first = inspect.cleandoc(cmd.help or "").split("\n\n")[0]
    assert first and "\n" not in first, first


def test_run_help_shows_the_defaults():
    res = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "300"})
    text = " ".join(res.output.split())
    for default in ("(default: household)", "(default: seen)", "(default: local)",
                    "(default: minilm", "(default: --constrained with a local model"):
        assert default in text, default


@pytest.mark.parametrize("path", _all_commands(), ids=" ".join)
def test_readme_command_table_lists_every_command(path):
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    cells = [ln.split("|")[1] for ln in readme.splitlines() if ln.startswith("| `deltamem ")]
    assert any(all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", c) for w in path)
               for c in cells), f"README command table lacks `deltamem {' '.join(path)}`"


def test_run_against_a_closed_local_port_fails_at_once_naming_it(monkeypatch, capsys, tmp_path):
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setattr(sys, "argv", ["deltamem", "run", "--run-dir", str(tmp_path / "r"),
                                      "--llm", "openai:m", "--memory", "none",
                                      "--episodes", "1", "--no-report"])
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 1 and time.monotonic() - t0 < 30
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in err
    assert "openai:m: nothing is listening" in err and "retry" not in err
