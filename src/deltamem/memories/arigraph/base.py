"""What AriGraph and its baselines share: step-level memory on an item bank.

These memories learn *during* the episode. The protocol (``deltamem.memory``):

* ``recall(task)`` opens a **session** for the task (in memory only: the bank is
  not touched) and returns what is already known about it;
* ``observe(step)`` feeds one step and returns the :class:`Recall` to use for
  the next decision. A step with an empty ``action`` is the episode's opening
  observation (the Ariadne agent sends ``Step("", task.observation)`` first);
  when it is never sent, the task's observation is ingested before the first
  real step;
* ``learn(episode)`` writes the session's result to the bank in one
  transaction (idempotent per episode id). When no session matches the
  episode (another agent played it, or a crash), the episode's observations
  are ingested first, so the bank ends up the same either way.

The Ariadne agent also calls :meth:`StepMemory.note_plan` after planning
(retrieval queries use the plan) and, for memories with ``trials > 1``
(Reflexion), :meth:`StepMemory.reflect` between failed trials.

LLM outputs that stay invalid are logged (``deltamem.memory``), counted in the
session and stored in the bank's ``rejections`` table by ``learn``; the step
goes on without them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError, StoreError
from deltamem.llm.base import LLMClient
from deltamem.memory import Memory
from deltamem.store.items import Item, ItemStore
from deltamem.types import Change, Changes, Episode, Recall, Step, Task

__all__ = ["Scope", "Session", "StepConfig", "StepMemory"]

log = logging.getLogger("deltamem.memory")

Scope = Literal["task", "global"]


class StepConfig(BaseModel):
    """Settings every step-level memory has.

    Attributes:
        domain: a name from :data:`deltamem.domains.DOMAINS`.
        mode: ``llm`` (the paper's LLM calls) or ``deterministic`` (rules, no LLM).
        scope: ``task``: what is stored is keyed by task id (a new game starts
            empty, the same game played again continues); ``global``: one
            memory across every task.
        history: recent observations/actions the agent keeps (paper's ``n_prev``).
        explore_check: how the Ariadne agent decides to explore: ``keywords`` in the
            first sub-goal (no LLM call) or ``llm`` (one more call per step).
        plan_steps: most sub-goals in the Ariadne agent's plan (bounds the planner's
            JSON answer, hence its cost with a small local model).

    ``history``, ``explore_check`` and ``plan_steps`` are read by the Ariadne agent
    (:meth:`deltamem.agents.ariadne.AriadneAgent.settings`), so the run configuration's
    memory options can set them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = "generic"
    mode: Literal["llm", "deterministic"] = "deterministic"
    scope: Scope = "task"
    history: int = 5
    explore_check: Literal["keywords", "llm"] = "keywords"
    plan_steps: int = Field(default=5, ge=1, le=20)

    @model_validator(mode="after")
    def _check(self) -> Self:
        get_domain(self.domain)
        if self.history < 0:
            raise ValueError("history must be >= 0")
        return self


@dataclass
class Session:
    """The memory's working state for the episode being played."""

    task: Task
    opened: bool = False
    steps: list[Step] = field(default_factory=list)
    plan: str = ""
    rejections: list[dict[str, str]] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)
    state: Any = None

    @property
    def step_index(self) -> int:
        return len(self.steps)


