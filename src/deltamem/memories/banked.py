"""One base for the memories that learn into a bank: :class:`BankedMemory`.

DeltaMem (:mod:`deltamem.memories.deltamem`), the flat memories
(:class:`~deltamem.memories.flat.FlatMemory`: Synapse, AWM, ReasoningBank, the lesson
memories, MCMA and its baselines) and the step memories
(:class:`~deltamem.memories.arigraph.base.StepMemory`: AriGraph and its baselines) learn the
same way; this class writes it once. ``learn(episode, recall)``:

1. validates the episode and its task, needs an embedder, refuses a bank opened read-only
   (:class:`~deltamem.errors.BankReadOnlyError`), all before any LLM call;
2. returns one ``unchanged`` Change for an episode the learned ledger already holds;
3. plans (:meth:`BankedMemory._plan_learn`: matches, extraction, LLM calls; outside any
   lock) a :class:`~deltamem.memories.plan.Plan` of write records;
4. in one transaction: claims the episode in the ledger (a concurrent learn of the same
   episode writes nothing and returns ``unchanged``), logs the plan's rejections and runs
   its writes through :func:`deltamem.memories.plan.apply`.

A memory whose decision can go stale while it plans (DeltaMem, when several processes share
a bank) plugs in through two hooks: :meth:`BankedMemory._attempts` says which attempts plan
outside the write lock and which under it, and :meth:`BankedMemory._check_plan`, run under
the lock before the writes, raises :class:`_Replan` to roll back and plan again.

The base also owns the common head of ``stats()`` (``system``, then the system's figures,
then ``episodes_learned``, ``last_episode_id``, ``rejections``), the check that a bank is
opened with the embedder it was built with, and the checks of a task.
:class:`ItemBankedMemory` adds what the memories on an
:class:`~deltamem.store.items.ItemStore` (the flat and step ones) open the same way: the
system a bank belongs to, the recorded configuration and mode, ``open()``.
"""

from __future__ import annotations

import functools
import logging
from abc import abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ValidationError

from deltamem import telemetry
from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.errors import (
    BankReadOnlyError,
    ConfigError,
    EmbedderMismatchError,
    InvalidInputError,
    StoreError,
    explain_validation,
)
from deltamem.llm.base import LLMClient
from deltamem.memories.plan import Plan, Rejection, apply
from deltamem.memory import Memory
from deltamem.store.items import ItemStore
from deltamem.types import Change, Changes, Episode, Recall, Task

__all__ = ["BankedMemory", "ItemBankedMemory"]

log = logging.getLogger("deltamem.memory")


class _Replan(Exception):
    """Raised by :meth:`BankedMemory._check_plan`: the bank changed under the plan's
    decision; the learn's transaction rolls back and the plan is made again."""


def _store_id(store: Any) -> str:
    """A bank's name in spans: its file name (no folders), or the store's path."""
    return _bank_name(str(getattr(store, "path", "") or ""))


@functools.lru_cache(maxsize=256)
def _bank_name(path: str) -> str:
    """:func:`_store_id` of a path (kept: a recall names its bank in its span every time)."""
    if "://" in path:  # a database URL: no credentials in telemetry
        return path.split("://", 1)[0] + "://" + path.rsplit("/", 1)[-1]
    return Path(path).name or path or "memory"


