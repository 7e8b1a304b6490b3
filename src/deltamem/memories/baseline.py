"""What the paper's flat-memory baselines share (Synapse, AWM, ReasoningBank; §4.1).

* :class:`BaselineConfig`: the typed settings every baseline has (domain, mode);
* :class:`FlatMemory`: a :class:`~deltamem.memory.Memory` on an
  :class:`~deltamem.store.items.ItemStore` with ``open()``, an idempotent,
  all-or-nothing ``learn`` (validate → plan, LLM time outside the lock →
  one transaction), cached reads and the common ``stats()`` figures;
* :func:`load_prompt` reads the templates under ``deltamem/prompts/baselines``;
* :func:`ask_json` makes one schema-constrained LLM call, validates the answer
  (JSON schema with bounded strings plus the rules of
  :mod:`deltamem.extract.schema`), asks for one repair, and otherwise logs the
  answer (logger ``deltamem.memory``) and raises :class:`ExtractionError`.

A subclass sets ``name``, ``config_class`` and ``source`` and implements
:meth:`FlatMemory.recall`, :meth:`FlatMemory._plan` and
:meth:`FlatMemory._token_units`.
"""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import jsonschema
import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError, StoreError
from deltamem.extract.llm import render_trajectory, truncate_middle
from deltamem.extract.schema import (
    _bad_char,
    _describe,
    _no_constants,
    _no_duplicates,
    _strip_fence,
)
from deltamem.llm.base import LLMClient, Message
from deltamem.memory import Memory
from deltamem.store.items import Item, ItemStore
from deltamem.templates import read_template
from deltamem.types import Change, Changes, Episode, Recall, Task

__all__ = [
    "BaselineConfig",
    "FlatMemory",
    "Mode",
    "Plan",
    "ask_json",
    "episode_prompt_values",
    "load_prompt",
    "parse_json",
]

log = logging.getLogger("deltamem.memory")

Mode = Literal["llm", "deterministic"]

_SYSTEM_PROMPT = (
    "You maintain the long-term memory of an agent that plays text-based tasks. "
    "Answer with one JSON object and nothing else."
)
_RAW_IN_REPAIR = 2000
_RAW_IN_LOG = 300
_SCENE_CHARS = 1500


