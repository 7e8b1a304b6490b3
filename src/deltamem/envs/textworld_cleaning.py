"""The Cleaning game (AriGraph paper, Appendix F), built offline with TextWorld's GameMaker.

A house of rooms on a 3x3 grid (connected by a seeded spanning tree plus one
extra passage when possible); each room has furniture and the items that
belong on it. Some items are **misplaced**: put on furniture of another room
or on another room's floor. Goal: return every misplaced item to where it
belongs. Points: +1 for picking each misplaced item up, +1 for putting it on
(or into) its right place; the game is won when all are done.

Penalty (the paper's "-1 for manipulation with correctly placed item"): the
first time an item leaves its right place -- an item that started there, or a
misplaced item the player had already put back -- costs 1 point. The penalty is
charged once per item and is **not** refunded when the item is put back (the
paper penalises the manipulation itself; charging once per item keeps the
penalty bounded and makes take/put loops pointless rather than ruinous). It is
computed by the adapter from TextWorld's state facts after every command (the
compiled game only holds the positive quests), so it is deterministic. The
reported score is ``max(points - penalties, 0) / max_points`` where
``max_points`` is twice the number of misplaced items; :attr:`CleaningEnv.penalties`
lists the penalised items in order.

Difficulty (``difficulty``): 1 = 6 rooms, 3 misplaced items; 2 = 9 rooms, 6;
3 = 9 rooms, 11 (the paper's size). Step cap 150.

Task ids are ``cleaning-L<difficulty>-s<seed>`` with the split seed ranges of
:mod:`deltamem.envs.textworld_games`; the same seed gives the same house
(layout, items, text). Games are compiled once into the TextWorld cache
folder by a child Python with ``PYTHONHASHSEED=0``, next to a
``.walkthrough.json`` holding a winning command list (the oracle used in
tests). Needs ``textworld``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections import deque
from pathlib import Path
from typing import Any

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.envs.textworld_games import (
    SPLIT_SEED_BASE,
    SPLIT_SIZE,
    _split_of,
    _step_text,
    _strip_banner,
    _textworld,
    default_cache_dir,
)
from deltamem.errors import ConfigError
from deltamem.seeding import check_random_state
from deltamem.types import Task

__all__ = ["CATALOG", "LEVELS", "CleaningEnv", "design"]

#: room -> furniture -> (is container, items that belong there)
CATALOG: dict[str, dict[str, tuple[bool, tuple[str, ...]]]] = {
    "kitchen": {"kitchen counter": (False, ("frying pan", "cutting board")),
                "fridge": (True, ("milk carton",))},
    "bathroom": {"bathroom sink": (False, ("toothbrush", "soap bar")),
                 "bathroom cabinet": (True, ("shampoo bottle",))},
    "bedroom": {"bed": (False, ("pillow",)), "wardrobe": (True, ("wool sweater",))},
    "living room": {"sofa": (False, ("cushion",)), "coffee table": (False, ("tv remote",))},
    "office": {"desk": (False, ("laptop", "stapler"))},
    "dining room": {"dining table": (False, ("dinner plate", "wine glass"))},
    "laundry room": {"washing machine": (True, ("dirty sock",)),
                     "ironing board": (False, ("iron",))},
    "kids room": {"toy box": (True, ("teddy bear", "toy car"))},
    "hallway": {"shoe rack": (False, ("sneakers",)), "coat hook": (False, ("raincoat",))},
}
#: difficulty -> (rooms, misplaced items)
LEVELS: dict[int, tuple[int, int]] = {1: (6, 3), 2: (9, 6), 3: (9, 11)}
MAX_STEPS = 150
_ID = re.compile(r"^cleaning-L(?P<level>\d+)-s(?P<seed>\d+)$")
_DIRS = {(0, 1): ("east", "west"), (1, 0): ("south", "north")}
OBJECTIVE = ("The house is a mess. Find the items that are out of place and put each one back "
             "where it belongs (on or in the right furniture of the right room). You get a point "
             "for picking up each misplaced item and a point for putting it in its place.")


def _parse(task_id: str) -> tuple[int, int]:
    m = _ID.match(str(task_id))
    if m is None:
        raise ConfigError(f"bad cleaning task id {task_id!r}; expected 'cleaning-L<1-3>-s<seed>'")
    level, seed = int(m["level"]), int(m["seed"])
    if level not in LEVELS:
        raise ConfigError(f"cleaning difficulty must be one of {sorted(LEVELS)}, got {level}")
    _split_of(seed)
    return level, seed


def design(level: int, seed: int) -> dict[str, Any]:
    """The house of ``(level, seed)`` as plain data: rooms with grid cells, passages,
    where every item starts, the misplaced items and the walkthrough. Pure and deterministic."""
    n_rooms, n_mis = LEVELS[level]
    rng = check_random_state(seed)
    rooms = sorted(CATALOG)
    rng.shuffle(rooms)
    rooms = rooms[:n_rooms]
    cells = [(r, c) for r in range(3) for c in range(3)][:n_rooms]
    rng.shuffle(cells)
    at = dict(zip(rooms, cells, strict=True))
    by_cell = {v: k for k, v in at.items()}
    pairs = []
    for room, (r, c) in at.items():
        for (dr, dc), dirs in _DIRS.items():
            other = by_cell.get((r + dr, c + dc))
            if other is not None:
                pairs.append((room, other, dirs))
    rng.shuffle(pairs)
    parent = {r: r for r in rooms}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    passages, spare = [], []
    for a, b, dirs in pairs:
        if find(a) != find(b):
            parent[find(a)] = find(b)
            passages.append((a, b, dirs))
        else:
            spare.append((a, b, dirs))
    passages += spare[:1]
    homes = {item: (room, furn) for room in rooms for furn, (_, items) in CATALOG[room].items()
             for item in items}
    items = sorted(homes)
    misplaced = sorted(rng.sample(items, min(n_mis, len(items))))
    start: dict[str, tuple[str, str | None]] = {}
    for item in items:
        if item not in misplaced:
            start[item] = homes[item]
            continue
        other_rooms = [r for r in rooms if r != homes[item][0]]
        room = rng.choice(other_rooms)
        furn = rng.choice([*sorted(CATALOG[room]), None])
        start[item] = (room, furn)
    first = rooms[0]
    walkthrough = _walk(first, passages, misplaced, start, homes)
    return {"rooms": rooms, "cells": {r: list(at[r]) for r in rooms},
            "passages": [[a, b, list(d)] for a, b, d in passages], "start": start,
            "homes": homes, "misplaced": misplaced, "player": first, "walkthrough": walkthrough}


def _route(passages: list, a: str, b: str) -> list[str]:
    nbr: dict[str, list[tuple[str, str]]] = {}
    for x, y, (d_xy, d_yx) in passages:
        nbr.setdefault(x, []).append((d_xy, y))
        nbr.setdefault(y, []).append((d_yx, x))
    prev: dict[str, tuple[str, str] | None] = {a: None}
    q = deque([a])
    while q:
        x = q.popleft()
        for d, y in sorted(nbr.get(x, [])):
            if y not in prev:
                prev[y] = (x, d)
                q.append(y)
    out: list[str] = []
    while b != a:
        x, d = prev[b]  # type: ignore[misc]
        out.append(f"go {d}")
        b = x
    return out[::-1]


def _walk(here: str, passages: list, misplaced: list[str], start: dict, homes: dict) -> list[str]:
    cmds: list[str] = []
    for item in misplaced:
        room, furn = start[item]
        cmds += _route(passages, here, room)
        cmds.append(f"take {item} from {furn}" if furn else f"take {item}")
        home_room, home_furn = homes[item]
        cmds += _route(passages, room, home_room)
        container = CATALOG[home_room][home_furn][0]
        cmds.append(f"insert {item} into {home_furn}" if container else
                    f"put {item} on {home_furn}")
        here = home_room
    return cmds


class CleaningEnv(Environment):
    """The Cleaning game behind the :class:`Environment` contract (module docstring).

    Args:
        difficulty: 1-3 (see :data:`LEVELS`).
        n_games: games per split.
        cache_dir: where compiled games go (``None``: TextWorld adapter's default).
        max_steps: step cap (150, as in the paper).
    """

    name = "textworld:cleaning"
    domain = "textworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits = ("train", "seen", "unseen")

    def __init__(self, difficulty: int = 1, n_games: int = 20,
                 cache_dir: str | os.PathLike[str] | None = None,
                 max_steps: int = MAX_STEPS) -> None:
        self.difficulty = difficulty
        self.n_games = n_games
        self.cache_dir = cache_dir
        self.max_steps_cap = max_steps
        self._gym: Any = None
        self._task: Task | None = None
        self._admissible: list[str] = []
        self._walkthrough: list[str] = []
        self._done = False
        self._steps = 0
        self._max_score = 1
        self._homes: dict[str, str] = {}
        self._in_place: set[str] = set()
        self._penalised: list[str] = []

    @property
    def penalties(self) -> list[str]:
        """Items charged the -1 so far this episode, in the order they were moved."""
        return list(self._penalised)

    def _validate(self) -> None:
        if self.difficulty not in LEVELS:
            raise ConfigError(f"cleaning difficulty must be one of {sorted(LEVELS)}, "
                              f"got {self.difficulty!r}")
        if not isinstance(self.n_games, int) or not 1 <= self.n_games <= SPLIT_SIZE:
            raise ConfigError(f"n_games must be an int in 1..{SPLIT_SIZE}, got {self.n_games!r}")
        if not isinstance(self.max_steps_cap, int) or self.max_steps_cap < 1:
            raise ConfigError(f"max_steps must be a positive int, got {self.max_steps_cap!r}")

    def game_path(self, task_id: str) -> Path:
        tw = _textworld()
        root = Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
        return root / f"tw-{tw.__version__}" / f"{task_id}.z8"

    def prepare(self, task_ids: list[str]) -> list[Path]:
        """Generate the missing games of ``task_ids`` in one child process; their paths."""
        paths = []
        todo = []
        for t in task_ids:
            level, seed = _parse(t)
            p = self.game_path(t)
            paths.append(p)
            if not (p.is_file() and p.with_suffix(".walkthrough.json").is_file()):
                todo.append({"level": level, "seed": seed, "path": str(p)})
        if todo:
            Path(todo[0]["path"]).parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                [sys.executable, "-c",
                 "from deltamem.envs.textworld_cleaning import _child; _child()"],
                input=json.dumps(todo), capture_output=True, text=True, check=False,
                env={**os.environ, "PYTHONHASHSEED": "0"})
            if proc.returncode != 0:
                tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
                raise RuntimeError(f"cleaning game generation failed (exit "
                                   f"{proc.returncode}):\n{tail}")
        return paths

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """The ``n_games`` games of ``split``; ``seed=0`` in seed order, else shuffled by it."""
        self._validate()
        if split not in SPLIT_SEED_BASE:
            raise ConfigError(f"unknown split {split!r}; known: {', '.join(self.splits)}")
        base = SPLIT_SEED_BASE[split]
        ids = [f"cleaning-L{self.difficulty}-s{base + i}" for i in range(self.n_games)]
        if seed:
            check_random_state(seed).shuffle(ids)
        return ids

    def reset(self, task_id: str) -> Task:
        """Start the game (generating it first when it is not cached)."""
        self._validate()
        level, seed = _parse(task_id)
        tw = _textworld()
        (path,) = self.prepare([task_id])
        self.close()
        from textworld.gym.envs import TextworldGymEnv

        infos = tw.EnvInfos(admissible_commands=True, score=True, max_score=True, won=True,
                            lost=True, description=True, facts=True)
        self._gym = TextworldGymEnv([str(path)], request_infos=infos)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is not fully supported.*")
            obs, info = self._gym.reset()
        self._walkthrough = json.loads(path.with_suffix(".walkthrough.json").read_text())
        self._admissible = list(info["admissible_commands"])
        self._max_score = max(int(info["max_score"]), 1)
        self._homes = {item: furn for item, (_, furn) in design(level, seed)["homes"].items()}
        self._in_place = self._placed(info)
        self._penalised = []
        self._done = False
        self._steps = 0
        self._task = Task(id=task_id, goal=OBJECTIVE, scene=str(info["description"]).strip(),
                          domain=self.domain, split=_split_of(seed),
                          observation=_opening(_step_text(_strip_banner(obs))),
                          max_steps=self.max_steps_cap,
                          meta={"task_type": "cleaning", "difficulty": level, "seed": seed})
        return self._task

    def admissible_actions(self) -> list[str]:
        self._require()
        return list(self._admissible)

    def walkthrough(self) -> list[str]:
        """A winning command list from the start (oracle; for tests)."""
        self._require()
        return list(self._walkthrough)

    def solution(self) -> list[str] | None:
        """The game's walkthrough (see :meth:`Environment.solution`); ``None`` if it has none."""
        return self.walkthrough() or None

    def step(self, action: str) -> Transition:
        """Send ``action``; score = (points - penalties) / max points, clipped to [0, 1];
        success = all misplaced items back in place (module docstring)."""
        self._require()
        if self._done:
            raise RuntimeError("episode is over; call reset() first")
        norm = " ".join(action.split()).casefold()
        valid = norm in {" ".join(a.split()).casefold() for a in self._admissible}
        obs, score, done, info = self._gym.step(action)
        self._steps += 1
        self._admissible = list(info["admissible_commands"])
        placed = self._placed(info)
        for item in sorted(self._in_place - placed):
            if item not in self._penalised:
                self._penalised.append(item)
        self._in_place = placed
        won = bool(info["won"])
        self._done = bool(done) or won or bool(info["lost"]) or self._steps >= self.max_steps_cap
        points = float(score) - len(self._penalised)
        return Transition(observation=_step_text(obs),
                          score=min(max(points / self._max_score, 0.0), 1.0),
                          done=self._done, success=won, valid=valid)

    def _placed(self, info: dict[str, Any]) -> set[str]:
        """Items lying on (or in) their own furniture, read from TextWorld's state facts."""
        return {p.arguments[0].name for p in info["facts"]
                if p.name in ("on", "in") and len(p.arguments) == 2
                and self._homes.get(p.arguments[0].name) == p.arguments[1].name}

    def max_steps(self, task: Task) -> int:
        return task.max_steps or self.max_steps_cap

    def close(self) -> None:
        gym, self._gym = self._gym, None
        if gym is not None:
            gym.close()

    def _require(self) -> None:
        if self._gym is None:
            raise RuntimeError("no episode in progress; call reset(task_id) first")


def _opening(text: str) -> str:
    """The first observation, with the objective stated once."""
    return text if OBJECTIVE in text else f"{OBJECTIVE}\n\n{text}"


def _build(level: int, seed: int, path: Path) -> None:  # pragma: no cover - child process
    import textworld
    from textworld import GameMaker

    plan = design(level, seed)
    options = textworld.GameOptions()
    options.seeds = seed
    M = GameMaker(options)
    rooms = {r: M.new_room(r) for r in plan["rooms"]}
    for a, b, (d_ab, d_ba) in plan["passages"]:
        M.connect(getattr(rooms[a], d_ab), getattr(rooms[b], d_ba))
    furniture = {}
    for r in plan["rooms"]:
        for furn, (container, _) in sorted(CATALOG[r].items()):
            f = M.new(type="c" if container else "s", name=furn)
            if container:
                f.add_property("open")
            rooms[r].add(f)
            furniture[furn] = (f, container)
    quests = []
    from textworld.generator.game import Event, Quest

    for item, (room, furn) in sorted(plan["start"].items()):
        obj = M.new(type="o", name=item)
        if furn is None:
            rooms[room].add(obj)
        else:
            furniture[furn][0].add(obj)
        if item in plan["misplaced"]:
            hf, container = furniture[plan["homes"][item][1]]
            quests.append(Quest(win_events=[Event(conditions={M.new_fact("in", obj,
                                                                          M.inventory)})],
                                reward=1, desc=f"pick up the {item}"))
            fact = M.new_fact("in" if container else "on", obj, hf)
            quests.append(Quest(win_events=[Event(conditions={fact})], reward=1,
                                desc=f"put the {item} back"))
    M.set_player(rooms[plan["player"]])
    M.quests = quests
    game = M.build()
    game.objective = OBJECTIVE
    game.metadata["walkthrough"] = plan["walkthrough"]
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        opts = textworld.GameOptions()
        opts.path = os.path.join(tmp, path.name)
        opts.file_ext = ".z8"
        opts.force_recompile = True
        built = Path(textworld.generator.compile_game(game, opts))
        path.with_suffix(".walkthrough.json").write_text(json.dumps(plan["walkthrough"]))
        os.replace(built.with_suffix(".json"), path.with_suffix(".json"))
        os.replace(built, path)


def _child() -> None:  # pragma: no cover - runs in the child process
    """Generate the games described on stdin (JSON list of level/seed/path)."""
    for job in json.loads(sys.stdin.read()):
        _build(job["level"], job["seed"], Path(job["path"]))
