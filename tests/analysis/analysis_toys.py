"""Picklable factories for the grid's worker processes (module-level, importable by name),
and the ``make_run`` fixture (run directories made by the real runner on the corridor toy),
which the analysis and the CLI tests share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from deltamem.bench import RunConfig, run
from deltamem.embed import HashingEmbedder
from deltamem.llm import ScriptedLLM
from deltamem.memory import Memory
from deltamem.types import Change, Changes, Episode, Recall, Task

#: ``make_run(name, **config) -> run_dir`` (the fixture below)
MakeRun = Callable[..., Path]


def _east(messages: Sequence[Any], purpose: str, choices: Sequence[str] | None) -> str:
    return "Thought: the exit is east.\nAction: go east"


def east_llm() -> ScriptedLLM:
    """An LLM that always walks east."""
    return ScriptedLLM(responder=_east)


def md_tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of ``text`` as rows of cells (header first, separator dropped)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            if set(line.strip()) <= {"|", "-"}:
                continue  # the separator row
            current.append([c.strip() for c in line.strip()[1:-1].split(" | ")])
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def as_dicts(rows: list[list[str]]) -> list[dict[str, str]]:
    """Table rows keyed by the header."""
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


class LessonMemory(Memory):
    """A flat baseline stand-in: one lesson ``lesson: <goal>`` per episode, in memory only;
    ``stats()`` reports a float ``avg_tokens`` like the real baselines."""

    name = "test-lessons"

    def __init__(self) -> None:
        self.lessons: list[str] = []

    def recall(self, task: Task) -> Recall:
        return Recall()

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        episode.validate()
        self.lessons.append(f"lesson: {episode.task.goal}")
        return Changes((Change("written", "lessons", "stored"),))

    def stats(self) -> dict[str, Any]:
        tokens = [len(t.split()) for t in self.lessons]
        return {"units": len(tokens),
                "avg_tokens": sum(tokens) / len(tokens) if tokens else 0.0}


def make_lessons(**_: Any) -> LessonMemory:
    """Registry factory of :class:`LessonMemory`."""
    return LessonMemory()


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """``make_run(name, **config)`` runs the corridor (free actions, the LLM always says
    ``go east``: even tasks succeed, odd ones fail) and returns the run directory."""
    from tests.bench.bench_toys import CorridorEnv

    def make(name: str, **kw: Any) -> Path:
        base: dict[str, Any] = {"run_dir": tmp_path / name, "env": "corridor", "split": "test",
                                "llm": "scripted", "memory": "none", "episodes": 6}
        config = RunConfig(**{**base, **kw})
        embedder = HashingEmbedder(dim=64) if config.memory == "deltamem" else None
        run(config, env=CorridorEnv(), llm=east_llm(), embedder=embedder, progress=False)
        return Path(config.run_dir)

    return make
