"""The configuration of one benchmark run: a typed, recordable object.

A run is fully described by a :class:`RunConfig`. It is read from a TOML file
(top-level keys are the field names; ``[memory_options]`` is a table) and/or
keyword flags (flags override the file), validated by pydantic, and saved as
``config.json`` in the run directory so the run can be reproduced or resumed.

Example TOML::

    run_dir = "runs/alfworld-seen-deltamem"
    env = "alfworld"
    split = "seen"
    episodes = 140
    memory = "deltamem"
    llm = "openai:deepseek-chat"
    embedder = "e5-base-v2"

    [memory_options]
    tau_task = 0.75
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deltamem.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "EvalMode",
    "Protocol",
    "RunConfig",
    "load_config",
    "parse_option",
    "parse_options",
]

CONFIG_FILE = "config.json"

Protocol = Literal["online", "train-to-test"]
EvalMode = Literal["frozen", "unfrozen"]


class RunConfig(BaseModel):
    """Everything that defines a run.

    Attributes:
        run_dir: where results, the bank, the LLM cache and logs go.
        env: environment spec for ``deltamem.envs.registry.make_env``.
        env_options: keyword arguments for the environment's constructor (e.g.
            ``difficulty`` of a TextWorld game), over the registered defaults.
        split: the evaluated split.
        seed: task-order seed (``env.task_ids(split, seed)``).
        episodes: evaluate the first N tasks of the split (``None``: all).
        memory: registered memory system name (``none``, ``deltamem``, ...).
        memory_options: system-specific options passed as ``options=``.
        llm: LLM spec for ``deltamem.llm.factory.make_llm``.
        llm_options: keyword arguments for ``make_llm`` (``base_url``,
            ``cache_mode``, ...); the runner adds ``cache_path``.
        embedder: embedder spec for ``deltamem.embed.factory.make_embedder``
            (``None``: the memory gets no embedder).
        extractor: ``structural`` or ``llm`` experience extraction.
        protocol: ``online`` (learn while evaluating, paper §4.1) or
            ``train-to-test`` (build on ``train_split``, then evaluate each of
            ``eval_modes`` from a copy of the built bank, paper §4.3).
        train_split / train_episodes: the build phase of ``train-to-test``.
        eval_modes: evaluation settings of ``train-to-test``.
        frozen: online protocol only: never call ``learn`` (evaluate a bank
            given with ``init_bank`` as it is).
        init_bank: a bank file copied into the run before its first episode.
        constrained: the agent picks from the admissible actions.
        domain: prompt/memory domain (``None``: the environment's).
        max_steps: step cap overriding the environment's.
        history_chars: the agent's history budget in characters.
        repeat_limit: constrained mode: leave out an action already taken this many
            times from the current observation (None: off).
        max_listed_actions: list the admissible actions in the prompt when there
            are at most this many (0: never; constrained decoding still enforces them).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_dir: Path
    env: str = Field(min_length=1)
    env_options: dict[str, Any] = Field(default_factory=dict)
    split: str = Field(min_length=1)
    seed: int = 0
    episodes: int | None = Field(default=None, ge=1)
    memory: str = "none"
    memory_options: dict[str, Any] = Field(default_factory=dict)
    llm: str = Field(min_length=1)
    llm_options: dict[str, Any] = Field(default_factory=dict)
    embedder: str | None = None
    extractor: Literal["structural", "llm"] = "structural"
    protocol: Protocol = "online"
    train_split: str = "train"
    train_episodes: int | None = Field(default=None, ge=1)
    eval_modes: tuple[EvalMode, ...] = ("frozen", "unfrozen")
    frozen: bool = False
    init_bank: Path | None = None
    constrained: bool = False
    domain: str | None = None
    max_steps: int | None = Field(default=None, ge=1)
    history_chars: int = Field(default=6000, ge=0)
    repeat_limit: int | None = Field(default=None, ge=1)
    max_listed_actions: int = Field(default=50, ge=0)

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        if "cache_path" in self.llm_options:
            raise ValueError("llm_options must not set cache_path: the run directory holds it")
        if self.protocol == "train-to-test":
            if self.frozen:
                raise ValueError("frozen applies to the online protocol; "
                                 "train-to-test evaluates eval_modes")
            if not self.eval_modes or len(set(self.eval_modes)) != len(self.eval_modes):
                raise ValueError("eval_modes must list 'frozen' and/or 'unfrozen' once each")
        return self

    def to_json(self) -> str:
        """The JSON saved as ``config.json``."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json_file(cls, path: str | Path) -> RunConfig:
        """Read a saved ``config.json``."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"cannot read run config {path}: {e}") from e
        return _validate(data, str(path))


def _validate(data: Mapping[str, Any], where: str) -> RunConfig:
    try:
        return RunConfig.model_validate(dict(data))
    except ValidationError as e:
        raise ConfigError(f"invalid run configuration ({where}):\n{e}") from e


def load_config(toml_path: str | Path | None = None, /, **flags: Any) -> RunConfig:
    """Build a :class:`RunConfig` from a TOML file and keyword flags.

    Flags whose value is ``None`` are ignored (unset CLI options), the others
    override the file. ``memory_options``, ``llm_options`` and ``env_options`` given
    as flags are merged into the file's tables. Raises :class:`ConfigError` on unreadable
    files or invalid values.
    """
    data: dict[str, Any] = {}
    if toml_path is not None:
        try:
            with open(toml_path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read config file {toml_path}: {e}") from e
    for key, value in flags.items():
        if value is None:
            continue
        if key in ("memory_options", "llm_options", "env_options"):
            data[key] = {**data.get(key, {}), **dict(value)}
        else:
            data[key] = value
    return _validate(data, str(toml_path) if toml_path else "flags")


def parse_option(assignment: str) -> tuple[str, Any]:
    """Parse a CLI ``key=value`` option; the value is read as TOML, else kept as a string.

    >>> parse_option("tau_task=0.8")
    ('tau_task', 0.8)
    >>> parse_option("mode=fast")
    ('mode', 'fast')
    """
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"expected key=value, got {assignment!r}")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def parse_options(assignments: Iterable[str]) -> dict[str, Any]:
    """Several ``key=value`` options as a dict (later keys win)."""
    return dict(parse_option(a) for a in assignments)
