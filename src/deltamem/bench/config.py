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
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deltamem.agents.guide import resolve_rules
from deltamem.embed.factory import DEFAULT_EMBEDDER
from deltamem.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "EvalMode",
    "Protocol",
    "RunConfig",
    "default_run_dir",
    "is_local_llm",
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
            (``None``: the memory gets no embedder). Left out, it is the bundled
            ``minilm`` for every memory but ``none``.
        extractor: ``structural`` or ``llm`` experience extraction.
        protocol: ``online`` (learn while evaluating, paper §4.1) or
            ``train-to-test`` (build on ``train_split``, then evaluate each of
            ``eval_modes`` from a copy of the built bank, paper §4.3).
        train_split / train_episodes: the build phase of ``train-to-test``.
        eval_modes: evaluation settings of ``train-to-test``.
        frozen: online protocol only: never call ``learn`` (evaluate a bank
            given with ``init_bank`` as it is).
        init_bank: a bank file copied into the run before its first episode.
        constrained: the agent picks from the admissible actions (constrained
            decoding) instead of generating free text. Left out, it is on for the
            bundled local model (``local``, ``local:PATH``), where free generation is
            slow and rarely gives a valid action, and off for API models (the
            paper's setting) and ``scripted``.
        domain: prompt/memory domain (``None``: the environment's).
        max_steps: step cap overriding the environment's.
        history_chars: the agent's history budget in characters.
        repeat_limit: constrained mode: leave out an action already taken this many
            times from the current observation (None: off).
        max_listed_actions: list the admissible actions in the prompt when there
            are at most this many (0: never; constrained decoding still enforces them).
        agent: the policy that plays the online phase and the evaluation phases:
            ``react`` (the LLM agent) or a demonstration policy ``expert`` /
            ``expert:noise=P`` (:mod:`deltamem.agents.expert`).
        train_agent: the policy of the ``build`` phase of ``train-to-test``
            (``None``: ``agent``); ``expert[:noise=P]`` builds the bank from
            demonstrations. Every record names the policy that played it.
        guide: how the ReAct agent uses the recalled procedure
            (:mod:`deltamem.agents.guide`): ``off`` (the paper's agent: recall in
            the prompt only), ``hint`` (also the next recalled step, made concrete,
            right before the action list), ``prior`` (``hint`` plus a bonus for the
            admissible actions that realise it in the choice).
        judge: who decides the outcome a learn is given (:mod:`deltamem.judge`):
            ``None`` (default) the environment's own; ``scripted`` (rules, no model) or an
            LLM spec (``local``, ``openai:MODEL``; the run's own model when it is the
            run's ``llm``) reads the trajectory instead. The environment's outcome stays
            in each record's ``success``, the verdict beside it under ``verdict``; an
            uncertain or refused verdict learns nothing.
        temperature: the acting agent's sampling temperature (0: greedy, the papers'
            setting for a single run).
        attempts: play every evaluated game this many times (the AriGraph paper's five
            attempts per game), each attempt from a fresh start: the online protocol's
            attempt k learns into its own bank (``bank-attempt{k}.db``), an evaluation
            phase's attempt plays from its own copy of the built bank. With
            ``temperature`` 0 a deterministic agent repeats itself, so attempts beyond
            the first need a temperature above 0 (the configuration is refused otherwise).
            Results count per game: the mean over its attempts.
        concurrency: how many episodes play at once where they are independent: the
            phases that never learn (``frozen``, the online protocol's ``frozen``), each
            attempt of them included; learning phases play in stream order. Each worker
            has its own environment and its own read-only handle on the bank; records are
            written in stream order, so a run's ``episodes.jsonl`` is the same game for game
            as with 1 against a deterministic model (an API model at temperature 0). Not
            part of what defines the results: a run may resume with another value.
        cue_at: where the ReAct agent's prompt asks for the answer
            (:mod:`deltamem.agents.prompts`): ``start`` (before the task: each step's
            prompt extends the previous one, so a prompt cache reuses it) or ``end``
            (after the history, the layout before 2026-11-27). A saved ``config.json``
            without the field was written before it existed and reads as ``end``.
        guide_rules: the guide's rule set by names, in the order asked
            (:func:`deltamem.agents.guide.resolve_rules`); ``None`` (default): the
            environment's own (:attr:`deltamem.envs.base.Environment.guide_rules`). An
            ablation names the default set without one rule (``heed-warnings``, say).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_dir: Path
    env: str = Field(default="household", min_length=1)
    env_options: dict[str, Any] = Field(default_factory=dict)
    split: str = Field(default="seen", min_length=1)
    seed: int = 0
    episodes: int | None = Field(default=None, ge=1)
    memory: str = "none"
    memory_options: dict[str, Any] = Field(default_factory=dict)
    llm: str = Field(default="local", min_length=1)
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
    agent: str = Field(default="react", min_length=1)
    train_agent: str | None = None
    guide: Literal["off", "hint", "prior"] = "off"
    judge: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    attempts: int = Field(default=1, ge=1)
    cue_at: Literal["start", "end"] = "start"
    guide_rules: list[str] | None = None
    concurrency: int = Field(default=1, ge=1, le=256)

    @model_validator(mode="after")
    def _check_guide_rules(self) -> Self:
        if self.guide_rules is not None:
            resolve_rules(self.guide_rules)  # ConfigError naming the rule or the order
        return self

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """Fill the defaults that depend on other fields (embedder, constrained)."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "embedder" not in data:
            data["embedder"] = None if data.get("memory", "none") == "none" else DEFAULT_EMBEDDER
        if data.get("constrained") is None:
            data["constrained"] = is_local_llm(str(data.get("llm", "local")))
        return data

    @property
    def decoding(self) -> str:
        """How the agent's actions are decoded, in words (for run output and reports)."""
        return ("constrained (picks among the admissible actions)" if self.constrained
                else "free generation")

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
        for name in ("agent", "train_agent"):
            spec = getattr(self, name)
            if spec is not None and spec.strip() != "react":
                _check_agent_spec(name, spec)
        if self.train_agent is not None and self.protocol != "train-to-test":
            raise ValueError("train_agent applies to the train-to-test protocol's build phase")
        if self.judge is not None and not self.judge.strip():
            raise ValueError("judge must be 'scripted' or an LLM spec, not empty")
        if self.attempts > 1 and self.temperature == 0:
            raise ValueError(f"attempts={self.attempts} needs a temperature above 0: a greedy "
                             "agent plays every attempt of a game alike")
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
        if isinstance(data, dict) and "cue_at" not in data:
            data["cue_at"] = "end"  # saved before the field existed: the agent asked last
        return _validate(data, str(path))


def is_local_llm(spec: str) -> bool:
    """Whether an LLM spec names the bundled/local llama.cpp model (``local``, ``local:PATH``)."""
    return spec.strip().partition(":")[0].strip().lower() == "local"


def _check_agent_spec(name: str, spec: str) -> None:
    from deltamem.agents.expert import parse_expert_spec

    try:
        noise = parse_expert_spec(spec)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    if noise is None:
        raise ValueError(f"{name} must be 'react', 'expert' or 'expert:noise=P', got {spec!r}")


def _validate(data: Mapping[str, Any], where: str) -> RunConfig:
    try:
        return RunConfig.model_validate(dict(data))
    except ValidationError as e:
        raise ConfigError(f"invalid run configuration ({where}): {_explain(e)}") from e


def _explain(e: ValidationError) -> str:
    """One line per problem, each naming the setting and its command-line flag."""
    parts = []
    for err in e.errors():
        loc = [str(x) for x in err.get("loc", ())]
        if not loc:
            parts.append(str(err.get("msg", "")))
            continue
        field = loc[0]
        flag = f"--{field.replace('_', '-')}"
        where = ".".join(loc)
        parts.append(f"{where} (flag {flag}): {err.get('msg', '')}")
    return "; ".join(parts)


def load_config(toml_path: str | Path | None = None, /, **flags: Any) -> RunConfig:
    """Build a :class:`RunConfig` from a TOML file and keyword flags.

    Flags whose value is ``None`` are ignored (unset CLI options), the others
    override the file. ``memory_options``, ``llm_options`` and ``env_options`` given
    as flags are merged into the file's tables. Without a ``run_dir`` anywhere, it is
    :func:`default_run_dir`. Raises :class:`ConfigError` on unreadable files or invalid
    values.
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
    if "run_dir" not in data:
        data["run_dir"] = default_run_dir(data)
    return _validate(data, str(toml_path) if toml_path else "flags")


def default_run_dir(data: Mapping[str, Any]) -> Path:
    """``runs/ENV-SPLIT-MEMORY`` (``:`` and ``/`` become ``_``): where a run goes when
    neither the file nor the flags name a run directory."""
    fields = RunConfig.model_fields
    parts = [str(data.get(k, fields[k].default)) for k in ("env", "split", "memory")]
    name = "-".join(parts)
    for ch in ":/\\ ":
        name = name.replace(ch, "_")
    return Path("runs") / name


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
