"""Demonstration-seeded train-to-test: the build phase played by the expert policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltamem.bench import RunConfig, read_episodes, run
from deltamem.errors import ConfigError
from deltamem.llm import ScriptedLLM
from deltamem.memories import register_memory
from tests.agents.test_expert import KeyRoom

from .bench_toys import Faults, FileMemory


@pytest.fixture
def faults() -> Faults:
    f = Faults()
    register_memory("test-file", lambda **kw: FileMemory(kw.get("bank"), f))
    return f


def _config(tmp_path: Path, name: str = "run", **kw: Any) -> RunConfig:
    base: dict[str, Any] = {"run_dir": tmp_path / name, "env": "keyroom", "split": "test",
                            "llm": "scripted", "memory": "test-file", "episodes": 2,
                            "protocol": "train-to-test", "train_episodes": 4,
                            "train_agent": "expert:noise=0.3", "constrained": True}
    return RunConfig(**{**base, **kw})


def _run(config: RunConfig, llm: ScriptedLLM | None = None) -> None:
    run(config, env=KeyRoom(), llm=llm or ScriptedLLM(), progress=False)


def _lines(config: RunConfig) -> list[dict[str, Any]]:
    return read_episodes(Path(config.run_dir) / "episodes.jsonl")


def test_the_build_phase_is_played_by_the_expert_and_says_so(tmp_path: Path,
                                                            faults: Faults) -> None:
    llm = ScriptedLLM()
    config = _config(tmp_path)
    _run(config, llm)
    lines = _lines(config)
    assert [r["phase"] for r in lines] == ["build"] * 4 + ["frozen"] * 2 + ["unfrozen"] * 2
    assert [r["agent"] for r in lines] == ["expert:noise=0.3"] * 4 + ["react"] * 4
    # the LLM acted only in the evaluation phases
    assert len(llm.calls) == sum(r["steps"] for r in lines[4:])
    assert sum(r["success"] for r in lines[:4]) >= 1  # demonstrations mostly win


def test_every_memory_gets_the_same_demonstrations(tmp_path: Path, faults: Faults) -> None:
    register_memory("test-file-2", lambda **kw: FileMemory(kw.get("bank"), faults))
    a, b = _config(tmp_path, "a"), _config(tmp_path, "b", memory="test-file-2")
    _run(a)
    _run(b)
    builds = [[(r["task_id"], r["steps"], r["success"]) for r in _lines(c)
               if r["phase"] == "build"] for c in (a, b)]
    assert builds[0] == builds[1]


def test_a_killed_demonstration_run_resumes(tmp_path: Path, faults: Faults) -> None:
    whole = _config(tmp_path, "whole")
    _run(whole)
    config = _config(tmp_path, "killed")
    faults.raise_before_commit_at = 2
    with pytest.raises(RuntimeError, match="before commit"):
        _run(config)
    faults.raise_before_commit_at = None
    _run(config)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(8))
    assert "redone" in lines[2]["recovered"]
    key = [(r["phase"], r["task_id"], r["steps"], r["success"]) for r in lines]
    assert key == [(r["phase"], r["task_id"], r["steps"], r["success"]) for r in _lines(whole)]


def test_train_agent_needs_the_train_to_test_protocol(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train-to-test"):
        _config(tmp_path, protocol="online")
    with pytest.raises(ValueError, match="noise"):
        _config(tmp_path, train_agent="expert:noise=3")


def test_an_environment_without_solutions_cannot_be_demonstrated(tmp_path: Path,
                                                                faults: Faults) -> None:
    config = _config(tmp_path)
    with pytest.raises(ConfigError, match="knows no solution"):
        run(config, env=KeyRoom(with_solution=False), llm=ScriptedLLM(), progress=False)


def test_a_demonstration_budget_makes_noisy_demonstrations_lose(tmp_path: Path,
                                                                 faults: Faults) -> None:
    # KeyRoom takes 5 steps: with a budget of 3 every demonstration runs out and fails
    config = _config(tmp_path, train_agent="expert:noise=0.3,budget=3")
    _run(config)
    build = [r for r in _lines(config) if r["phase"] == "build"]
    assert build and all(r["steps"] <= 3 and not r["success"] for r in build)
    plain = _config(tmp_path, "plain", train_agent="expert:noise=0.3")
    _run(plain)
    assert any(r["steps"] > 3 for r in _lines(plain) if r["phase"] == "build")