class BaselineConfig(BaseModel):
    """Settings every baseline has.

    Attributes:
        domain: a name from :data:`deltamem.domains.DOMAINS` (presets, prompt wording).
        mode: ``llm`` (induction/distillation by the LLM) or ``deterministic``
            (plain text processing, no LLM).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = "generic"
    mode: Mode = "deterministic"

    @model_validator(mode="after")
    def _check_domain(self) -> Self:
        get_domain(self.domain)  # ConfigError naming the known domains
        return self


# -- prompts ------------------------------------------------------------------------------


def load_prompt(system: str, name: str, variables: frozenset[str]) -> string.Template:
    """The template ``deltamem/prompts/baselines/<system>/<name>.txt``.

    Raises :class:`ConfigError` when the file is missing, has a malformed
    ``$`` placeholder, or uses a variable outside ``variables``.
    """
    path = resources.files("deltamem").joinpath("prompts", "baselines", system, f"{name}.txt")
    return read_template(path, variables, "baseline prompt")


def episode_prompt_values(episode: Episode, max_trajectory_chars: int) -> dict[str, str]:
    """Agent-visible facts of an episode for prompts (no oracle labels from ``task.meta``).

    ``task_description`` (goal), ``env_description`` (scene, else first
    observation; middle-cut), ``result``, ``reward``, ``steps`` and
    ``trajectory`` (``> action`` + observation, middle-cut to the budget).
    """
    task = episode.task
    scene = task.scene_text.strip()
    first = task.observation if task.observation.strip() != scene else ""
    return {
        "task_description": task.goal.strip(),
        "env_description": truncate_middle(scene or "(not described)", _SCENE_CHARS),
        "result": "SUCCESS" if episode.success else "FAILURE",
        "reward": f"{episode.reward:g}",
        "steps": str(len(episode.steps)),
        "trajectory": truncate_middle(render_trajectory(episode.steps, first),
                                      max_trajectory_chars),
    }


# -- validated JSON calls ----------------------------------------------------------------


def _check_strings(obj: Any, where: str, role: str, raw: str) -> None:
    """Every string in ``obj``: no control characters, not only whitespace."""
    if isinstance(obj, str):
        bad = _bad_char(obj)
        if bad:
            raise ExtractionError(f"{role}: {where} contains a {bad}", role=role, raw=raw)
        if not obj.strip():
            raise ExtractionError(f"{role}: {where} is empty or only whitespace",
                                  role=role, raw=raw)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            _check_strings(v, f"{where}.{k}" if where else str(k), role, raw)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_strings(v, f"{where}.{i}", role, raw)


def _reason(error: jsonschema.ValidationError, obj: Mapping[str, Any]) -> str:
    """A short reason for one schema error (array sizes stated without the array)."""
    if error.validator in ("maxItems", "minItems") and isinstance(error.instance, list):
        where = ".".join(str(p) for p in error.path) or "the answer"
        bound = "at most" if error.validator == "maxItems" else "at least"
        return f"{where} has {len(error.instance)} items; {bound} {error.validator_value} allowed"
    return _describe(error, obj)


def parse_json(role: str, text: str, schema: Mapping[str, Any]) -> Any:
    """Decode and validate one JSON object answer against ``schema``.

    Same leniency and rules as :func:`deltamem.extract.schema.parse_output`
    (one optional Markdown fence; no duplicate keys, NaN, control characters)
    and every string must hold more than whitespace. Raises
    :class:`ExtractionError` (``role``, ``raw`` set) saying what is wrong.
    """
    body = _strip_fence(text)
    if not body:
        raise ExtractionError(f"{role}: empty output", role=role, raw=text)
    try:
        obj = json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise ExtractionError(f"{role}: invalid JSON: {e.msg} at line {e.lineno} column "
                              f"{e.colno}", role=role, raw=text) from None
    except (ValueError, RecursionError) as e:
        raise ExtractionError(f"{role}: invalid JSON: {e}", role=role, raw=text) from None
    if not isinstance(obj, dict):
        raise ExtractionError(f"{role}: expected a JSON object, got {type(obj).__name__}",
                              role=role, raw=text)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(obj),
                    key=lambda e: list(e.path))
    if errors:
        raise ExtractionError(f"{role}: {_reason(errors[0], obj)}", role=role, raw=text)
    _check_strings(obj, "", role, text)
    return obj


def ask_json(
    llm: LLMClient,
    *,
    role: str,
    purpose: str,
    prompt: str,
    schema: Mapping[str, Any],
    shape: str,
    max_tokens: int = 600,
) -> Any:
    """One LLM call for a JSON object following ``schema``, with one repair call.

    ``role`` names the prompt in messages and logs, ``purpose`` is the usage
    bucket (``extract``, ``merge``), ``shape`` describes the expected object
    in the repair request. Returns the decoded object. When the repaired
    answer is still invalid, logs a warning on ``deltamem.memory`` and raises
    :class:`ExtractionError` with the last answer in ``raw``. LLM backend
    errors propagate unchanged.
    """
    messages: list[Message] = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]
    raw = llm.complete(messages, purpose=purpose, schema=schema, max_tokens=max_tokens).text
    try:
        return parse_json(role, raw, schema)
    except ExtractionError as first:
        reason = str(first)
    repair: list[Message] = [
        *messages,
        {"role": "assistant", "content": truncate_middle(raw, _RAW_IN_REPAIR)},
        {"role": "user", "content": (
            f"Your answer was rejected: {reason}\nReply again with ONLY the corrected JSON "
            f"object ({shape}), within the length limits. No text before or after it.")},
    ]
    raw = llm.complete(repair, purpose=purpose, schema=schema, max_tokens=max_tokens).text
    try:
        return parse_json(role, raw, schema)
    except ExtractionError as second:
        reason = str(second)
    log.warning("rejected %s output after one repair: %s; raw output: %r",
                role, reason, raw[:_RAW_IN_LOG])
    raise ExtractionError(f"output rejected after one repair: {reason}", role=role, raw=raw)


# -- the base memory ---------------------------------------------------------------------


@dataclass
class Plan:
    """What one ``learn`` will do: its changes, queued writes and rejections to log.

    Writes run inside the learn transaction, in order.
    """

    changes: list[Change] = field(default_factory=list)
    writes: list[Callable[[], object]] = field(default_factory=list)
    rejections: list[dict[str, str]] = field(default_factory=list)

    def reject(self, source: str, error: ExtractionError) -> None:
        """Record an LLM output that stayed invalid: Change ``rejected`` + a log row."""
        self.changes.append(Change("rejected", source, f"{error.role}: {error}"))
        self.rejections.append({"role": error.role, "reason": str(error), "raw": error.raw})


def cosine(matrix: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``matrix`` with ``vec`` (rows need not be unit length)."""
    m = np.asarray(matrix, dtype=np.float32)
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    norms = np.linalg.norm(m, axis=1) * (float(np.linalg.norm(v)) or 1.0)
    norms[norms == 0] = 1.0
    return (m @ v) / norms


