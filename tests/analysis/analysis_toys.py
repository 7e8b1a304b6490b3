"""Picklable factories for the grid's worker processes (module-level, importable by name),
the ``make_run`` fixture (run directories made by the real runner on the corridor toy),
which the analysis and the CLI tests share, and :func:`fake_run` (a finished run directory
written by hand, with chosen outcomes, for the results page)."""

from __future__ import annotations

import json
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


def fake_run(root: Path, name: str, memory: str, wins: list[int], *, phase: str = "frozen",
             reward: list[float] | None = None, trajectories: bool = True,
             env: str = "corridor", seed: int = 0, llm: str = "scripted",
             commit: str | None = None) -> Path:
    """A finished train-to-test run directory: two build episodes, then ``wins`` (one game
    each, ``g0``, ``g1``, ...) in ``phase``; with ``trajectories``, each game picks up the
    goal's object after as many steps as its index; with ``commit``, a ``versions.json``
    saying the run was played at that commit on 2026-11-28."""
    d = root / name
    d.mkdir(parents=True)
    cfg = RunConfig(run_dir=d, env=env, split="test", llm=llm, memory=memory, seed=seed,
                    protocol="train-to-test", train_agent="expert", train_episodes=2,
                    eval_modes=(phase,))
    (d / "config.json").write_text(cfg.to_json())
    recs = [{"index": i, "phase": "build", "position": i, "task_id": f"b{i}",
             "success": True, "reward": 1.0, "steps": 2, "usage": {}, "wall_s": 0.5,
             "bank": {"units": i + 1}} for i in range(2)]
    trajs = []
    for i, w in enumerate(wins):
        recs.append({"index": 2 + i, "phase": phase, "position": i, "task_id": f"g{i}",
                     "success": bool(w), "reward": reward[i] if reward else float(w),
                     "steps": 3 + i,
                     "usage": {"act": {"prompt_tokens": 100 * (i + 1), "completion_tokens": 5}},
                     "wall_s": 1.25, "bank": {"units": 2 if memory != "none" else 0}})
        steps = [["go to desk 1", "ok", True]] * i + [["take apple 1 from desk 1", "ok", True]]
        trajs.append({"index": 2 + i, "goal": "put a clean apple in fridge", "steps": steps})
    (d / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    if trajectories:
        (d / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajs))
    if commit is not None:  # versions.json, as the runner writes it
        (d / "versions.json").write_text(json.dumps([{
            "session": 0, "started_at": "2026-11-28T19:39:47+00:00",
            "source": {"commit": commit, "modified": False}, "llm": {"name": llm}}]))
    return d
