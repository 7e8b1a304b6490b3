"""Fakes for the runner tests: a corridor game and a JSON-file-backed memory."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.envs.base import Environment, Transition
from deltamem.memory import Memory
from deltamem.types import Change, Changes, Episode, Recall, RecallItem, Task


class CorridorEnv(Environment):
    """Walk a corridor to its exit; ``jump`` loses at once.

    Task ``<split>-<i>``: the corridor has ``2 + i % 3`` steps; even tasks have
    the exit in the east (start west), odd tasks in the west (start east). The
    admissible actions are listed as ``go east``, ``go west``, ``look``, ``jump``
    (the moves only where possible). Score = fraction of the way walked.
    """

    name = "corridor"
    domain = "generic"
    splits = ("train", "test")

    def __init__(self, n_tasks: int = 8) -> None:
        self.n_tasks = n_tasks
        self.resets = 0
        self._done = True

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        ids = [f"{split}-{i}" for i in range(self.n_tasks)]
        random.Random(seed).shuffle(ids)
        return ids

    def reset(self, task_id: str) -> Task:
        split, _, i = task_id.partition("-")
        self.length = 2 + int(i) % 3
        self.east = int(i) % 2 == 0
        self.pos = 0 if self.east else self.length
        self._done = False
        self.resets += 1
        side = "east" if self.east else "west"
        return Task(id=task_id, goal=f"leave the corridor by the {side} exit", domain="generic",
                    split=split, scene=f"a corridor {self.length} steps long",
                    observation=f"You are in a corridor {self.length} steps long.", max_steps=6)

    def admissible_actions(self) -> list[str]:
        acts = []
        if self.pos < self.length:
            acts.append("go east")
        if self.pos > 0:
            acts.append("go west")
        return [*acts, "look", "jump"]

    def _progress(self) -> float:
        return (self.pos if self.east else self.length - self.pos) / self.length

    def step(self, action: str) -> Transition:
        if self._done:
            raise RuntimeError("step after done")
        if action == "jump":
            self._done = True
            return Transition("You fall into a pit.", self._progress(), True, False)
        if action == "go east" and self.pos < self.length:
            self.pos += 1
        elif action == "go west" and self.pos > 0:
            self.pos -= 1
        elif action != "look":
            return Transition("You can't do that.", self._progress(), False, False, False)
        won = self.pos == (self.length if self.east else 0)
        self._done = won
        return Transition("You see the exit." if won else f"You are at step {self.pos}.",
                          self._progress(), won, won)


@dataclass
class Faults:
    """Switches a test flips to make :class:`FileMemory` misbehave."""

    raise_before_commit_at: int | None = None  # raise in learn when this many are stored
    raise_after_commit_at: int | None = None  # store, then raise (a crash after the commit)
    report_last_episode: bool = True  # put last_episode_id into stats()
    write_on_recall: bool = False  # violate the read-only recall contract
    calls: list[str] = field(default_factory=list)  # every learn invocation (episode ids)


class FileMemory(Memory):
    """Stores the ids of learned episodes in a JSON file, written atomically on learn."""

    name = "test-file"

    def __init__(self, bank: str | None, faults: Faults) -> None:
        self.path = Path(bank) if bank else None
        self.faults = faults
        self.data: dict[str, Any] = {"learned": [], "tasks": []}
        if self.path is not None and self.path.exists():
            self.data = json.loads(self.path.read_text())

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, sort_keys=True))
        os.replace(tmp, self.path)

    def recall(self, task: Task) -> Recall:
        if self.faults.write_on_recall:
            self.data.setdefault("recalls", 0)
            self.data["recalls"] += 1
            self._save()
        seen = [i for i, t in enumerate(self.data["tasks"]) if t == task.id]
        if not seen:
            return Recall()
        items = tuple(RecallItem("file", self.data["learned"][i], f"you played {task.id}", 1.0,
                                 "base") for i in seen)
        return Recall(text=f"Memory:\nYou played {task.id} before.", items=items)

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        episode.validate()
        self.faults.calls.append(episode.id)
        n = len(self.data["learned"])
        if self.faults.raise_before_commit_at == n:
            raise RuntimeError("simulated crash before commit")
        self.data["learned"].append(episode.id)
        self.data["tasks"].append(episode.task.id)
        self.data["last_episode_id"] = episode.id
        self._save()
        if self.faults.raise_after_commit_at == n:
            raise RuntimeError("simulated crash after commit")
        return Changes((Change("written", "file", "stored", episode.id),))

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "units": len(self.data["learned"]),
            "task": {"depth_histogram": {"0": len(self.data["learned"]), "1": 1}},
        }
        if self.faults.report_last_episode:
            out["last_episode_id"] = self.data.get("last_episode_id")
        return out


class SqliteMemory(Memory):
    """Stores learned episode ids in a SQLite bank in WAL mode (like the real DeltaMem store)."""

    name = "test-sqlite"

    def __init__(self, bank: str | None, faults: Faults) -> None:
        import sqlite3

        self.faults = faults
        self.con = sqlite3.connect(bank or ":memory:", isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("CREATE TABLE IF NOT EXISTS learned (n INTEGER PRIMARY KEY, id TEXT)")

    def _ids(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT id FROM learned ORDER BY n")]

    def recall(self, task: Task) -> Recall:
        n = len(self._ids())
        return Recall(text=f"Memory: {n} episodes.") if n else Recall()

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        episode.validate()
        self.faults.calls.append(episode.id)
        n = len(self._ids())
        self.con.execute("BEGIN IMMEDIATE")
        try:
            self.con.execute("INSERT INTO learned (id) VALUES (?)", (episode.id,))
            if self.faults.raise_before_commit_at == n:
                raise RuntimeError("simulated crash before commit")
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        if self.faults.raise_after_commit_at == n:
            raise RuntimeError("simulated crash after commit")
        return Changes((Change("written", "sqlite", "stored", episode.id),))

    def stats(self) -> dict[str, Any]:
        ids = self._ids()
        out: dict[str, Any] = {"units": len(ids)}
        if self.faults.report_last_episode:
            out["last_episode_id"] = ids[-1] if ids else None
        return out

    def close(self) -> None:
        self.con.close()
