"""Deterministic generator of ALFWorld-format household games (``game.tw-pddl``).

A game is a pure function of ``(split, task_type, key)``: the generator seeds a
``random.Random`` with that triple (plus an attempt number), draws a room layout, the
numbered receptacles, the objects and a goal from :mod:`.catalog`, and writes a PDDL
problem for ALFWorld's own domain and text grammar (shipped by the ``alfworld`` wheel).
Each game is then handed to TextWorld's PDDL engine: the Fast Downward planner must find
a plan (what TextWorld reports as ``policy_commands``), stored as the ``walkthrough``. A
game without a plan (or won before any action, or needing too many steps) is dropped
and the next attempt's sub-seed is drawn, so the output stays deterministic.

The file follows ALFWorld's layout: ``<dir>/game.tw-pddl`` (JSON with ``pddl_domain``,
``grammar``, ``pddl_problem``, ``solvable``, ``walkthrough``) next to a
``traj_data.json`` that names the ``task_type`` and the ``pddl_params``, so the same
folder can be read by :class:`deltamem.envs.alfworld.ALFWorldEnv`.

Example (needs ``textworld`` and ``alfworld``)::

    game = generate_game("seen", "pick_heat_then_place_in_recep", "0-3")
    game.goal            # 'put a hot bread in countertop'
    game.walkthrough     # ['go to fridge 1', 'open fridge 1', 'take bread 1 from fridge 1',
                         #  'go to microwave 1', 'heat bread 1 with microwave 1', ...]
    write_game(game, "/tmp/games/seen/bread")
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.envs.household import catalog
from deltamem.envs.household.catalog import APPLIANCE, LAMPS, PROPERTY, RECEPTACLES
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.seeding import check_random_state, sub_seed

__all__ = [
    "GENERATOR_VERSION",
    "PLACEMENT_REGIMES",
    "GameChecker",
    "GeneratedGame",
    "Problem",
    "build_problem",
    "generate_game",
    "home_type",
    "placement_regime",
    "write_game",
]

#: bump when the output of a given (split, task_type, key) changes; caches key on it
GENERATOR_VERSION = 1
#: a walkthrough longer than this is rejected (episodes are capped at 30 steps)
MAX_PLAN_LENGTH = 20
#: attempts (sub-seeds) before giving up on a key
MAX_ATTEMPTS = 12


@dataclass(frozen=True)
class GeneratedGame:
    """One generated game: the ``game.tw-pddl`` content and its ``traj_data.json``.

    Attributes:
        game: the ``game.tw-pddl`` mapping (``solvable`` is True, ``walkthrough`` set).
        traj: the ``traj_data.json`` mapping (``task_type``, ``pddl_params``, ``scene``...).
        attempt: the sub-seed that produced a solvable game (0 when the first one did).
    """

    game: dict[str, Any]
    traj: dict[str, Any]
    attempt: int = 0

    @property
    def goal(self) -> str:
        return str(self.traj["goal"])

    @property
    def task_type(self) -> str:
        return str(self.traj["task_type"])

    @property
    def walkthrough(self) -> list[str]:
        return list(self.game["walkthrough"])


@dataclass
class _Draft:
    """A problem being built (private)."""

    receptacles: list[tuple[str, str]] = field(default_factory=list)  # (pddl id, type)
    objects: list[tuple[str, str, str]] = field(default_factory=list)  # (pddl id, type, recep id)
    lamps: list[tuple[str, str, str]] = field(default_factory=list)


@functools.cache
def _require_alfworld() -> tuple[str, str, dict[str, Any]]:
    """ALFWorld's domain text, grammar text and goal library (raises ConfigError if absent)."""
    try:
        from alfworld.gen import goal_library
        from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise ConfigError(
            "the household environment needs the `alfworld` and `textworld` packages "
            "(pip install 'deltamem[envs]')") from exc
    domain = Path(ALFRED_PDDL_PATH).read_text(encoding="utf-8")
    grammar = Path(ALFRED_TWL2_PATH).read_text(encoding="utf-8")
    return domain, grammar, goal_library.gdict


