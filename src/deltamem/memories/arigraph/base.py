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
  transaction (idempotent per episode id: the learn of
  :class:`~deltamem.memories.banked.BankedMemory`, fed by :meth:`StepMemory._writes`).
  When no session matches the episode (another agent played it, or a crash), the
  episode's observations are ingested first, so the bank ends up the same either way.

The Ariadne agent also calls :meth:`StepMemory.note_plan` after planning
(retrieval queries use the plan) and, for memories with ``trials > 1``
(Reflexion), :meth:`StepMemory.reflect` between failed trials.

LLM outputs that stay invalid are logged (``deltamem.memory``), counted in the
session and stored in the bank's ``rejections`` table by ``learn``; the step
goes on without them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError
from deltamem.llm.base import LLMClient
from deltamem.memories.banked import ItemBankedMemory
from deltamem.memories.plan import Plan, PutItem, Rejection, Write
from deltamem.store.items import Item, ItemStore
from deltamem.types import Change, Episode, Recall, Step, Task

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


class StepMemory(ItemBankedMemory):
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
        meta = self._open_bank(store, embedder, llm, readonly)
        self.config = self._configure({**dict(meta.get("config") or {}), **options}, mode, llm)
        if self.config.mode == "llm" and llm is None and not readonly:
            raise ConfigError(f"{self.name}: mode 'llm' needs an llm (--llm on the command "
                              "line; or mode='deterministic')")
        self._record(meta, self.config)
        self.session: Session | None = None

    # -- helpers ----------------------------------------------------------------------------
    @property
    def trials(self) -> int:
        """Attempts per task the Ariadne agent makes (Reflexion: more than one)."""
        return 1

    def scope_key(self, task: Task) -> str:
        return task.id if self.config.scope == "task" else "global"

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

    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: object) -> Plan:
        """The episode's session (see the module docstring) as a plan: the system's
        :meth:`_writes`, then the session's rejected LLM outputs."""
        session = self._session_for(episode)
        changes, writes = self._writes(session, episode)
        plan = Plan(changes=list(changes), writes=list(writes))
        for rej in session.rejections:
            plan.changes.append(Change("rejected", self.name, f"{rej['role']}: {rej['reason']}"))
            plan.rejections.append(Rejection(self.name, rej["role"], rej["reason"], rej["raw"]))
        return plan

    def _learned(self, plan: Plan) -> None:
        self.session = None

    def _put(self, kind: str, key: str, text: str, payload: Mapping[str, Any],
             episode_id: str) -> PutItem:
        """A write that replaces the one item of ``(kind, key)`` (or inserts it)."""
        return PutItem(self.name, kind, key, text, payload, episode_id)

    def _figures(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``mode``, ``scope``, ``units`` (stored items), ``items`` by kind; after the
        ledger's figures, the system's own (:meth:`_stats_extra`)."""
        items = self.store.items()
        kinds: dict[str, int] = {}
        for it in items:
            kinds[it.kind] = kinds.get(it.kind, 0) + 1
        head = {"mode": self.config.mode, "scope": self.config.scope, "units": len(items),
                "items": kinds}
        return head, self._stats_extra(items)

    # -- subclass hooks -----------------------------------------------------------------------
    def _begin(self, session: Session) -> None:
        """Load what the bank holds for ``session.task`` into ``session.state`` (read-only)."""

    def _ingest(self, session: Session, action: str, observation: str) -> None:
        """Take in one observation (``action`` ``""``: the opening one)."""

    def _retrieve(self, session: Session) -> Recall:  # pragma: no cover - abstract
        raise NotImplementedError

    def _writes(self, session: Session, episode: Episode
                ) -> tuple[list[Change], list[Write]]:  # pragma: no cover - abstract
        """What the session writes: its changes and write records
        (:mod:`deltamem.memories.plan`)."""
        raise NotImplementedError

    def _stats_extra(self, items: list[Item]) -> dict[str, Any]:
        return {}