class StepMemory(Memory):
    """Base class (see the module docstring). Subclasses set ``name``, ``config_class`` and
    implement :meth:`_begin`, :meth:`_ingest`, :meth:`_retrieve` and :meth:`_writes`."""

    name: ClassVar[str] = "step"  # type: ignore[misc]
    config_class: ClassVar[type[StepConfig]] = StepConfig
    #: the agent the runner plays this memory with
    agent: ClassVar[str] = "ariadne"
    #: memory header put before recalled text
    header: ClassVar[str] = ""

    def __init__(self, store: ItemStore, embedder: Embedder | None, *,
                 llm: LLMClient | None = None, mode: str | None = None, readonly: bool = False,
                 **options: Any) -> None:
        self.store = store
        self.embedder = embedder
        self.llm = llm
        self.readonly = readonly
        meta = store.meta()
        if meta.get("system") not in (None, self.name):
            raise StoreError(f"bank {store.path} belongs to memory system {meta['system']!r}, "
                             f"not {self.name!r}")
        raw = {**dict(meta.get("config") or {}), **options}
        if mode is not None:
            raw["mode"] = mode
        elif "mode" not in raw:
            raw["mode"] = "llm" if llm is not None else "deterministic"
        try:
            self.config = self.config_class(**raw)
        except ValidationError as e:
            raise ConfigError(f"invalid {self.name} configuration: {e}") from e
        if self.config.mode == "llm" and llm is None and not readonly:
            raise ConfigError(f"{self.name}: mode 'llm' needs an llm (--llm on the command "
                              "line; or mode='deterministic')")
        if embedder is not None:
            if readonly:
                store.check_embedder(embedder.name, embedder.dim)
            else:
                store.init_meta(system=self.name, embedder_name=embedder.name,
                                embedder_dim=embedder.dim, config=self.config.model_dump())
        self.session: Session | None = None

    @classmethod
    def open(cls, path: str | Path = ":memory:", *, embedder: Embedder | None,
             llm: LLMClient | None = None, mode: str | None = None, readonly: bool = False,
             **options: Any) -> Self:
        """Open (or create) the bank at ``path`` (``":memory:"``: not persisted).

        ``embedder=None`` with ``readonly=True`` opens a bank for inspection.
        """
        store = ItemStore(path, readonly=readonly)
        try:
            return cls(store, embedder, llm=llm, mode=mode, readonly=readonly, **options)
        except BaseException:
            store.close()
            raise

    # -- helpers ----------------------------------------------------------------------------
    @property
    def trials(self) -> int:
        """Attempts per task the Ariadne agent makes (Reflexion: more than one)."""
        return 1

    def scope_key(self, task: Task) -> str:
        return task.id if self.config.scope == "task" else "global"

    def _need_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError(f"{self.name}: this bank was opened without an embedder "
                              "(inspection only)")
        return self.embedder

    def _need_llm(self) -> LLMClient:
        if self.llm is None:
            raise ConfigError(f"{self.name} is in mode 'llm' but has no llm")
        return self.llm

    @property
    def llm_mode(self) -> bool:
        return self.config.mode == "llm"

    def _reject(self, session: Session, error: ExtractionError) -> None:
        session.rejections.append({"role": error.role or self.name, "reason": str(error),
                                   "raw": error.raw})

    @staticmethod
    def _check_task(task: Task) -> None:
        if not isinstance(task, Task):
            raise InvalidInputError(f"expected a Task, got {type(task).__name__}")
        get_domain(task.domain)
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")

    # -- the protocol -------------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        """Open a session for ``task`` (nothing stored changes) and return what is known."""
        self._check_task(task)
        self._need_embedder()
        session = Session(task=task)
        self._begin(session)
        self.session = session
        return self._retrieve(session)

    def observe(self, step: Step) -> Recall | None:
        """Ingest ``step`` into the session; ``None`` when no session is open."""
        session = self.session
        if session is None:
            return None
        if not isinstance(step, Step):
            raise InvalidInputError(f"expected a Step, got {type(step).__name__}")
        if not step.action.strip():
            if not session.opened:
                session.opened = True
                self._ingest(session, "", step.observation or session.task.observation)
            return self._retrieve(session)
        if not session.opened:
            session.opened = True
            self._ingest(session, "", session.task.observation)
        session.steps.append(step)
        self._ingest(session, step.action, step.observation)
        return self._retrieve(session)

    def note_plan(self, plan: str) -> None:
        """The agent's current plan (used as a retrieval query by the next ``observe``)."""
        if self.session is not None:
            self.session.plan = str(plan)

    def reflect(self, episode: Episode) -> str | None:
        """A reflection on a failed trial, kept for the next trial; ``None`` by default."""
        return None

    def _session_for(self, episode: Episode) -> Session:
        s = self.session
        if (s is not None and s.task.id == episode.task.id and s.opened
                and [x.action for x in s.steps] == [x.action for x in episode.steps]):
            return s
        s = Session(task=episode.task, reflections=list(s.reflections) if s else [])
        self._begin(s)
        s.opened = True
        self._ingest(s, "", episode.task.observation)
        for step in episode.steps:
            s.steps.append(step)
            self._ingest(s, step.action, step.observation)
        return s

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Write the episode's session to the bank atomically (see the module docstring)."""
        episode.validate()
        self._check_task(episode.task)
        self._need_embedder()
        if self.readonly:
            raise StoreError(f"{self.name}: bank {self.store.path} is open read-only")
        if self.store.is_learned(episode.id):
            return Changes((Change("unchanged", self.name, "episode already learned",
                                   episode.id),))
        session = self._session_for(episode)
        changes, writes = self._writes(session, episode)
        for rej in session.rejections:
            changes.append(Change("rejected", self.name, f"{rej['role']}: {rej['reason']}"))
        with self.store.transaction():
            if not self.store.mark_learned(episode.id):
                return Changes((Change("unchanged", self.name, "episode already learned",
                                       episode.id),))
            for rej in session.rejections:
                self.store.add_rejection(episode_id=episode.id, **rej)
            for write in writes:
                write()
        self.session = None
        return Changes(tuple(changes))

    def _put(self, kind: str, key: str, text: str, payload: Mapping[str, Any],
             episode_id: str) -> Callable[[], None]:
        """A write that replaces the one item of ``(kind, key)`` (or inserts it)."""
        def write() -> None:
            old = self.store.items(kind=kind, key=key)
            if old:
                self.store.update(old[0].id, text=text, payload=payload, embedding=None,
                                  episode_id=episode_id)
            else:
                self.store.insert(Item(system=self.name, kind=kind, key=key, text=text,
                                       payload=payload, episode_id=episode_id))
        return write

    def stats(self) -> dict[str, Any]:
        """``units`` (stored items), ``items`` by kind, ``episodes_learned``,
        ``last_episode_id``, ``rejections``, ``mode``, ``scope`` plus system figures."""
        items = self.store.items()
        kinds: dict[str, int] = {}
        for it in items:
            kinds[it.kind] = kinds.get(it.kind, 0) + 1
        out: dict[str, Any] = {
            "system": self.name,
            "mode": self.config.mode,
            "scope": self.config.scope,
            "units": len(items),
            "items": kinds,
            "episodes_learned": self.store.learned_count(),
            "last_episode_id": self.store.last_learned(),
            "rejections": len(self.store.rejections()),
        }
        out.update(self._stats_extra(items))
        return out

    def close(self) -> None:
        self.store.close()

    # -- subclass hooks -----------------------------------------------------------------------
    def _begin(self, session: Session) -> None:
        """Load what the bank holds for ``session.task`` into ``session.state`` (read-only)."""

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        """Take in one observation (``action`` ``""``: the opening one)."""

    def _retrieve(self, session: Session) -> Recall:  # pragma: no cover - abstract
        raise NotImplementedError

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Callable[[], object]]]:  # pragma: no cover
        raise NotImplementedError

    def _stats_extra(self, items: list[Item]) -> dict[str, Any]:
        return {}
