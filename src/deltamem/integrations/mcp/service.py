"""What the MCP tools do, without the MCP SDK: tenant-scoped recall, learn, stats, tree.

The same rules as the HTTP service (:mod:`deltamem.server.app`): a tenant names banks,
never another tenant, and the tenant is part of the bank's storage key
(:class:`~deltamem.server.banks.BankSpace`); inputs are validated by the service's
request models (:mod:`deltamem.server.models`); a missing bank recalls nothing and is
created by its first learn.

Two layouts:

* **one bank** (a ``.db`` file, or a ``postgresql://…?bank=KEY`` URL): every tool works on
  it; its name is the file stem (or the key) and ``bank`` may be omitted. Local use only
  (stdio): one bank cannot be split between tenants.
* **a storage** (a folder of SQLite banks, or a ``postgresql://…`` URL without ``bank=``):
  banks by name per tenant, exactly as ``deltamem serve`` lays them out; ``bank`` defaults
  to ``default_bank``.

A learn names the recall its episode followed by the ``recall_id`` that ``recall``
returned (the tool-calling model need not echo the whole recall). Recalls are kept in
this process, the most recent ``recall_capacity`` of them; an unknown, expired or
foreign id is an error, never a silent re-recall.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, Field, ValidationError

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, DeltaMemError, InvalidInputError
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.server import models as m
from deltamem.server.banks import BankNotFound, BankSpace, OpenBanks, check_name
from deltamem.store.factory import is_url
from deltamem.types import Recall, Task, Usage

DEFAULT_BANK = "default"
RECALL_CAPACITY = 4096


class ToolInputError(DeltaMemError):
    """A tool's arguments are invalid (the message names the field); nothing changed."""


class RecallResult(m.RecallOut):
    """``recall``: the text for the prompt, the matched chains (ids, scores) and the id to
    hand back to ``learn``."""

    recall_id: str = Field(description="Pass to learn as recall_id (the recall the episode "
                                       "followed).")
    bank: str


class LearnResult(m.LearnResponse):
    bank: str


@dataclass(frozen=True)
class _Kept:
    tenant: str
    bank: str
    goal: str
    scene: str
    recall: Recall


def is_single_bank(target: str) -> bool:
    """True when ``target`` names one bank (a ``.db`` file, an existing file, ``:memory:``,
    or a PostgreSQL URL with ``bank=``), False for a storage (folder or URL)."""
    if is_url(target):
        return any(k == "bank" for k, _ in parse_qsl(urlsplit(target).query))
    p = Path(target)
    return target == ":memory:" or p.suffix == ".db" or p.is_file()


def _single_name(target: str) -> str:
    if is_url(target):
        key = dict(parse_qsl(urlsplit(target).query))["bank"]
        name = key.replace("/", "-")
    else:
        name = "memory" if target == ":memory:" else Path(target).stem
    try:
        return check_name("bank", name)
    except ConfigError:
        return "bank"


def _node_out(n: Any) -> m.NodeOut:
    """A node as the service's tree body shows it (same fields as ``GET …/tree``)."""
    p = n.payload
    return m.NodeOut(
        id=n.id, tree=n.tree, kind=n.kind, label=n.label, parent=n.parent, depth=n.depth,
        success_hits=n.success_hits, consolidated=n.consolidated, origin=n.origin,
        source=n.source, trigger=n.trigger,
        payload=m.PayloadOut(activation=p.activation, procedure=p.procedure,
                             termination=p.termination),
        seq=n.seq, episode_id=n.episode_id, created_at=n.created_at,
    )


