"""The flat-memory base: a memory of independent items (Synapse, AWM, ReasoningBank, the
lesson memories, MCMA and its baselines; §4.1 of the DeltaMem paper).

* :class:`FlatConfig`: the typed settings every flat memory has (domain, mode);
* :class:`FlatMemory`: a :class:`~deltamem.memories.banked.BankedMemory` on an
  :class:`~deltamem.store.items.ItemStore` with ``open()``, cached reads and the common
  ``stats()`` figures; its idempotent, all-or-nothing ``learn`` (validate →
  :class:`~deltamem.memories.plan.Plan` of write records, LLM time outside the lock → one
  transaction) is the base's, fed by the system's :meth:`FlatMemory._plan`;
* :func:`load_prompt` reads the templates under ``deltamem/prompts/baselines``;
* :func:`episode_prompt_values`: the agent-visible facts of an episode for a prompt.

Validated JSON calls (one repair, then :class:`~deltamem.errors.ExtractionError`) are
:func:`deltamem.llm.structured.ask_json`.

A subclass sets ``name``, ``config_class`` and ``source`` and implements
:meth:`FlatMemory.recall`, :meth:`FlatMemory._plan` and
:meth:`FlatMemory._token_units`.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, ClassVar, Literal, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from deltamem.core.triggers import task_text
from deltamem.domains import default_trigger, get_domain
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.extract.llm import render_trajectory
from deltamem.llm.base import LLMClient
from deltamem.llm.structured import truncate_middle
from deltamem.memories.banked import ItemBankedMemory
from deltamem.memories.plan import Plan
from deltamem.store.items import Item, ItemStore
from deltamem.templates import read_template
from deltamem.types import Episode, Recall

__all__ = [
    "FlatConfig",
    "FlatMemory",
    "Mode",
    "cosine",
    "episode_prompt_values",
    "load_prompt",
]


Mode = Literal["llm", "deterministic"]

_SCENE_CHARS = 1500


class FlatConfig(BaseModel):
    """Settings every flat memory has.

    Attributes:
        domain: a name from :data:`deltamem.domains.DOMAINS` (presets, prompt wording).
        mode: ``llm`` (induction/distillation by the LLM) or ``deterministic``
            (plain text processing, no LLM).
        query_text: what a system that retrieves by goal similarity embeds of a goal,
            alike for the stored key and the query: ``goal`` (as written) or
            ``abstract`` (:func:`deltamem.core.triggers.abstract_goal`); ``None`` = the
            domain's Task-Tree default for the embedder, the text DeltaMem's Task-Tree
            embeds -- so every memory is queried with the same text (``docs/
            design-notes.md``, "One query text for every memory"). Fixed when a bank is
            created; a bank written before this setting existed keeps ``goal``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = "generic"
    mode: Mode = "deterministic"
    query_text: Literal["goal", "abstract"] | None = None

    def text_mode(self, embedder: str | None) -> str:
        """``query_text``, or the domain's Task-Tree trigger mode for ``embedder``."""
        return self.query_text or default_trigger(self.domain, "task", embedder)

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


# -- the base memory ---------------------------------------------------------------------


def cosine(matrix: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``matrix`` with ``vec`` (rows need not be unit length)."""
    m = np.asarray(matrix, dtype=np.float32)
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    norms = np.linalg.norm(m, axis=1) * (float(np.linalg.norm(v)) or 1.0)
    norms[norms == 0] = 1.0
    return (m @ v) / norms


class FlatMemory(ItemBankedMemory):
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

    config_class: ClassVar[type[FlatConfig]] = FlatConfig
    #: ``source`` of this system's Changes and RecallItems
    source: ClassVar[str] = "items"
    #: memory header put before the recalled text
    header: ClassVar[str] = ""
    #: False for systems that never call the LLM (then ``mode`` is only recorded)
    uses_llm: ClassVar[bool] = True
    #: settings a bank written before they existed is read with (its keys were built so)
    legacy_config: ClassVar[Mapping[str, Any]] = {"query_text": "goal"}

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
        meta = self._open_bank(store, embedder, llm, readonly)
        recorded: dict[str, Any] = dict(meta.get("config") or {})
        if recorded:  # settings added later: what a bank written before them did
            recorded = {**self.legacy_config, **recorded}
        if (recorded.get("query_text") is not None and options.get("query_text") is not None
                and options["query_text"] != recorded["query_text"]):
            raise ConfigError(
                f"bank {store.path} was built with query_text={recorded['query_text']!r}; "
                f"its keys cannot be queried with {options['query_text']!r} (build a new bank)")
        self._check_reopen(recorded, options)
        self.config = self._configure({**recorded, **options}, mode, llm)
        if self.uses_llm and mode == "llm" and llm is None:
            raise ConfigError(f"{self.name}: mode 'llm' needs an llm (--llm on the command "
                              "line; or use mode='deterministic')")
        self._record(meta, self.config)
        self._writes = 0
        self._cache_key: tuple[int, int] | None = None
        self._cache: list[Item] = []

    def _check_reopen(self, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        """Hook: refuse options that would change how an existing bank is organised."""

    # -- helpers ----------------------------------------------------------------------
    def goal_text(self, goal: str) -> str:
        """The text of ``goal`` this system embeds, for keys and queries alike
        (:attr:`BaselineConfig.query_text`)."""
        name = self.embedder.name if self.embedder is not None else None
        return task_text(goal.strip(), self.config.text_mode(name))

    def _need_llm(self) -> LLMClient:
        if self.llm is None:
            raise ConfigError(f"{self.name} is in mode 'llm' but was opened without an llm; "
                              "pass llm=... or mode='deterministic'")
        return self.llm

    def _items(self) -> list[Item]:
        """Every stored item, re-read only when the bank changed."""
        key = (self.store.version(), self._writes)
        if key != self._cache_key:
            self._cache = self.store.items()
            self._cache_key = key
        return self._cache

    # -- learn --------------------------------------------------------------------------
    @property
    def change_source(self) -> str:
        return self.source

    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: object) -> Plan:
        """The system's :meth:`_plan` (``recall`` is not needed)."""
        return self._plan(episode)

    def _learned(self, plan: Plan) -> None:
        self._writes += 1

    def _plan(self, episode: Episode) -> Plan:  # pragma: no cover - abstract
        """What ``episode`` writes: changes, write records
        (:mod:`deltamem.memories.plan`), rejections. LLM calls happen here."""
        raise NotImplementedError

    # -- stats ----------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:  # pragma: no cover - abstract
        """The text of each memory unit as paper Table 5 defines it for this system."""
        raise NotImplementedError

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        return {}

    def _figures(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``mode``; ``units``: memory units as paper Table 5 counts them for this system;
        ``avg_tokens``: their average whitespace-token count; ``items``: stored rows; after
        the ledger's figures, the system's own (:meth:`_stats_extra`)."""
        items = self._items()
        units = self._token_units(items)
        tokens = [len(t.split()) for t in units]
        head = {
            "mode": self.config.mode,
            "units": len(units),
            "avg_tokens": round(sum(tokens) / len(tokens), 1) if tokens else 0.0,
            "items": len(items),
        }
        return head, self._stats_extra(items)
