"""Run directories for the analysis tests, made by the real runner on the corridor toy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

# the corridor environment lives with the runner's tests
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from analysis_toys import MakeRun, east_llm
from bench_toys import CorridorEnv

from deltamem.bench import RunConfig, run
from deltamem.embed import HashingEmbedder


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """``make_run(name, **config)`` runs the corridor (free actions, the LLM always says
    ``go east``: even tasks succeed, odd ones fail) and returns the run directory."""

    def make(name: str, **kw: Any) -> Path:
        base: dict[str, Any] = {"run_dir": tmp_path / name, "env": "corridor", "split": "test",
                                "llm": "scripted", "memory": "none", "episodes": 6}
        config = RunConfig(**{**base, **kw})
        embedder = HashingEmbedder(dim=64) if config.memory == "deltamem" else None
        run(config, env=CorridorEnv(), llm=east_llm(), embedder=embedder, progress=False)
        return Path(config.run_dir)

    return make