def _validate(model: type[BaseModel], data: dict[str, Any], what: str) -> Any:
    """``model(**data)`` or a :class:`ToolInputError` listing each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        bad = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or what}: {err['msg']}" for err in e.errors()
        )
        raise ToolInputError(f"invalid {what}: {bad}") from None


class BankService:
    """Tenant-scoped bank operations behind the MCP tools.

    Args:
        target: one bank or a storage (see the module doc).
        embedder: used for every bank (a bank built with another one is an error).
        extractor: the extractor of learns (default: structural).
        llm: the LLM behind ``extractor``, if any; its token usage per learn is returned.
        config: DeltaMem settings of banks created here (``domain`` ...).
        default_bank: the bank of calls that name none (storage layout).
        recall_capacity: recalls kept for ``learn(recall_id=...)``.
    """

    def __init__(
        self,
        target: str | Path,
        *,
        embedder: Embedder,
        extractor: Extractor | None = None,
        llm: Any = None,
        config: dict[str, Any] | None = None,
        default_bank: str = DEFAULT_BANK,
        recall_capacity: int = RECALL_CAPACITY,
    ) -> None:
        target = str(target)
        self.single = is_single_bank(target)
        if self.single:
            self.bank_name = _single_name(target)
            self.space = BankSpace(target, fixed=target)
        else:
            self.bank_name = check_name("bank", default_bank)
            if not is_url(target):
                Path(target).mkdir(parents=True, exist_ok=True)
            self.space = BankSpace(target)
        self.target = target
        self.banks = OpenBanks(self.space, embedder, extractor, config)
        self.llm = llm
        self._llm_lock = threading.Lock()
        self._recalls: OrderedDict[str, _Kept] = OrderedDict()
        self._recalls_lock = threading.Lock()
        self.recall_capacity = recall_capacity

    # -- banks -----------------------------------------------------------------------------------
    def bank_of(self, bank: str | None) -> str:
        """The bank a call means: its name checked, or the default."""
        if bank is None or bank == "":
            return self.bank_name
        if self.single and bank != self.bank_name:
            raise ToolInputError(f"this server holds one bank, {self.bank_name!r}; got {bank!r}")
        try:
            return check_name("bank", bank)
        except ConfigError as e:
            raise ToolInputError(str(e)) from None

    @contextmanager
    def _open(self, tenant: str, bank: str, *, create: bool) -> Iterator[DeltaMem]:
        loc = self.space.location(tenant, bank)
        try:
            with self.banks.use(loc, create=create) as mem:
                yield mem
        except BankNotFound:
            raise BankNotFound(f"no bank named {bank!r}") from None

    def list_banks(self, tenant: str) -> m.BankListResponse:
        if self.single:
            found = self.space.list(tenant)
            counts = next(iter(found.values()), None) if found else None
            infos = [m.BankInfo(name=self.bank_name, nodes=counts)] if found else []
            return m.BankListResponse(banks=infos)
        found = self.space.list(tenant)
        return m.BankListResponse(
            banks=[m.BankInfo(name=k, nodes=v) for k, v in sorted(found.items())]
        )

    # -- tools -----------------------------------------------------------------------------------
    def _task(self, tenant: str, bank: str, goal: str, scene: str, domain: str | None,
              task_id: str) -> m.TaskIn:
        if domain is None:
            domain = self._bank_domain(tenant, bank)
        return _validate(m.TaskIn, {"id": task_id, "goal": goal, "scene": scene,
                                    "domain": domain}, "task")

    def _bank_domain(self, tenant: str, bank: str) -> str:
        """The domain of an existing bank, else that of banks created here."""
        try:
            with self._open(tenant, bank, create=False) as mem:
                return mem.config.domain
        except BankNotFound:
            return str(self.banks.config.get("domain", "generic"))

    def recall(self, tenant: str, *, goal: str, scene: str = "", domain: str | None = None,
               bank: str | None = None, task_id: str = "task") -> RecallResult:
        name = self.bank_of(bank)
        task_in = self._task(tenant, name, goal, scene, domain, task_id)
        task = task_in.to_task()
        try:
            with self._open(tenant, name, create=False) as mem:
                r = mem.recall(task)
        except BankNotFound:
            DeltaMem._check_task(task)
            r = Recall()
        rid = self._keep(_Kept(tenant, name, task.goal, task.scene, r))
        return RecallResult(recall_id=rid, bank=name, **m.RecallOut.of(r).model_dump())

    def learn(self, tenant: str, *, goal: str, steps: list[dict[str, Any]] | list[m.StepIn],
              success: bool, reward: float | None = None, scene: str = "",
              domain: str | None = None, recall_id: str | None = None,
              bank: str | None = None, episode_id: str | None = None,
              task_id: str = "task") -> LearnResult:
        name = self.bank_of(bank)
        task_in = self._task(tenant, name, goal, scene, domain, task_id)
        ep_in = _validate(m.EpisodeIn, {
            "id": episode_id, "task": task_in.model_dump(),
            "steps": [s.model_dump() if isinstance(s, BaseModel) else s for s in steps],
            "success": success, "reward": (1.0 if success else 0.0) if reward is None else reward,
        }, "episode")
        episode = ep_in.to_episode()
        episode.validate()
        given = self._recalled(recall_id, tenant, name, episode.task) if recall_id else None
        with self._open(tenant, name, create=True) as mem, self._metered() as usage:
            changes = mem.learn(episode, given)
        return LearnResult(
            bank=name,
            changes=[m.ChangeOut(**c) for c in changes.to_list()],
            usage=m.UsageOut.of(usage),
        )

    def stats(self, tenant: str, *, bank: str | None = None) -> m.StatsResponse:
        name = self.bank_of(bank)
        with self._open(tenant, name, create=False) as mem:
            return m.StatsResponse(bank=name, meta=mem.store.meta(), **mem.stats())

    def tree(self, tenant: str, *, bank: str | None = None,
             which: Literal["task", "env", "both"] = "both") -> m.TreeResponse:
        name = self.bank_of(bank)
        if which not in ("task", "env", "both"):
            raise ToolInputError(f"tree must be task, env or both, got {which!r}")
        with self._open(tenant, name, create=False) as mem:
            trees = ("task", "env") if which == "both" else (which,)
            nodes = [n for t in trees for n in mem.nodes(t)]  # type: ignore[arg-type]
            meta = mem.store.meta()
        return m.TreeResponse(bank=name, embedder=meta.get("embedder_name"),
                              config=meta.get("config", {}), nodes=[_node_out(n) for n in nodes])

    def close(self) -> None:
        self.banks.close()

    # -- recalls by id ------------------------------------------------------------------------
    def _keep(self, kept: _Kept) -> str:
        rid = "rc_" + secrets.token_urlsafe(12)
        with self._recalls_lock:
            self._recalls[rid] = kept
            while len(self._recalls) > self.recall_capacity:
                self._recalls.popitem(last=False)
        return rid

    def _recalled(self, rid: str, tenant: str, bank: str, task: Task) -> Recall:
        with self._recalls_lock:
            kept = self._recalls.get(rid)
        if kept is None or kept.tenant != tenant or kept.bank != bank:
            raise ToolInputError(
                f"unknown recall_id {rid!r} for bank {bank!r} (expired, from another bank or "
                "another server process): recall again, or learn without recall_id"
            )
        if kept.goal != task.goal or kept.scene != task.scene:
            raise ToolInputError(f"recall_id {rid!r} was made for another task (goal or scene "
                                 "differ); learn needs the recall of this episode's task")
        return kept.recall

    @contextmanager
    def _metered(self) -> Iterator[Usage]:
        out = Usage()
        if self.llm is None:
            yield out
            return
        with self._llm_lock:
            before = self.llm.usage.snapshot()
            try:
                yield out
            finally:
                out.merge(self.llm.usage.since(before))


def check_tenant(tenant: str) -> str:
    """``tenant`` if valid (same rule as API-key tenants), else :class:`InvalidInputError`."""
    try:
        return check_name("tenant", tenant)
    except ConfigError as e:
        raise InvalidInputError(str(e)) from None
