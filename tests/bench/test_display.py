"""A run shows its progress: one line per episode off a terminal, steps and the last
action on the live bar, nothing when asked for none."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from deltamem.bench import RunConfig, read_episodes, run
from deltamem.bench import display as display_mod
from deltamem.llm import ScriptedLLM

from .bench_toys import CorridorEnv


def _llm() -> ScriptedLLM:
    return ScriptedLLM(responder=lambda m, p, c: "Thought: the exit is east.\nAction: go east")


def _config(tmp_path: Path, **kw) -> RunConfig:
    base = {"run_dir": tmp_path / "run", "env": "corridor", "split": "test",
            "llm": "scripted", "memory": "none", "episodes": 3}
    return RunConfig(**{**base, **kw})


def test_non_terminal_output_gets_one_line_per_episode(tmp_path, capsys):
    run(_config(tmp_path), env=CorridorEnv(), llm=_llm(), progress=None)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 3, lines
    assert lines[0].startswith("run: online (test) episode 1/3 ")  # run: the run dir's name
    assert lines[-1].startswith("run: online (test) episode 3/3 ")
    assert all(" steps, " in ln and "success so far" in ln for ln in lines)
    # the running rate counts what was played so far
    n_success = sum(": success," in ln for ln in lines)
    assert f"success so far {n_success}/3" in lines[-1]


def test_resumed_run_counts_from_where_it_was(tmp_path, capsys):
    cfg = _config(tmp_path, episodes=2)
    run(cfg, env=CorridorEnv(), llm=_llm(), progress=False)
    assert capsys.readouterr().err == ""
    run(cfg.model_copy(update={"episodes": 3}), env=CorridorEnv(), llm=_llm(), progress=None)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "episode 3/3" in lines[0]


def test_bar_shows_steps_and_the_last_action(tmp_path, monkeypatch):
    seen: list[str] = []
    real_step = display_mod.Display.step

    def spy(self, n, action):
        real_step(self, n, action)
        seen.append(self._progress.tasks[0].fields["now"])

    monkeypatch.setattr(display_mod.Display, "step", spy)
    buf = io.StringIO()
    monkeypatch.setattr("rich.console.Console.__init__", _console_to(buf))
    run(_config(tmp_path, episodes=1, max_steps=3), env=CorridorEnv(), llm=_llm(),
        progress=True)
    assert seen and seen[0] == "step 1/3 › go east"
    assert all(s.startswith(f"step {i}/3 ") for i, s in enumerate(seen, 1))


def test_bar_says_when_an_episode_is_learning(tmp_path, monkeypatch):
    from deltamem.memories import register_memory

    from .bench_toys import Faults, FileMemory

    register_memory("test-file", lambda **kw: FileMemory(kw.get("bank"), Faults()))
    states: list[str] = []
    monkeypatch.setattr(display_mod.Display, "status", lambda self, text: states.append(text))
    run(_config(tmp_path, memory="test-file", episodes=2), env=CorridorEnv(), llm=_llm(),
        progress=False)
    assert len(states) == 2 and all(t.endswith("steps; learning") for t in states)
    assert states[0].startswith(("success in ", "failure in "))


def _console_to(buf):
    from rich.console import Console

    init = Console.__init__

    def wrapped(self, *a, **kw):
        kw.pop("stderr", None)
        init(self, *a, file=buf, force_terminal=True, **kw)

    return wrapped


@pytest.mark.parametrize(("progress", "mode"), [(True, "bar"), (False, "off")])
def test_explicit_progress_modes(progress, mode):
    assert display_mod.display_mode(progress) == mode


def test_summary_wall_time_is_the_runs_not_the_re_read(tmp_path):
    cfg = _config(tmp_path, episodes=2)
    first = run(cfg, env=CorridorEnv(), llm=_llm(), progress=False)
    recorded = sum(float(r["wall_s"]) for r in read_episodes(first.episodes_path))
    again = run(cfg, env=CorridorEnv(), llm=_llm(), progress=False)  # nothing left to play
    assert again.resumed_from == 2
    assert again.phases[0].wall_s == pytest.approx(recorded, abs=1e-3)
    assert again.phases[0].wall_s > 0
