"""TextWorld adapter: games generated offline by seed with TextWorld's challenge generators.

Needs ``pip install textworld`` (>= 1.6; it bundles the Inform 7 compiler).
Three challenge families (``textworld.challenges``):

* ``treasure`` = ``tw-treasure_hunter``: find and take the object the objective
  names; taking the wrong one loses. ``difficulty`` = level 1-30 (1-10: 5 rooms,
  no doors; 11-20: 10 rooms with doors and containers; 21-30: 20 rooms with
  locked doors/containers; quest length grows with the level).
* ``coin`` = ``tw-coin_collector``: walk to the coin and take it.
  ``difficulty`` = level 1-300 (quest length ``(level-1) % 100 + 1``; every
  further hundred adds distractor rooms; at most 100 rooms in all).
* ``cooking`` = ``tw-cooking``: read the cookbook, gather, prepare and eat the
  meal. ``difficulty`` 1-5 picks the skills of :data:`COOKING_LEVELS` (our own
  ladder, not an official one).

Splits use disjoint seed ranges: game ``i`` (``0 <= i < n_games``) of split
``train`` / ``seen`` / ``unseen`` has seed ``1_000_000`` / ``2_000_000`` /
``3_000_000`` ``+ i``. For ``cooking``, ``train`` and ``seen`` also draw foods
and preparations from the generator's ``train`` food split and ``unseen`` from
its ``test`` food split, so unseen cooking games use foods or preparations never
seen in training.

Games are compiled once into ``cache_dir`` (default
``$XDG_CACHE_HOME/deltamem/textworld``, else ``~/.cache/deltamem/textworld``),
under a sub-folder named by the TextWorld version. Generation runs in a child
Python with ``PYTHONHASHSEED=0``: the generators iterate over sets, so without
a fixed hash seed the same seed yields different games from one process to the
next. Measured on 2 cores (textworld 1.7.0): 4-18 s per generated game (cooking
level 3 the slowest); ``reset`` of a compiled game 0.03-0.8 s; ``step`` 5-40 ms;
the game runs in-process (the whole Python process stayed under 90 MB).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from deltamem.envs.base import GUIDE_RULES, Environment, Transition
from deltamem.errors import ConfigError
from deltamem.paths import user_cache_dir
from deltamem.seeding import check_random_state
from deltamem.types import Task

__all__ = ["CHALLENGES", "COOKING_LEVELS", "SPLIT_SEED_BASE", "GameSpec", "TextWorldEnv"]

Game = Literal["treasure", "cooking", "coin"]

#: our game name -> TextWorld challenge name
CHALLENGES: dict[str, str] = {
    "treasure": "tw-treasure_hunter",
    "cooking": "tw-cooking",
    "coin": "tw-coin_collector",
}

#: cooking difficulty -> tw-cooking skills (recipe size, ingredients to find, rooms, ...)
COOKING_LEVELS: dict[int, dict[str, Any]] = {
    1: {"recipe": 1, "take": 1, "go": 1},
    2: {"recipe": 1, "take": 1, "go": 1, "open": True, "cook": True, "cut": True},
    3: {"recipe": 2, "take": 2, "go": 6, "open": True, "cook": True, "cut": True},
    4: {"recipe": 3, "take": 3, "go": 9, "open": True, "cook": True, "cut": True},
    5: {"recipe": 3, "take": 3, "go": 12, "open": True, "cook": True, "cut": True, "drop": True},
}

#: first seed of each split; a split holds at most SPLIT_SIZE games
SPLIT_SEED_BASE: dict[str, int] = {"train": 1_000_000, "seen": 2_000_000, "unseen": 3_000_000}
SPLIT_SIZE = 1_000_000

_ID = re.compile(r"^(?P<game>treasure|cooking|coin)-L(?P<level>\d+)-s(?P<seed>\d+)$")
_BANNER_CHARS = set(" _|\\/$<>")


def _max_level(game: str) -> int:
    return {"treasure": 30, "coin": 300, "cooking": max(COOKING_LEVELS)}[game]


def _check_game(game: str, difficulty: int) -> None:
    if game not in CHALLENGES:
        raise ConfigError(f"unknown TextWorld game {game!r}; known: {', '.join(CHALLENGES)}")
    top = _max_level(game)
    if not isinstance(difficulty, int) or not 1 <= difficulty <= top:
        raise ConfigError(f"{game} difficulty must be an int in 1..{top}, got {difficulty!r}")
    if game == "coin" and ((difficulty - 1) // 100 + 1) * ((difficulty - 1) % 100 + 1) > 100:
        raise ConfigError(f"coin level {difficulty} needs more than 100 rooms (TextWorld >= 1.7 "
                          "cannot compile it)")


def _split_of(seed: int) -> str:
    for split, base in SPLIT_SEED_BASE.items():
        if base <= seed < base + SPLIT_SIZE:
            return split
    raise ConfigError(f"seed {seed} is in no split range ({SPLIT_SEED_BASE})")


@dataclass(frozen=True)
class GameSpec:
    """One generated game: family, difficulty and seed (the split follows from the seed)."""

    game: str
    difficulty: int
    seed: int

    @property
    def task_id(self) -> str:
        return f"{self.game}-L{self.difficulty}-s{self.seed}"

    @property
    def split(self) -> str:
        return _split_of(self.seed)

    @classmethod
    def parse(cls, task_id: str) -> GameSpec:
        """``"treasure-L3-s2000005"`` -> GameSpec; :class:`ConfigError` when malformed."""
        m = _ID.match(str(task_id))
        if m is None:
            raise ConfigError(f"bad TextWorld task id {task_id!r}; expected "
                              "'<treasure|cooking|coin>-L<difficulty>-s<seed>'")
        spec = cls(m["game"], int(m["level"]), int(m["seed"]))
        _check_game(spec.game, spec.difficulty)
        _split_of(spec.seed)
        return spec

    def settings(self) -> dict[str, Any]:
        """Keyword settings for the challenge's ``make``."""
        if self.game == "cooking":
            food_split = "test" if self.split == "unseen" else "train"
            return {**COOKING_LEVELS[self.difficulty], "recipe_seed": 0, "split": food_split}
        return {"level": self.difficulty}


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/deltamem/textworld`` (``~/.cache`` when unset)."""
    return user_cache_dir() / "textworld"


def _textworld() -> Any:
    try:
        import textworld
        import textworld.gym
    except ImportError as e:
        raise ConfigError(
            "TextWorld needs the 'textworld' package: pip install textworld (or deltamem[envs])"
        ) from e
    return textworld


def _strip_banner(text: str) -> str:
    """Drop TextWorld's ASCII-art banner (leading lines made only of drawing characters)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines) and set(lines[i]) <= _BANNER_CHARS:
        i += 1
    return "\n".join(lines[i:]).strip()