class BankedMemory(Memory):
    """A memory on a bank with a learned ledger (see the module docstring).

    A subclass sets ``store`` (a bank with the ledger: ``transaction``, ``is_learned``,
    ``mark_learned``, ``add_rejection``, ``learned_count``, ``last_learned``,
    ``rejections``, ``meta``, ``path``), ``embedder`` and ``readonly``, and implements
    :meth:`recall`, :meth:`_plan_learn` and :meth:`_figures`.
    """

    store: Any
    embedder: Embedder | None
    #: opened read-only: ``learn`` refuses before planning
    readonly: bool = False
    #: whether ``stats()`` names the system first (DeltaMem's figures never did)
    stats_names_system: ClassVar[bool] = True

    # -- checks ---------------------------------------------------------------------------
    @staticmethod
    def _check_task(task: Task) -> None:
        """:class:`InvalidInputError` for a non-task or an empty goal; :class:`ConfigError`
        for an unknown domain."""
        if not isinstance(task, Task):
            raise InvalidInputError(f"expected a Task, got {type(task).__name__}")
        get_domain(task.domain)  # unknown domain → ConfigError
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")

    def _need_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError(f"{self.name}: this bank was opened without an embedder "
                              "(inspection only)")
        return self.embedder

    def _check_embedder(self, meta: Mapping[str, Any]) -> None:
        """On open: :class:`EmbedderMismatchError` unless the bank's ``meta`` records this
        memory's embedder (name and dimension); a bank without a recorded one accepts any."""
        assert self.embedder is not None
        name, dim = meta.get("embedder_name"), meta.get("embedder_dim")
        if name is None:
            return
        if name != self.embedder.name or dim != self.embedder.dim:
            raise EmbedderMismatchError(
                f"bank {self.store.path} was built with embedder {name!r} (dim {dim}); "
                f"got {self.embedder.name!r} (dim {self.embedder.dim}). Open it with the same "
                "embedder, or build a new bank."
            )

    def _check_learnable(self, episode: Episode) -> None:
        """What every learn checks first, before any LLM call."""
        episode.validate()
        self._check_task(episode.task)
        self._need_embedder()
        if self.readonly:
            raise BankReadOnlyError(f"{self.name}: bank {self.store.path} is open read-only; "
                                    "it cannot be written (open it without readonly to learn)")

    # -- learn --------------------------------------------------------------------------------
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Validate, plan (LLM calls happen here, outside the lock), then write atomically.

        An episode id already learned returns one ``unchanged`` Change and writes nothing;
        invalid LLM output is rejected (Change ``rejected``, logged in the bank's
        rejections), never stored. See the module docstring for the steps.
        """
        with telemetry.memory_span("update_memory", system=self.name,
                                   store=_store_id(self.store)) as span:
            changes = self._learn(episode, recall)
            kinds = Counter(c.kind for c in changes)
            telemetry.set_attributes(span, {
                "gen_ai.memory.record.count": sum(kinds[k] for k in kinds
                                                  if k not in ("unchanged", "skipped")),
                **{f"deltamem.changes.{k}": n for k, n in sorted(kinds.items())},
            })
            return changes

    def _learn(self, episode: Episode, recall: Recall | None) -> Changes:
        self._check_learnable(episode)
        if self.store.is_learned(episode.id):
            return self._unchanged(episode)
        prepared = self._prepare_learn(episode, recall)
        try:
            return self._learn_once(episode, recall, prepared)
        except StoreError as e:
            if not getattr(e, "rolled_back", False):
                raise
            # the store lost its connection mid-transaction and the server rolled the learn
            # back (nothing of it is in the bank): one more try, on a new connection
            log.warning("learn %s: %s; trying once more", episode.id, e)
            return self._learn_once(episode, recall, prepared)

    def _learn_once(self, episode: Episode, recall: Recall | None, prepared: Any) -> Changes:
        for locked in self._attempts():
            try:
                with self.store.transaction() if locked else nullcontext():
                    plan = self._plan_learn(episode, recall, prepared)
                    with self.store.transaction():  # joins a locked attempt's
                        if not self.store.mark_learned(episode.id):
                            return self._unchanged(episode)
                        if not locked:
                            self._check_plan(plan, episode, prepared)
                        self._apply(plan, episode.id)
            except _Replan:
                log.debug("learn %s: the bank changed under its decision; planning again",
                          episode.id)
                continue
            break
        else:  # pragma: no cover - a subclass whose last attempt asked for a re-plan
            raise RuntimeError(f"{self.name}: the last learn attempt must hold the lock")
        self._learned(plan)
        return Changes(tuple(plan.changes))

    def _unchanged(self, episode: Episode) -> Changes:
        """What a second learn of ``episode`` returns (before or inside the transaction)."""
        return Changes((Change("unchanged", self.change_source, "episode already learned",
                               episode.id),))

    @property
    def change_source(self) -> str:
        """``source`` of the ``unchanged`` Change (default: the system's name)."""
        return self.name

    def _apply(self, plan: Plan, episode_id: str) -> None:
        """Log ``plan``'s rejections and run its writes (inside the caller's transaction)."""
        for rej in plan.rejections:
            self._log_rejection(episode_id, rej)
        apply(self.store, plan)

    def _log_rejection(self, episode_id: str, rej: Rejection) -> None:
        self.store.add_rejection(episode_id=episode_id, role=rej.role, reason=rej.reason,
                                 raw=rej.raw)

    # -- learn hooks ------------------------------------------------------------------------
    def _prepare_learn(self, episode: Episode, recall: Recall | None) -> Any:
        """What planning needs that is made once per learn, outside the lock (default:
        nothing)."""
        return None

    @abstractmethod
    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: Any) -> Plan:
        """What ``episode`` writes (``prepared``: :meth:`_prepare_learn`'s result). Called
        once per attempt; only the last attempt's plan is applied."""

    def _attempts(self) -> Iterable[bool]:
        """Whether each planning attempt holds the write lock while it plans. Default: one
        attempt, outside the lock (its plan is never checked). The last attempt must hold
        the lock unless :meth:`_check_plan` can never raise."""
        return (False,)

    def _check_plan(self, plan: Plan, episode: Episode, prepared: Any) -> None:
        """Run under the write lock, before the writes of a plan made outside it: raise
        :class:`_Replan` when the bank changed under its decision (default: never)."""

    def _learned(self, plan: Plan) -> None:
        """After the learn's transaction committed (default: nothing)."""

    # -- stats --------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Size figures: ``system`` (unless :attr:`stats_names_system` is off), the system's
        own figures (``units`` among them), ``episodes_learned``, ``last_episode_id``,
        ``rejections``, then the system's further figures (:meth:`_figures`)."""
        head, tail = self._figures()
        out: dict[str, Any] = {"system": self.name} if self.stats_names_system else {}
        out.update(head)
        out["episodes_learned"] = self.store.learned_count()
        out["last_episode_id"] = self.store.last_learned()
        out["rejections"] = len(self.store.rejections())
        out.update(tail)
        return out

    @abstractmethod
    def _figures(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The system's figures before the ledger's (with ``units``) and after them."""

    def close(self) -> None:
        self.store.close()


class ItemBankedMemory(BankedMemory):
    """A banked memory on an :class:`~deltamem.store.items.ItemStore` (the flat and the
    step memories): a bank records the system it belongs to, its embedder and its
    configuration; ``mode`` is ``llm`` or ``deterministic``.

    A subclass sets ``config_class`` (a pydantic model with a ``mode`` field) and calls
    :meth:`_open_bank`, :meth:`_configure` and :meth:`_record` from its ``__init__``.
    """

    config_class: ClassVar[type[BaseModel]]
    llm: LLMClient | None

    def _open_bank(self, store: ItemStore, embedder: Embedder | None, llm: LLMClient | None,
                   readonly: bool) -> dict[str, Any]:
        """Keep the bank and the models; :class:`StoreError` for a bank of another system.
        Returns the bank's meta."""
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.readonly = readonly
        meta = store.meta()
        if meta.get("system") not in (None, self.name):
            raise StoreError(f"bank {store.path} belongs to memory system {meta['system']!r}, "
                             f"not {self.name!r}")
        return meta

    def _configure(self, raw: Mapping[str, Any], mode: str | None,
                   llm: LLMClient | None) -> Any:
        """The config of ``raw`` settings, ``mode`` on top (``None``: the recorded one, else
        ``llm`` when an ``llm`` is given and ``deterministic`` otherwise);
        :class:`ConfigError` when invalid."""
        settings = dict(raw)
        if mode is not None:
            settings["mode"] = mode
        elif "mode" not in settings:
            settings["mode"] = "llm" if llm is not None else "deterministic"
        try:
            return self.config_class(**settings)
        except ConfigError:
            raise
        except ValidationError as e:
            raise ConfigError(
                f"invalid {self.name} configuration: {explain_validation(e)}") from e

    def _record(self, meta: Mapping[str, Any], config: BaseModel) -> None:
        """With an embedder: check it against the bank's (:meth:`_check_embedder`) and, on a
        writable bank, record the system, the embedder and ``config`` once."""
        if self.embedder is None:
            return
        self._check_embedder(meta)
        if not self.readonly:
            self.store.init_meta(system=self.name, embedder_name=self.embedder.name,
                                 embedder_dim=self.embedder.dim, config=config.model_dump())

    @classmethod
    def open(cls, path: str | Path = ":memory:", *, embedder: Embedder | None,
             llm: LLMClient | None = None, mode: str | None = None, readonly: bool = False,
             **options: Any) -> Self:
        """Open (or create) the bank at ``path`` (``":memory:"``: not persisted).

        ``embedder=None`` with ``readonly=True`` opens a bank for inspection; see the
        class's docstring for the other arguments and the errors.
        """
        store = ItemStore(path, readonly=readonly)
        try:
            return cls(store, embedder, llm=llm, mode=mode, readonly=readonly,  # type: ignore[call-arg]
                       **options)
        except BaseException:
            store.close()
            raise