def _recep_id(rtype: str, index: int) -> str:
    # ALFWorld spells basins "Sink|...|SinkBasin"; the demangler turns that into "sinkbasin".
    if rtype.endswith("Basin"):
        return f"{rtype[: -len('Basin')]}_bar_{index:02d}_bar_{rtype}"
    return f"{rtype}_bar_{index:02d}"


def _place(rng: random.Random, recs: Sequence[tuple[str, str]], allowed: set[str],
           home: tuple[str, str] | None = None) -> str | None:
    """A receptacle of an ``allowed`` type; with ``home`` = ``(regime, object type)``, one of
    the object type's home type in that regime (:func:`home_type`)."""
    if home is not None:
        best = home_type(home[0], home[1], allowed & {rtype for _, rtype in recs})
        allowed = {best} if best else allowed
    choices = [rid for rid, rtype in recs if rtype in allowed]
    return rng.choice(choices) if choices else None


PLACEMENT_REGIMES: tuple[str, ...] = ("a", "b")
"""Placement regimes of a drifting stream (:func:`home_type`); a key ``<key>@a`` or
``<key>@b`` generates its game under that regime."""


def home_type(regime: str, otype: str, present: set[str]) -> str | None:
    """Where objects of ``otype`` lie in placement ``regime``: its home receptacle type.

    The receptacle types of ``present`` are ranked by a fixed hash of ``(otype, type)``;
    regime ``a`` takes the first of the ranking, regime ``b`` the last, so a kind whose
    room offers it two or more places has another home after the drift. ``None`` when
    ``present`` is empty.
    """
    if regime not in PLACEMENT_REGIMES:
        raise InvalidInputError(f"unknown placement regime {regime!r}; use a or b")
    ranked = sorted(present, key=lambda t: hashlib.blake2b(f"{otype}/{t}".encode(),
                                                           digest_size=8).digest())
    if not ranked:
        return None
    return ranked[0] if regime == "a" else ranked[-1]


@dataclass(frozen=True)
class Problem:
    """One drawn game before planning.

    Attributes:
        text: the PDDL problem of the whole room (what the game file holds).
        planning_text: the same problem restricted to what the task touches (target
            objects, the lamp, their receptacles, every receptacle of the goal type and
            the appliance). Removing entities only removes options and every action's
            precondition mentions only its own arguments, so a plan of this problem is a
            plan of ``text``; it is much faster to search.
        names: PDDL id (lower-cased) -> the name the agent sees in the whole room
            (``cabinet 3``), computed with ALFWorld's own demangler.
        traj: the ``traj_data.json`` facts.
    """

    text: str
    planning_text: str
    names: dict[str, str]
    traj: dict[str, Any]


