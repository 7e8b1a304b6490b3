"""The examples run end to end on the household environment (offline: scripted models)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.envs
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _engine() -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")


def test_langgraph_example_second_prompt_has_memory(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    firsts = load("langgraph_household").main(
        ["--episodes", "2", "--bank", str(tmp_path / "b.db"), "--cache", str(tmp_path),
         "--task-type", "pick_clean_then_place_in_recep"])
    assert "Memory recalled" not in str(firsts[0][0].content)
    assert "Memory recalled" in str(firsts[1][0].content)


def test_openai_agents_example_second_run_has_memory(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    seen = load("openai_agents_household").main(
        ["--episodes", "2", "--bank", str(tmp_path / "b.db"), "--cache", str(tmp_path),
         "--task-type", "pick_clean_then_place_in_recep"])
    assert "Memory recalled" not in str(seen[0]) and "Memory recalled" in str(seen[1])