class FlatMemory(Memory):
    """Base of the flat baselines: an item bank, an embedder, an optional LLM.

    Args:
        store: the bank.
        embedder: any :class:`~deltamem.embed.base.Embedder`; ``None`` opens the
            bank for inspection only (``stats``; recall and learn need one).
        llm: an :class:`~deltamem.llm.base.LLMClient`, needed in ``llm`` mode.
        mode: ``llm`` or ``deterministic``; ``None`` takes the bank's recorded
            mode, else ``llm`` when an ``llm`` is given and ``deterministic`` otherwise.
        options: fields of the system's config class. On an existing bank, the
            recorded configuration is the default and ``options`` override it.

    Raises :class:`ConfigError` for invalid options (or ``mode="llm"`` without
    an ``llm``), :class:`StoreError` for a bank of another system and
    :class:`~deltamem.errors.EmbedderMismatchError` for a bank built with
    another embedder.
    """

    config_class: ClassVar[type[BaselineConfig]] = BaselineConfig
    #: ``source`` of this system's Changes and RecallItems
    source: ClassVar[str] = "items"
    #: memory header put before the recalled text
    header: ClassVar[str] = ""
    #: False for systems that never call the LLM (then ``mode`` is only recorded)
    uses_llm: ClassVar[bool] = True

    def __init__(
        self,
        store: ItemStore,
        embedder: Embedder | None,
        *,
        llm: LLMClient | None = None,
        mode: Mode | None = None,
        readonly: bool = False,
        **options: Any,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        meta = store.meta()
        if meta.get("system") not in (None, self.name):
            raise StoreError(f"bank {store.path} belongs to memory system {meta['system']!r}, "
                             f"not {self.name!r}")
        recorded: dict[str, Any] = dict(meta.get("config") or {})
        self._check_reopen(recorded, options)
        raw = {**recorded, **options}
        if mode is not None:
            raw["mode"] = mode
        elif "mode" not in raw:
            raw["mode"] = "llm" if llm is not None else "deterministic"
        try:
            self.config = self.config_class(**raw)
        except ConfigError:
            raise
        except ValidationError as e:
            raise ConfigError(f"invalid {self.name} configuration: {e}") from e
        if self.uses_llm and mode == "llm" and llm is None:
            raise ConfigError(f"{self.name}: mode 'llm' needs an llm (--llm on the command "
                              "line; or use mode='deterministic')")
        if embedder is not None:
            if readonly:
                store.check_embedder(embedder.name, embedder.dim)
            else:
                store.init_meta(system=self.name, embedder_name=embedder.name,
                                embedder_dim=embedder.dim, config=self.config.model_dump())
        self._writes = 0
        self._cache_key: tuple[int, int] | None = None
        self._cache: list[Item] = []

    @classmethod
    def open(
        cls,
        path: str | Path = ":memory:",
        *,
        embedder: Embedder | None,
        llm: LLMClient | None = None,
        mode: Mode | None = None,
        readonly: bool = False,
        **options: Any,
    ) -> Self:
        """Open (or create) the bank at ``path`` (``":memory:"``: not persisted).

        See the class docstring for the arguments and errors.
        """
        store = ItemStore(path, readonly=readonly)
        try:
            return cls(store, embedder, llm=llm, mode=mode, readonly=readonly, **options)
        except BaseException:
            store.close()
            raise

    def _check_reopen(self, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        """Hook: refuse options that would change how an existing bank is organised."""

    # -- helpers ----------------------------------------------------------------------
    def _need_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError("this bank was opened without an embedder (inspection only)")
        return self.embedder

    def _need_llm(self) -> LLMClient:
        if self.llm is None:
            raise ConfigError(f"{self.name} is in mode 'llm' but was opened without an llm; "
                              "pass llm=... or mode='deterministic'")
        return self.llm

    @staticmethod
    def _check_task(task: Task) -> None:
        if not isinstance(task, Task):
            raise InvalidInputError(f"expected a Task, got {type(task).__name__}")
        get_domain(task.domain)
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")

    def _items(self) -> list[Item]:
        """Every stored item, re-read only when the bank changed."""
        key = (self.store.version(), self._writes)
        if key != self._cache_key:
            self._cache = self.store.items()
            self._cache_key = key
        return self._cache

    # -- learn --------------------------------------------------------------------------
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Validate, plan (LLM calls happen here, outside the lock), then write atomically.

        An episode id already learned returns one ``unchanged`` Change and does
        nothing. Invalid LLM output is rejected (Change ``rejected``, logged in
        the bank's rejections) and never stored. ``recall`` is not needed.
        """
        episode.validate()
        self._check_task(episode.task)
        self._need_embedder()
        if self.store.is_learned(episode.id):
            return Changes((Change("unchanged", self.source, "episode already learned",
                                   episode.id),))
        plan = self._plan(episode)
        with self.store.transaction():
            if not self.store.mark_learned(episode.id):
                return Changes((Change("unchanged", self.source, "episode already learned",
                                       episode.id),))
            self._apply(plan, episode.id)
        self._writes += 1
        return Changes(tuple(plan.changes))

    def _apply(self, plan: Plan, episode_id: str) -> None:
        """Log ``plan``'s rejections and run its writes (inside the caller's transaction)."""
        for rej in plan.rejections:
            self.store.add_rejection(episode_id=episode_id, role=rej["role"],
                                     reason=rej["reason"], raw=rej["raw"])
        for write in plan.writes:
            write()

    def _plan(self, episode: Episode) -> Plan:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- stats ----------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:  # pragma: no cover - abstract
        """The text of each memory unit as paper Table 5 defines it for this system."""
        raise NotImplementedError

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        return {}

    def stats(self) -> dict[str, Any]:
        """Size figures.

        ``units``: memory units as paper Table 5 counts them for this system;
        ``avg_tokens``: their average whitespace-token count; ``items``: stored
        rows; plus ``episodes_learned``, ``last_episode_id``, ``rejections``,
        ``mode`` and system-specific figures.
        """
        items = self._items()
        units = self._token_units(items)
        tokens = [len(t.split()) for t in units]
        out: dict[str, Any] = {
            "system": self.name,
            "mode": self.config.mode,
            "units": len(units),
            "avg_tokens": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
            "items": len(items),
            "episodes_learned": self.store.learned_count(),
            "last_episode_id": self.store.last_learned(),
            "rejections": len(self.store.rejections()),
        }
        out.update(self._stats_extra(items))
        return out

    def close(self) -> None:
        self.store.close()