def build_problem(split: str, task_type: str, rng: random.Random,
                  regime: str | None = None) -> Problem:
    """Draw one game from ``rng`` (see :class:`Problem`).

    ``regime`` (``a``/``b``): every movable object lies in its kind's home receptacle type
    of that regime (:func:`home_type`) instead of any type it may lie in; ``None``: the
    default world. Raises :class:`LookupError` when the draw cannot host the task (the
    caller moves on to the next sub-seed). ``split`` and ``task_type`` are assumed valid.
    """
    layouts = [lay for lay in catalog.layouts_for(split) if lay.supports(task_type)]
    layout = rng.choice(layouts)
    draft = _Draft()
    for rtype in sorted(layout.receptacles):
        lo, hi = layout.receptacles[rtype]
        for i in range(1, rng.randint(lo, hi) + 1):
            draft.receptacles.append((_recep_id(rtype, i), rtype))
    present = {rtype for _, rtype in draft.receptacles}
    pool = [o for o in catalog.objects_for(split) if layout.room in o.rooms and o.places & present]

    # The target: an object type able to undergo the task, and a goal receptacle type.
    appliance = APPLIANCE.get(task_type)
    prop = PROPERTY.get(task_type)
    toggle = ""
    candidates: list[tuple[catalog.ObjectType, str]] = []
    for otype in pool:
        if prop and not otype.has(prop):
            continue
        if task_type == "look_at_obj_in_light":
            candidates.append((otype, ""))
            continue
        for rtype in sorted(otype.places & present):
            start = otype.places & present - {rtype, appliance or ""}
            if rtype != appliance and start:
                candidates.append((otype, rtype))
    if not candidates:
        raise LookupError(f"layout {layout.name} cannot host {task_type}")
    target, goal_rtype = rng.choice(candidates)
    forbidden = {goal_rtype, appliance or ""}
    n_target = 2 if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for i in range(1, n_target + 1):
        rid = _place(rng, draft.receptacles, set(target.places) - forbidden,
                     None if regime is None else (regime, target.name))
        if rid is None:
            raise LookupError(f"no place for {target.name}")
        draft.objects.append((f"{target.name}_bar_{i:02d}", target.name, rid))

    # Lamps: the look task needs one; rooms with a stand may show one anyway.
    lamp_types = sorted(name for name, stands in LAMPS.items() if stands & present)
    if task_type == "look_at_obj_in_light":
        toggle = rng.choice(lamp_types)
        lamp_types = [toggle]
    elif lamp_types and rng.random() < 0.5:
        lamp_types = [rng.choice(lamp_types)]
    else:
        lamp_types = []
    for lamp in lamp_types:
        rid = _place(rng, draft.receptacles, set(LAMPS[lamp]))
        assert rid is not None  # the stand is present by construction
        draft.lamps.append((f"{lamp}_bar_01", lamp, rid))

    # Distractors: a few other object types of the same pool (never the target's type).
    others = [o for o in pool if o.name != target.name]
    rng.shuffle(others)
    for otype in others[: rng.randint(4, 8)]:
        for i in range(1, rng.randint(1, 2) + 1):
            rid = _place(rng, draft.receptacles, set(otype.places),
                         None if regime is None else (regime, otype.name))
            if rid is not None:
                draft.objects.append((f"{otype.name}_bar_{i:02d}", otype.name, rid))

    _, _, gdict = _require_alfworld()
    entry = gdict[task_type]
    template = rng.choice(entry["templates"])
    params = {"obj": target.name, "recep": goal_rtype, "toggle": toggle, "mrecep": ""}
    goal_text = template.format(**{k: v.lower() for k, v in params.items()})
    goal_pddl = entry["pddl"].format(**params).replace(" # ", " - ")

    locs = [f"loc_bar_{i:02d}" for i in range(len(draft.receptacles) + 1)]
    order = list(range(1, len(draft.receptacles) + 1))
    rng.shuffle(order)  # locations carry no meaning; shuffled so ids do not leak the order
    loc_of = {rid: locs[k] for (rid, _), k in zip(draft.receptacles, order, strict=True)}
    # What the planner needs: the target instances, the task's lamp, the receptacles
    # holding them, every receptacle of the goal type and the appliance.
    used = {rid for _, t, rid in draft.objects + draft.lamps if t in (target.name, toggle)}
    keep = {oid for oid, t, _ in draft.objects + draft.lamps if t in (target.name, toggle)}
    keep |= {rid for rid, t in draft.receptacles if rid in used or t in (goal_rtype, appliance)}
    traj = {
        "task_type": task_type,
        "goal": goal_text,
        "pddl_params": {
            "object_target": target.name,
            "parent_target": goal_rtype,
            "toggle_target": toggle,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"layout": layout.name, "room": layout.room,
                  "object_types": sorted({t for _, t, _ in draft.objects}),
                  "receptacle_types": sorted(present)},
        "split": split,
        "generator": {"name": "deltamem.household", "version": GENERATOR_VERSION},
    }
    if regime is not None:
        traj["placement_regime"] = regime
    return Problem(
        text=_render_problem(draft, goal_pddl, locs[0], loc_of),
        planning_text=_render_problem(draft, goal_pddl, locs[0], loc_of, keep),
        names=_agent_names(draft, locs),
        traj=traj,
    )


