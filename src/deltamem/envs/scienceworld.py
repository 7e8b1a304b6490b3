"""ScienceWorld adapter (Wang et al., 2022): 30 elementary-science tasks in a text simulator.

Needs ``pip install scienceworld`` (it ships its own jar) and Java >= 11 on
``PATH``. The JVM starts on the first :meth:`ScienceWorldEnv.reset`, not in the
constructor, and stops in :meth:`~ScienceWorldEnv.close`.

Task ids are ``"<task name>:<variation>"`` (``"find-animal:225"``). Splits map to
the package's variation splits: ``seen`` = dev variations, ``unseen`` = test
variations, ``train`` = train variations. Which variations form an episode stream
is decided by :func:`sample_variations` (two samplers, both documented there);
it needs no JVM, because the package's splits are contiguous ranges
(train, then dev, then test) whose sizes are tabulated here (checked against the
package by ``tests/envs/test_scienceworld.py``).

Memory cap: ``scienceworld.ScienceWorldEnv`` starts the JVM through py4j's
``launch_gateway`` without any JVM-option parameter. This adapter therefore
sets ``JDK_JAVA_OPTIONS`` (read by every JDK >= 9 ``java`` launcher) to
``-Xmx<jvm_max_heap> -XX:+UseSerialGC`` while the package starts the gateway,
then restores the variable. ``jvm_max_heap=None`` leaves the JVM defaults
(a quarter of the machine's RAM).

Measured on 2 cores (scienceworld 1.2.3, OpenJDK 17, ``-Xmx512m``): JVM start
9-14 s; ``reset`` median 1.0 s (max 2 s); ``step`` median 26 ms (4 ms for
simple actions, up to 0.8 s for ones that advance the simulation);
:meth:`~ScienceWorldEnv.admissible_actions` median 116 ms (15-610 ms) for
100-450 entries; JVM resident memory 290-490 MB.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.errors import ConfigError
from deltamem.seeding import check_random_state, sub_seed
from deltamem.types import Task

__all__ = [
    "INVALID_ACTION",
    "PAPER_SEEN",
    "PAPER_UNSEEN",
    "ROOMS",
    "TASKS",
    "ScienceWorldEnv",
    "default_max_steps",
    "parse_task_id",
    "sample_variations",
    "teleport_walks",
]

log = logging.getLogger(__name__)

#: what the engine answers to an action it cannot parse or ground
INVALID_ACTION = "No known action matches that input."
_AMBIGUOUS = "Ambiguous request"

#: task name -> (official task id, train, dev, test variation counts); scienceworld 1.2.x.
#: Variations are contiguous: train = [0, n_train), dev next, test last.
TASKS: dict[str, tuple[str, int, int, int]] = {
    "boil": ("1-1", 14, 7, 9),
    "melt": ("1-2", 14, 7, 9),
    "freeze": ("1-3", 14, 7, 9),
    "change-the-state-of-matter-of": ("1-4", 14, 7, 9),
    "use-thermometer": ("2-1", 270, 135, 135),
    "measure-melting-point-known-substance": ("2-2", 218, 109, 109),
    "measure-melting-point-unknown-substance": ("2-3", 150, 75, 75),
    "power-component": ("3-1", 10, 5, 5),
    "power-component-renewable-vs-nonrenewable-energy": ("3-2", 10, 5, 5),
    "test-conductivity": ("3-3", 450, 225, 225),
    "test-conductivity-of-unknown-substances": ("3-4", 300, 150, 150),
    "find-living-thing": ("4-1", 150, 75, 75),
    "find-non-living-thing": ("4-2", 150, 75, 75),
    "find-plant": ("4-3", 150, 75, 75),
    "find-animal": ("4-4", 150, 75, 75),
    "grow-plant": ("5-1", 62, 31, 33),
    "grow-fruit": ("5-2", 62, 31, 33),
    "chemistry-mix": ("6-1", 16, 8, 8),
    "chemistry-mix-paint-secondary-color": ("6-2", 18, 9, 9),
    "chemistry-mix-paint-tertiary-color": ("6-3", 18, 9, 9),
    "lifespan-longest-lived": ("7-1", 62, 31, 32),
    "lifespan-shortest-lived": ("7-2", 62, 31, 32),
    "lifespan-longest-lived-then-shortest-lived": ("7-3", 62, 31, 32),
    "identify-life-stages-1": ("8-1", 6, 3, 5),
    "identify-life-stages-2": ("8-2", 4, 2, 4),
    "inclined-plane-determine-angle": ("9-1", 84, 42, 42),
    "inclined-plane-friction-named-surfaces": ("9-2", 692, 346, 348),
    "inclined-plane-friction-unnamed-surfaces": ("9-3", 80, 40, 42),
    "mendelian-genetics-known-plant": ("10-1", 60, 30, 30),
    "mendelian-genetics-unknown-plant": ("10-2", 240, 120, 120),
}
_BY_CODE = {code: name for name, (code, *_rest) in TASKS.items()}
_SPLIT_COLUMN = {"train": 0, "seen": 1, "unseen": 2}

#: Step caps. The 24 tasks of the paper's episode set use the per-task caps
#: published with that set (ETO, Song et al. 2024, ``max_steps.json``). The six
#: other tasks: ``measure-melting-point-unknown-substance`` takes the cap of its
#: known-substance twin; the inclined-plane and Mendelian-genetics caps are about
#: 1.2x the gold-path length of variation 0 (55, 51, 178, 130, 129 actions),
#: rounded up to a multiple of 10.
_MAX_STEPS: dict[str, int] = {
    "boil": 100, "melt": 80, "freeze": 80, "change-the-state-of-matter-of": 80,
    "use-thermometer": 30, "measure-melting-point-known-substance": 120,
    "measure-melting-point-unknown-substance": 120,
    "power-component": 20, "power-component-renewable-vs-nonrenewable-energy": 30,
    "test-conductivity": 30, "test-conductivity-of-unknown-substances": 30,
    "find-living-thing": 15, "find-non-living-thing": 15, "find-plant": 15, "find-animal": 15,
    "grow-plant": 30, "grow-fruit": 60,
    "chemistry-mix": 60, "chemistry-mix-paint-secondary-color": 15,
    "chemistry-mix-paint-tertiary-color": 30,
    "lifespan-longest-lived": 10, "lifespan-shortest-lived": 10,
    "lifespan-longest-lived-then-shortest-lived": 12,
    "identify-life-stages-1": 30, "identify-life-stages-2": 30,
    "inclined-plane-determine-angle": 70, "inclined-plane-friction-named-surfaces": 70,
    "inclined-plane-friction-unnamed-surfaces": 220,
    "mendelian-genetics-known-plant": 160, "mendelian-genetics-unknown-plant": 160,
}

# The paper's Seen episodes: the 194 dev episodes of ETO's ``dev_indices.json``
# (Song et al., 2024), in that file's order, as "<task id>:<variation>".
_PAPER_SEEN_CODES = """
3-4:418 4-1:186 2-2:326 4-4:193 5-1:65 4-3:179 3-3:587 4-4:218 2-1:384 3-3:479 4-4:159
3-3:528 3-4:413 3-4:352 2-1:385 7-2:69 4-4:211 3-4:313 4-3:175 3-3:474 3-3:662 3-4:386
1-2:14 4-3:209 3-3:579 2-1:314 1-1:14 2-2:280 2-1:378 3-3:655 4-1:161 3-4:448 2-1:360
3-4:389 2-2:287 2-1:364 3-3:640 3-4:409 3-3:523 6-3:25 2-1:284 3-2:14 3-3:485 2-2:286
4-1:180 5-2:85 4-3:177 4-1:209 3-4:394 1-2:18 4-4:173 2-2:281 4-4:221 1-4:14 1-2:16
4-1:216 5-2:90 3-4:376 7-3:87 4-4:213 2-2:300 4-3:203 2-1:285 4-4:216 4-4:188 4-4:176
4-3:206 5-1:77 2-2:253 7-2:87 2-2:299 2-1:358 2-2:292 2-1:291 4-1:214 7-3:67 1-4:16 7-1:83
4-1:221 2-2:325 7-2:91 7-2:84 4-2:150 5-1:84 5-1:68 4-3:181 7-2:76 4-1:202 8-1:7 7-1:88
4-1:206 4-2:184 7-3:68 4-1:218 4-2:187 1-1:15 7-1:84 7-1:66 4-2:214 6-2:25 3-1:11 4-3:164
7-3:66 4-3:154 4-2:198 7-1:68 4-3:165 4-2:209 4-2:185 1-1:20 6-3:21 7-2:80 7-3:64 4-2:179
7-3:78 4-2:192 1-1:17 1-2:20 5-2:72 7-3:69 4-2:158 5-1:64 5-2:88 1-4:17 7-3:80 5-1:85
7-1:80 7-2:82 5-1:86 1-4:18 6-3:26 5-1:78 1-2:19 6-1:21 5-2:65 7-3:72 6-2:20 5-1:88 1-2:15
7-3:85 7-1:78 5-1:87 6-3:23 7-2:70 7-2:85 7-1:72 6-1:19 6-2:18 7-1:73 1-4:15 5-2:84 1-4:19
7-1:92 6-2:22 5-2:80 5-2:71 8-2:5 8-2:4 1-3:19 7-2:71 3-2:10 1-3:15 5-2:62 6-2:26 1-3:18
8-1:8 5-2:68 8-1:6 6-1:18 1-3:16 6-2:23 6-3:24 1-2:17 6-3:22 1-1:16 6-3:19 6-3:18 3-1:13
6-1:23 3-1:12 6-2:19 3-2:13 1-3:17 6-2:21 1-1:19 1-3:14 6-1:20 6-2:24 1-3:20 1-4:20 6-1:17
6-3:20 6-1:16 6-1:22
"""

# The paper's Unseen episodes follow ETO's ``test_indices.json``: for each of these 24
# tasks, in this order, the first min(10, n_test) test variations in ascending order.
_PAPER_UNSEEN_ORDER = (
    "boil", "change-the-state-of-matter-of", "freeze", "melt",
    "measure-melting-point-known-substance", "use-thermometer",
    "power-component", "power-component-renewable-vs-nonrenewable-energy",
    "test-conductivity", "test-conductivity-of-unknown-substances",
    "find-animal", "find-living-thing", "find-non-living-thing", "find-plant",
    "grow-fruit", "grow-plant",
    "chemistry-mix", "chemistry-mix-paint-secondary-color", "chemistry-mix-paint-tertiary-color",
    "lifespan-longest-lived", "lifespan-longest-lived-then-shortest-lived",
    "lifespan-shortest-lived", "identify-life-stages-1", "identify-life-stages-2",
)


def _variation_range(name: str, split: str) -> range:
    _, n_train, n_dev, n_test = TASKS[name]
    if split == "train":
        return range(0, n_train)
    if split == "seen":
        return range(n_train, n_train + n_dev)
    return range(n_train + n_dev, n_train + n_dev + n_test)


def _decode(codes: str) -> tuple[tuple[str, int], ...]:
    out = []
    for tok in codes.split():
        code, _, var = tok.partition(":")
        out.append((_BY_CODE[code], int(var)))
    return tuple(out)


#: the paper's 194 Seen episodes (task name, variation), reference order
PAPER_SEEN: tuple[tuple[str, int], ...] = _decode(_PAPER_SEEN_CODES)
#: the paper's 211 Unseen episodes (task name, variation), reference order
PAPER_UNSEEN: tuple[tuple[str, int], ...] = tuple(
    (name, v) for name in _PAPER_UNSEEN_ORDER for v in _variation_range(name, "unseen")[:10]
)
_PAPER_TASKS = tuple(sorted(_PAPER_UNSEEN_ORDER, key=list(TASKS).index))

Sampler = Literal["paper", "balanced"]
_DEFAULT_N = {"seen": 194, "unseen": 211, "train": 200}


def _water_fill(names: tuple[str, ...], split: str, n: int) -> dict[str, int]:
    """Round-robin one episode at a time over ``names``, skipping exhausted tasks."""
    avail = {name: len(_variation_range(name, split)) for name in names}
    if n > sum(avail.values()):
        raise ConfigError(f"split {split!r} has only {sum(avail.values())} variations, "
                          f"{n} requested")
    quota = dict.fromkeys(names, 0)
    left = n
    while left:
        for name in names:
            if left and quota[name] < avail[name]:
                quota[name] += 1
                left -= 1
    return quota


def sample_variations(
    split: str, *, sampler: Sampler = "paper", seed: int = 0, n: int | None = None
) -> list[tuple[str, int]]:
    """The ordered ``(task name, variation)`` episode stream of ``split``.

    Deterministic for a given ``(split, sampler, seed, n)`` and independent of the JVM.

    ``sampler="paper"`` (default) reproduces the paper's episodes (Seen = 194
    dev, Unseen = 211 test, over the 24 task types the paper names; the set
    published by ETO, Song et al. 2024, cited by the paper for its settings):

    * ``seen``: :data:`PAPER_SEEN`; ``unseen``: :data:`PAPER_UNSEEN`.
    * ``train``: the ``balanced`` rule below over the same 24 tasks.
    * ``seed=0`` keeps the reference order; any other seed shuffles it with
      ``random.Random(seed)``. ``n`` (if given) keeps the first ``n``.

    ``sampler="balanced"`` spreads ``n`` episodes (default 194 seen, 211 unseen,
    200 train) over all 30 tasks:

    * allocation: water-filling, one episode at a time round-robin over the tasks
      in official task-id order (1-1, 1-2, ..., 10-2), skipping a task once its
      split has no variation left, until exactly ``n`` are allocated (194 seen
      gives 6 or 7 per task, 5 to each power-component task, 3 and 2 to the
      life-stage tasks; 211 unseen gives 7 or 8 per task, 5 to each
      power-component task, 5 and 4 to the life-stage tasks);
    * selection: each task's ``k`` variations are the first ``k`` of its split's
      variations shuffled by ``random.Random(f"{seed}:{split}:{task}")``;
    * order: all chosen episodes shuffled by ``random.Random(seed)``.

    Raises:
        ConfigError: unknown split or sampler, or ``n`` larger than the split.
    """
    _check_split(split)
    if n is not None and n < 0:
        raise ConfigError(f"n must be >= 0, got {n}")
    if sampler == "paper":
        if split == "train":
            return _balanced(_PAPER_TASKS, split, seed, _DEFAULT_N["train"] if n is None else n)
        ref = list(PAPER_SEEN if split == "seen" else PAPER_UNSEEN)
        if n is not None and n > len(ref):
            raise ConfigError(f"the paper's {split} set has {len(ref)} episodes, {n} requested")
        if seed != 0:
            check_random_state(seed).shuffle(ref)
        return ref[:n] if n is not None else ref
    if sampler == "balanced":
        return _balanced(tuple(TASKS), split, seed, _DEFAULT_N[split] if n is None else n)
    raise ConfigError(f"unknown ScienceWorld sampler {sampler!r}; known: paper, balanced")


def _balanced(names: tuple[str, ...], split: str, seed: int, n: int) -> list[tuple[str, int]]:
    quota = _water_fill(names, split, n)
    chosen: list[tuple[str, int]] = []
    for name in names:
        pool = _shuffled_variations(name, split, seed)
        chosen.extend((name, v) for v in sorted(pool[: quota[name]]))
    check_random_state(seed).shuffle(chosen)
    return chosen


def _check_split(split: str) -> None:
    if split not in _SPLIT_COLUMN:
        raise ConfigError(f"unknown ScienceWorld split {split!r}; known: seen, unseen, train")


def _shuffled_variations(name: str, split: str, seed: int) -> list[int]:
    """``name``'s variations in ``split``, shuffled by
    ``random.Random(f"{seed}:{split}:{name}")``."""
    pool = list(_variation_range(name, split))
    check_random_state(sub_seed(seed, split, name, sep=":")).shuffle(pool)
    return pool


def _round_robin(names: tuple[str, ...], split: str, seed: int) -> list[tuple[str, int]]:
    """Every variation of ``names`` in ``split``: each task's variations shuffled by
    ``random.Random(f"{seed}:{split}:{task}")``, then taken one task at a time in the
    order given, so any first ``n`` episodes cover the tasks evenly."""
    _check_split(split)
    pools = [[(name, v) for v in _shuffled_variations(name, split, seed)] for name in names]
    out: list[tuple[str, int]] = []
    for i in range(max(len(p) for p in pools)):
        out.extend(p[i] for p in pools if i < len(p))
    return out


def _task_names(tasks: str | Sequence[str] | None) -> tuple[str, ...]:
    """The ``tasks`` option as a tuple of known task names (empty: all tasks)."""
    if tasks is None:
        return ()
    names = tasks.split(",") if isinstance(tasks, str) else list(tasks)
    out = tuple(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))
    unknown = [n for n in out if n not in TASKS]
    if unknown:
        raise ConfigError(f"unknown ScienceWorld task(s) {', '.join(unknown)}; "
                          f"known: {', '.join(TASKS)}")
    if not out:
        raise ConfigError("tasks names no ScienceWorld task")
    return out


def default_max_steps(task_name: str) -> int:
    """The documented step cap of ``task_name`` (see the ``_MAX_STEPS`` table)."""
    try:
        return _MAX_STEPS[task_name]
    except KeyError:
        raise ConfigError(f"unknown ScienceWorld task {task_name!r}") from None


def parse_task_id(task_id: str) -> tuple[str, int]:
    """``"find-animal:225"`` -> ``("find-animal", 225)``; :class:`ConfigError` if invalid."""
    name, sep, var = str(task_id).rpartition(":")
    if not sep or name not in TASKS or not var.isdigit():
        raise ConfigError(f"bad ScienceWorld task id {task_id!r}; expected "
                          f"'<task name>:<variation>' with a task name among: {', '.join(TASKS)}")
    variation = int(var)
    _, a, b, c = TASKS[name]
    if variation >= a + b + c:
        raise ConfigError(f"task {name!r} has variations 0..{a + b + c - 1}, got {variation}")
    return name, variation


#: the rooms of ScienceWorld's house (the paper's agent instruction, App. C.1)
ROOMS = ("kitchen", "foundry", "workshop", "bathroom", "outside", "living room", "bedroom",
         "greenhouse", "art studio", "hallway")
_OPEN_DOOR = "open door to "
_GO_TO = "go to "


def teleport_walks(actions: Sequence[str]) -> list[str]:
    """``actions`` with each walk through doors made one teleport.

    A walk is a maximal run of ``open door to ROOM`` / ``go to ROOM`` actions (ROOM one of
    :data:`ROOMS`) holding at least one ``go to``; it becomes ``teleport to`` the last room
    it went to. Everything else is kept in order ("look around" between two walks ends the
    first). The package's gold paths walk from room to room even under the ``easy``
    simplification, whose ``teleportAction`` reaches any room in one step (the paper's
    agent instruction: "You can teleport to any room in one step"), so a gold path can be
    longer than the task's step cap (``boil`` 140 actions against 100,
    ``chemistry-mix-paint-secondary-color`` 21 against 15).
    """
    out: list[str] = []
    walk_to: str | None = None
    in_walk = False
    for action in actions:
        low = " ".join(action.lower().split())
        room = None
        if low.startswith(_OPEN_DOOR) and low[len(_OPEN_DOOR):] in ROOMS:
            room = ""
        elif low.startswith(_GO_TO) and low[len(_GO_TO):] in ROOMS:
            room = low[len(_GO_TO):]
        if room is not None:
            in_walk = True
            walk_to = room or walk_to
            continue
        if in_walk and walk_to:  # doors opened without going through need no teleport
            out.append(f"teleport to {walk_to}")
        in_walk, walk_to = False, None
        out.append(action)
    if in_walk and walk_to:
        out.append(f"teleport to {walk_to}")
    return out


#: verbs that only look: after one of them, an action the engine refused is still refused
_OBSERVING = frozenset({"look", "examine", "read", "inventory"})

_JVM_ENV_LOCK = threading.Lock()
Admissible = Literal["valid", "templates", "none"]


class ScienceWorldEnv(Environment):
    """ScienceWorld behind the :class:`Environment` contract.

    Args:
        simplification: the package's simplification string (``"easy"`` =
            teleportAction, openDoors, selfWateringFlowerPots, noElectricalAction
            except on electrical tasks, where ``noElectricalAction`` is dropped).
        jvm_max_heap: JVM ``-Xmx`` value (``"512m"``, ``"1g"``) or ``None`` for the
            JVM default; see the module docstring for how it is applied.
        sampler: episode selection, see :func:`sample_variations`.
        max_steps: step cap: ``None`` = the per-task table
            (:func:`default_max_steps`), an int for every task, or a mapping
            task name -> cap (missing names use the table).
        score_mode: ``"best"`` (default, as the reference evaluation): the score
            is the best progress reached so far in the episode; ``"current"``: the
            latest progress, 0 after a fatal mistake.
        admissible: what :meth:`admissible_actions` lists: ``"valid"`` = the
            engine's valid action-object combinations (15-450 ms per call, cached
            until the next step), ``"templates"`` = the action templates with
            ``<OBJ>`` placeholders, ``"none"`` = nothing (unknown). The engine also
            lists actions on things it cannot reach (``focus on ice cream`` while the
            ice cream is in a closed freezer) and answers them :data:`INVALID_ACTION`;
            such an action is left out of the ``"valid"`` list until an action that
            is not only a look (``look``, ``examine``, ``read``, ``inventory``) succeeds.
        admissible_cap: with ``"valid"``, a state with more valid combinations
            than this lists the templates instead (``None``: no cap).
        resolve_ambiguity: when the engine answers "Ambiguous request ..." it
            waits for a number; ``True`` answers ``0`` (its first reading) in the
            same step and returns that outcome.
        teleport_solution: :meth:`solution` (the demonstrations of ``--train-agent
            expert``) teleports where the gold path walks through doors, when the
            simplification allows it (:func:`teleport_walks`): on the first 40 ``train``
            variations of eight tasks (seed 0) the demonstrations won 38 instead of 33
            (``docs/design-notes.md``). ``False``: the package's gold path as it is.
        tasks: keep only these task names (a sequence, or one comma-separated
            string as ``-e tasks=boil,melt`` gives it): the stream of a split is then
            every variation of those tasks in that split, each task's shuffled by
            ``seed``, taken one task at a time in the order given (``sampler`` is
            not used). ``None``: all tasks of the sampler.

    Episodes: goal = the task description; scene = the first ``look around``
    text (the starting room and what is in it), also the first observation.
    Score = engine score / 100 clipped to [0, 1]. success = the engine marks the
    task completed at score 100. done = success, a fatal mistake (negative
    engine score), or the step cap. valid = False when the engine answers
    :data:`INVALID_ACTION`.
    """

    name = "scienceworld"
    domain = "scienceworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits = ("seen", "unseen", "train")

    def __init__(
        self,
        simplification: str = "easy",
        jvm_max_heap: str | None = "512m",
        sampler: Sampler = "paper",
        max_steps: int | Mapping[str, int] | None = None,
        score_mode: Literal["best", "current"] = "best",
        admissible: Admissible = "valid",
        admissible_cap: int | None = None,
        resolve_ambiguity: bool = True,
        tasks: str | Sequence[str] | None = None,
        teleport_solution: bool = True,
    ) -> None:
        self.tasks = _task_names(tasks)
        self.teleport_solution = teleport_solution
        self.simplification = simplification
        self.jvm_max_heap = jvm_max_heap
        self.sampler = sampler
        self.max_steps_override = max_steps
        self.score_mode = score_mode
        self.admissible = admissible
        self.admissible_cap = admissible_cap
        self.resolve_ambiguity = resolve_ambiguity
        self._sw: Any = None
        self._task: Task | None = None
        self._done = False
        self._steps = 0
        self._best = 0
        self._cap = 0
        self._admissible_cache: list[str] | None = None
        self._refused: set[str] = set()

    # -- engine ------------------------------------------------------------------------

    def _validate(self) -> None:
        if self.score_mode not in ("best", "current"):
            raise ConfigError(f"score_mode must be 'best' or 'current', got {self.score_mode!r}")
        if self.admissible not in ("valid", "templates", "none"):
            raise ConfigError(f"admissible must be valid/templates/none, got {self.admissible!r}")
        if self.admissible_cap is not None and self.admissible_cap < 1:
            raise ConfigError(f"admissible_cap must be >= 1, got {self.admissible_cap}")

    def _engine(self) -> Any:
        if self._sw is not None:
            return self._sw
        self._validate()
        try:
            from scienceworld import ScienceWorldEnv as _PackageEnv
        except ImportError as e:
            raise ConfigError(
                "ScienceWorld needs the 'scienceworld' package: pip install scienceworld "
                "(or deltamem[envs])"
            ) from e
        if shutil.which("java") is None:
            raise ConfigError("ScienceWorld needs Java >= 11 on PATH ('java' not found)")
        opts = [f"-Xmx{self.jvm_max_heap}", "-XX:+UseSerialGC"] if self.jvm_max_heap else []
        with _JVM_ENV_LOCK:
            before = os.environ.get("JDK_JAVA_OPTIONS")
            if opts:
                os.environ["JDK_JAVA_OPTIONS"] = " ".join([before or "", *opts]).strip()
            try:
                # our own step counter enforces the cap; keep the engine's out of the way
                self._sw = _PackageEnv("", envStepLimit=1_000_000)
            finally:
                if before is None:
                    os.environ.pop("JDK_JAVA_OPTIONS", None)
                else:
                    os.environ["JDK_JAVA_OPTIONS"] = before
        return self._sw

    @property
    def jvm_pid(self) -> int | None:
        """Process id of the running JVM, ``None`` before the first reset / after close."""
        if self._sw is None:
            return None
        return int(self._sw._gateway.java_process.pid)

    # -- contract ----------------------------------------------------------------------

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """Task ids of ``split`` in stream order (see :func:`sample_variations` and ``tasks``)."""
        if self.tasks:
            stream = _round_robin(self.tasks, split, seed)
        else:
            stream = sample_variations(split, sampler=self.sampler, seed=seed)
        return [f"{name}:{v}" for name, v in stream]

    def task_max_steps(self, task_name: str) -> int:
        """The step cap this adapter applies to ``task_name``."""
        cap = self.max_steps_override
        if isinstance(cap, int):
            value = cap
        elif isinstance(cap, Mapping) and task_name in cap:
            value = int(cap[task_name])
        else:
            value = default_max_steps(task_name)
        if value < 1:
            raise ConfigError(f"step cap must be >= 1, got {value} for {task_name!r}")
        return value

    def reset(self, task_id: str) -> Task:
        """Load the variation and return the task; starts the JVM on first use."""
        name, variation = parse_task_id(task_id)
        cap = self.task_max_steps(name)
        sw = self._engine()
        sw.load(name, variation, self.simplification, generateGoldPath=False)
        observation, _info = sw.reset()
        goal = sw.get_task_description()
        split = next((s for s in ("train", "seen", "unseen")
                      if variation in _variation_range(name, s)), "")
        code = TASKS[name][0]
        self._task = Task(
            id=f"{name}:{variation}",
            goal=goal.strip(),
            scene=observation.strip(),
            domain=self.domain,
            split=split,
            observation=observation.strip(),
            max_steps=cap,
            meta={"task_type": name, "task_code": code, "variation": variation,
                  "simplification": self.simplification},
        )
        self._done = False
        self._steps = 0
        self._best = 0
        self._cap = cap
        self._admissible_cache = None
        self._refused = set()
        return self._task

    def admissible_actions(self) -> list[str]:
        """Admissible actions of the current state (see the ``admissible`` argument)."""
        sw = self._require()
        if self.admissible == "none":
            return []
        if self.admissible == "templates":
            return self._templates(sw)
        if self._admissible_cache is None:
            valid = sorted(set(sw.get_valid_action_object_combinations()) - self._refused)
            if self.admissible_cap is not None and len(valid) > self.admissible_cap:
                log.info("%d valid actions > cap %d: listing templates", len(valid),
                         self.admissible_cap)
                valid = self._templates(sw)
            self._admissible_cache = valid
        return list(self._admissible_cache)

    @staticmethod
    def _templates(sw: Any) -> list[str]:
        out = []
        for template in sw.get_possible_actions():
            if template == "reset task":  # would restart the episode behind our back
                continue
            out.append(template.replace("OBJ", "<OBJ>"))
        return sorted(out)

    def step(self, action: str) -> Transition:
        """Send ``action`` to the engine (see the class docstring for the outcome)."""
        sw = self._require()
        if self._done:
            raise RuntimeError("episode is over; call reset() first")
        server = sw.server
        observation = str(server.step(action))
        if self.resolve_ambiguity and observation.startswith(_AMBIGUOUS):
            observation = str(server.step("0"))
        valid = not observation.startswith(INVALID_ACTION)
        if not valid:
            self._refused.add(action)
        elif action.split()[:1] and action.split()[0] not in _OBSERVING:
            self._refused.clear()  # the world may have changed: what was refused may work
        raw = round(100 * float(server.getScore()))
        completed = bool(server.getCompleted())
        self._steps += 1
        self._best = max(self._best, raw)
        self._admissible_cache = None
        success = completed and raw >= 100
        failed = raw < 0
        self._done = success or failed or self._steps >= self._cap
        shown = self._best if self.score_mode == "best" else max(raw, 0)
        score = min(max(shown / 100.0, 0.0), 1.0)
        if not math.isfinite(score):  # pragma: no cover - engine contract
            raise RuntimeError(f"engine returned a non-finite score {raw!r}")
        return Transition(observation=observation.strip(), score=score, done=self._done,
                          success=success, valid=valid)

    def max_steps(self, task: Task) -> int:
        return task.max_steps or self.task_max_steps(parse_task_id(task.id)[0])

    def gold_actions(self, task_id: str) -> list[str]:
        """The package's gold action sequence for ``task_id`` (slow: 1-40 s).

        Leaves the engine on that task; call :meth:`reset` before stepping.
        """
        name, variation = parse_task_id(task_id)
        sw = self._engine()
        sw.load(name, variation, self.simplification, generateGoldPath=True)
        gold = list(sw.get_gold_action_sequence())
        if gold and gold[0].startswith("ERROR"):
            raise RuntimeError(f"no gold path for {task_id!r}: {gold[0]}")
        self._task = None
        return gold

    def solution(self) -> list[str] | None:
        """The gold action sequence of the current task (see :meth:`Environment.solution`),
        with its walks through doors made teleports (:func:`teleport_walks`) when the
        simplification allows teleporting (``easy`` or ``teleportAction``) and
        ``teleport_solution`` is on.

        Computing it reloads the task, so the task is reset again afterwards: call it
        before the first step. ``None`` when the package has no gold path for it.
        """
        if self._task is None:
            raise RuntimeError("solution() before reset()")
        task_id = self._task.id
        try:
            gold = self.gold_actions(task_id)
        except RuntimeError:
            gold = []
        self.reset(task_id)
        if gold and self.teleport_solution and self.can_teleport:
            gold = teleport_walks(gold)
        return gold or None

    @property
    def can_teleport(self) -> bool:
        """Whether the simplification offers ``teleport to ROOM`` (``easy``/``teleportAction``)."""
        parts = {p.strip() for p in self.simplification.split(",")}
        return bool(parts & {"easy", "teleportAction"})

    def close(self) -> None:
        """Stop the JVM (waits up to 10 s, then kills the process this adapter started)."""
        sw, self._sw = self._sw, None
        self._task = None
        if sw is None:
            return
        proc = sw._gateway.java_process
        try:
            sw.close()
        finally:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def _require(self) -> Any:
        if self._sw is None or self._task is None:
            raise RuntimeError("no episode in progress; call reset(task_id) first")
        return self._sw

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments (for run records)."""
        return {
            "simplification": self.simplification, "jvm_max_heap": self.jvm_max_heap,
            "sampler": self.sampler, "max_steps": self.max_steps_override,
            "score_mode": self.score_mode, "admissible": self.admissible,
            "admissible_cap": self.admissible_cap, "resolve_ambiguity": self.resolve_ambiguity,
            "teleport_solution": self.teleport_solution,
        }