#: the interpreter's prompt line that ends a step's output: ">" and, padded with spaces, the
#: status bar "-= Room =-SCORE/MOVES" (the move counter makes every observation unique)
_PROMPT_LINE = re.compile(r"\n*^>[ \t]*(?:-=.*=-[ \t]*-?\d+/\d+)?[ \t]*\Z", re.MULTILINE)


def _step_text(text: object) -> str:
    """A step's feedback without the trailing prompt and status bar (see :data:`_PROMPT_LINE`)."""
    return _PROMPT_LINE.sub("", str(text).rstrip()).strip()


def _norm(action: str) -> str:
    return " ".join(action.split()).casefold()


class TextWorldEnv(Environment):
    """TextWorld challenge games behind the :class:`Environment` contract.

    Args:
        game: ``"treasure"``, ``"cooking"`` or ``"coin"`` (see the module docstring).
        difficulty: the family's level (treasure 1-30, coin 1-300, cooking 1-5).
        n_games: games per split (ids ``0..n_games-1`` of the split's seed range).
        cache_dir: where compiled games are kept (``None``: :func:`default_cache_dir`).
        max_steps: step cap of every episode (50 = TextWorld's gym default).

    Episodes: goal = the game's objective text; scene = the first room's
    description; observation = the opening text without the ASCII banner.
    Score = points / max points, in [0, 1]; success = the game is won; done =
    won, lost or the cap reached. valid = the action was among the admissible
    commands of the state it was sent in.
    """

    name = "textworld"
    domain = "textworld"
    #: the agent guide's rule set here, by rule names (:data:`deltamem.envs.base.GUIDE_RULES`)
    guide_rules = GUIDE_RULES
    splits = ("train", "seen", "unseen")

    def __init__(
        self,
        game: Game = "treasure",
        difficulty: int = 1,
        n_games: int = 50,
        cache_dir: str | os.PathLike[str] | None = None,
        max_steps: int = 50,
    ) -> None:
        self.game = game
        self.difficulty = difficulty
        self.n_games = n_games
        self.cache_dir = cache_dir
        self.max_steps_cap = max_steps
        self.name = f"textworld:{game}"
        self._gym: Any = None
        self._task: Task | None = None
        self._admissible: list[str] = []
        self._policy: list[str] = []
        self._done = False
        self._steps = 0
        self._max_score = 1

    # -- configuration -------------------------------------------------------------------

    def _validate(self) -> None:
        _check_game(self.game, self.difficulty)
        if not isinstance(self.n_games, int) or not 1 <= self.n_games <= SPLIT_SIZE:
            raise ConfigError(f"n_games must be an int in 1..{SPLIT_SIZE}, got {self.n_games!r}")
        if not isinstance(self.max_steps_cap, int) or self.max_steps_cap < 1:
            raise ConfigError(f"max_steps must be a positive int, got {self.max_steps_cap!r}")

    def game_dir(self) -> Path:
        """The cache folder for this TextWorld version."""
        tw = _textworld()
        root = Path(self.cache_dir) if self.cache_dir is not None else default_cache_dir()
        return root / f"tw-{tw.__version__}"

    def game_path(self, spec: GameSpec) -> Path:
        """Where ``spec``'s compiled ``.z8`` lives (it may not exist yet)."""
        return self.game_dir() / f"{spec.task_id}.z8"

    def prepare(self, task_ids: Sequence[str]) -> list[Path]:
        """Generate every missing game of ``task_ids`` in one child process; return their paths.

        Raises:
            ConfigError: a task id is malformed or textworld is missing.
            RuntimeError: the generator failed (its stderr is in the message).
        """
        specs = [GameSpec.parse(t) for t in task_ids]
        paths = [self.game_path(s) for s in specs]
        todo = [(s, p) for s, p in zip(specs, paths, strict=True)
                if not (p.is_file() and p.with_suffix(".json").is_file())]
        if todo:
            _generate(todo, self.game_dir())
        return paths

    # -- contract --------------------------------------------------------------------------

    def task_ids(self, split: str, seed: int = 0) -> list[str]:
        """The ``n_games`` games of ``split``; ``seed=0`` in seed order, else shuffled by it."""
        self._validate()
        if split not in SPLIT_SEED_BASE:
            raise ConfigError(f"unknown TextWorld split {split!r}; known: {', '.join(self.splits)}")
        base = SPLIT_SEED_BASE[split]
        ids = [GameSpec(self.game, self.difficulty, base + i).task_id for i in range(self.n_games)]
        if seed != 0:
            check_random_state(seed).shuffle(ids)
        return ids

    def reset(self, task_id: str) -> Task:
        """Start the game (generating it first when it is not cached)."""
        self._validate()
        spec = GameSpec.parse(task_id)
        tw = _textworld()
        (path,) = self.prepare([task_id])
        self._close_game()
        infos = tw.EnvInfos(admissible_commands=True, score=True, max_score=True, won=True,
                            lost=True, policy_commands=True, objective=True, description=True)
        from textworld.gym.envs import TextworldGymEnv

        self._gym = TextworldGymEnv([str(path)], request_infos=infos)
        with warnings.catch_warnings():
            # jericho warns that it cannot track score in TextWorld-made games; TextWorld
            # tracks score, won and lost itself, so the warning is noise here
            warnings.filterwarnings("ignore", message=".*is not fully supported.*")
            obs, info = self._gym.reset()
        self._admissible = list(info["admissible_commands"])
        self._policy = list(info["policy_commands"])
        self._max_score = max(int(info["max_score"]), 1)
        self._done = False
        self._steps = 0
        self._task = Task(
            id=spec.task_id,
            goal=str(info["objective"]).strip(),
            scene=str(info["description"]).strip(),
            domain=self.domain,
            split=spec.split,
            observation=_step_text(_strip_banner(obs)),
            max_steps=self.max_steps_cap,
            meta={"task_type": self.game, "challenge": CHALLENGES[self.game],
                  "difficulty": spec.difficulty, "seed": spec.seed},
        )
        return self._task

    def admissible_actions(self) -> list[str]:
        """TextWorld's admissible commands for the current state."""
        self._require()
        return list(self._admissible)

    def walkthrough(self) -> list[str]:
        """A winning command sequence from the start of the current game (oracle; for tests)."""
        self._require()
        return list(self._policy)

    def solution(self) -> list[str] | None:
        """The game's walkthrough (see :meth:`Environment.solution`); ``None`` if it has none."""
        return self.walkthrough() or None

    def step(self, action: str) -> Transition:
        """Send ``action``; see the class docstring for the outcome."""
        self._require()
        if self._done:
            raise RuntimeError("episode is over; call reset() first")
        valid = _norm(action) in {_norm(a) for a in self._admissible}
        obs, score, done, info = self._gym.step(action)
        self._steps += 1
        self._admissible = list(info["admissible_commands"])
        won = bool(info["won"])
        self._done = bool(done) or won or bool(info["lost"]) or self._steps >= self.max_steps_cap
        norm = min(max(float(score) / self._max_score, 0.0), 1.0)
        return Transition(observation=_step_text(obs), score=norm, done=self._done,
                          success=won, valid=valid)

    def max_steps(self, task: Task) -> int:
        return task.max_steps or self.max_steps_cap

    def close(self) -> None:
        """Close the running game."""
        self._close_game()
        self._task = None

    def _close_game(self) -> None:
        gym, self._gym = self._gym, None
        if gym is not None:
            gym.close()

    def _require(self) -> None:
        if self._gym is None or self._task is None:
            raise RuntimeError("no episode in progress; call reset(task_id) first")

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments (for run records)."""
        return {"game": self.game, "difficulty": self.difficulty, "n_games": self.n_games,
                "cache_dir": None if self.cache_dir is None else os.fspath(self.cache_dir),
                "max_steps": self.max_steps_cap}


# -- generation (runs in a child process with PYTHONHASHSEED=0) ----------------------------


def _generate(todo: list[tuple[GameSpec, Path]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [{"challenge": CHALLENGES[s.game], "settings": s.settings(), "seed": s.seed,
             "path": str(p)} for s, p in todo]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", "from deltamem.envs.textworld_games import _child; _child()"],
        input=json.dumps(jobs), capture_output=True, text=True, env=env, check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"TextWorld game generation failed (exit {proc.returncode}):\n{tail}")


def _child() -> None:  # pragma: no cover - runs in the child process
    """Generate the games described on stdin (JSON list); atomic per game."""
    import textworld
    import textworld.challenges

    for job in json.loads(sys.stdin.read()):
        final = Path(job["path"])
        with tempfile.TemporaryDirectory(dir=final.parent) as tmp:
            options = textworld.GameOptions()
            options.seeds = job["seed"]
            options.path = os.path.join(tmp, final.name)
            options.file_ext = ".z8"
            options.force_recompile = True
            _, make, _ = textworld.challenges.CHALLENGES[job["challenge"]]
            game = make(settings=job["settings"], options=options)
            built = Path(textworld.generator.compile_game(game, options))
            os.replace(built.with_suffix(".json"), final.with_suffix(".json"))
            os.replace(built, final)