def _agent_names(draft: _Draft, locs: Sequence[str]) -> dict[str, str]:
    """PDDL id (lower-cased, as the planner reports it) -> name shown to the agent."""
    from alfworld.agents.utils.misc import Demangler

    ids = [i.lower() for i, _ in draft.receptacles]
    ids += [i.lower() for i, _, _ in draft.objects + draft.lamps] + list(locs)

    @dataclass
    class _Info:  # the one attribute Demangler reads
        id: str

    demangler = Demangler(game_infos={i: _Info(i) for i in ids}, shuffle=False)
    return {i: demangler.demangle_alfred_name(i) for i in ids}


def _render_problem(draft: _Draft, goal_pddl: str, start: str, loc_of: dict[str, str],
                    keep: set[str] | None = None) -> str:
    """The PDDL problem text, in the shape ALFWorld's own games use.

    ``keep`` restricts the problem to those receptacle / object ids (the planning view).
    """
    recs = [(rid, t) for rid, t in draft.receptacles if keep is None or rid in keep]
    objects = [x for x in draft.objects if keep is None or x[0] in keep]
    lamps = [x for x in draft.lamps if keep is None or x[0] in keep]
    things = objects + lamps
    otypes = sorted({t for _, t, _ in things})
    rtypes = sorted({t for _, t in recs})
    decl = ["agent1 - agent"]
    decl += [f"{rid} - receptacle" for rid, _ in recs]
    decl += [f"{oid} - object" for oid, _, _ in things]
    decl += [f"{loc} - location" for loc in sorted([start, *(loc_of[r] for r, _ in recs)])]
    decl += [f"{t}Type - otype" for t in otypes]
    decl += [f"{t}Type - rtype" for t in rtypes]
    init = [f"(atLocation agent1 {start})"]
    for rid, rtype in recs:
        init.append(f"(receptacleType {rid} {rtype}Type)")
        init.append(f"(receptacleAtLocation {rid} {loc_of[rid]})")
        if RECEPTACLES[rtype]:
            init.append(f"(openable {rid})")
    for oid, otype, rid in objects:
        init.append(f"(objectType {oid} {otype}Type)")
        init.append(f"(inReceptacle {oid} {rid})")
        init.append(f"(objectAtLocation {oid} {loc_of[rid]})")
        init.append(f"(pickupable {oid})")
        kind = catalog.OBJECTS[otype]
        init += [f"({p} {oid})" for p in ("cleanable", "heatable", "coolable") if kind.has(p)]
    for oid, lamp, rid in lamps:
        init.append(f"(objectType {oid} {lamp}Type)")
        init.append(f"(inReceptacle {oid} {rid})")
        init.append(f"(objectAtLocation {oid} {loc_of[rid]})")
        init.append(f"(toggleable {oid})")
    for rtype in rtypes:
        for otype in otypes:
            if otype in catalog.OBJECTS and rtype in catalog.OBJECTS[otype].places:
                init.append(f"(canContain {rtype}Type {otype}Type)")
    body = "\n        ".join
    return (
        "(define (problem plan_household)\n"
        "    (:domain alfred)\n"
        f"    (:objects\n        {body(decl)}\n    )\n"
        f"    (:init\n        {body(init)}\n    )\n"
        f"{goal_pddl.strip()}\n"
    )


class GameChecker:
    """Plans games with TextWorld's PDDL engine and Fast Downward (one engine, reused).

    :meth:`solve` returns the walkthrough of a game in the command names the agent will
    see (ALFWorld's demangled names, e.g. ``take apple 1 from cabinet 3``), or ``None``
    when the game is already won, has no plan, or needs more than ``max_plan_length``
    steps.

    It builds the planning state the way ``textworld.envs.PddlEnv`` does on ``load``
    (``PddlState`` + ``replan``, which is what TextWorld reports as ``policy_commands``),
    but parses ALFWorld's domain and grammar once (the per-game grammar only differs by
    the goal sentence, which planning does not read), skips the text rendering, and
    searches :attr:`Problem.planning_text`. The tests replay walkthroughs through the
    real environment.
    """

    def __init__(self, max_plan_length: int = MAX_PLAN_LENGTH) -> None:
        self.max_plan_length = max_plan_length
        self._engine: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._engine is None:
            try:
                import fast_downward
                from textworld.envs.pddl import logic as pddl_logic
            except ImportError as exc:  # pragma: no cover - depends on the machine
                raise ConfigError(
                    "the household environment needs the `alfworld` and `textworld` packages "
                    "(pip install 'deltamem[envs]')") from exc
            domain, grammar, _ = _require_alfworld()
            self._engine = (fast_downward.load_lib(),
                            pddl_logic.GameLogic(domain=domain, grammar=grammar))
        return self._engine

    def solve(self, problem: Problem) -> list[str] | None:
        """The plan of ``problem.planning_text`` in the agent's names, or ``None``."""
        from textworld.envs.pddl import logic as pddl_logic
        from textworld.generator.game import EntityInfo

        lib, logic = self._load()
        state = pddl_logic.PddlState(lib, problem.planning_text, logic)
        if state.check_goal():
            return None
        infos = {v.name: EntityInfo(v.name, v.type) for f in state.facts for v in f.arguments}
        for info in infos.values():
            info.name = problem.names.get(info.id, info.id)
        plan = list(state.replan(infos))
        if not plan or len(plan) > self.max_plan_length:
            return None
        return plan


def generate_game(split: str, task_type: str, key: str, *,
                  checker: GameChecker | None = None,
                  max_attempts: int = MAX_ATTEMPTS) -> GeneratedGame:
    """Generate the solvable game of ``(split, task_type, key)``.

    Deterministic: the same arguments give the same game (byte for byte once written).
    Attempt ``a`` uses ``check_random_state(sub_seed(split, task_type, f"{key}#{a}"))``; the first
    attempt whose game the planner solves is kept. A key ending in ``@a`` or ``@b`` draws
    the game under that placement regime (:func:`home_type`; a drifting stream).

    Raises:
        InvalidInputError: unknown split or task type.
        ConfigError: ``alfworld`` / ``textworld`` are not installed.
        RuntimeError: no attempt out of ``max_attempts`` gave a solvable game.
    """
    if split not in catalog.SPLITS:
        raise InvalidInputError(f"unknown split {split!r}; expected one of {catalog.SPLITS}")
    if task_type not in catalog.TASK_TYPES:
        raise InvalidInputError(
            f"unknown task type {task_type!r}; expected one of {catalog.TASK_TYPES}")
    domain, grammar, _ = _require_alfworld()
    checker = checker or GameChecker()
    regime = placement_regime(key)
    for attempt in range(max_attempts):
        rng = check_random_state(sub_seed(split, task_type, f"{key}#{attempt}"))
        try:
            problem = build_problem(split, task_type, rng, regime)
        except LookupError:
            continue
        plan = checker.solve(problem)
        if plan is None:
            continue
        traj = dict(problem.traj)
        game = {
            "pddl_domain": domain,
            "grammar": grammar.replace("UNKNOWN GOAL", traj["goal"]),
            "pddl_problem": problem.text,
            "solvable": True,
            "walkthrough": plan,
        }
        traj["key"] = key
        traj["attempt"] = attempt
        return GeneratedGame(game=game, traj=traj, attempt=attempt)
    raise RuntimeError(
        f"no solvable game for {split}/{task_type}/{key} in {max_attempts} attempts")


def placement_regime(key: str) -> str | None:
    """The placement regime a game key asks for (``"3-7@b"`` → ``"b"``), ``None`` for none."""
    base, sep, regime = key.rpartition("@")
    if not sep:
        return None
    if not base or regime not in PLACEMENT_REGIMES:
        raise InvalidInputError(f"bad placement regime in game key {key!r}: use <key>@a or "
                                "<key>@b")
    return regime


def write_game(game: GeneratedGame, directory: str | Path) -> Path:
    """Write ``game.tw-pddl`` and ``traj_data.json`` into ``directory``; return the game path.

    The JSON is written with sorted keys, so the same game gives the same bytes.
    Files are written to a temporary name and renamed, so a reader never sees half a file;
    the temporary name carries the process id, so two runs sharing a game cache (two memory
    systems on the same games) never write into the same temporary file.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in (("traj_data.json", game.traj), ("game.tw-pddl", game.game)):
        tmp = directory / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")
        tmp.replace(directory / name)
    return directory / "game.tw-pddl"
