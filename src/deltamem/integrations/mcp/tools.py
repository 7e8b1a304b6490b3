"""What the MCP tools do, without the MCP SDK: tenant-scoped recall, learn, stats, tree.

The bank service the HTTP service uses too (:class:`deltamem.service.TenantBanks`): a
tenant names banks, never another tenant, and the tenant is part of the bank's storage
key (:class:`~deltamem.service.banks.BankSpace`); inputs are validated by the service's
request models (:mod:`deltamem.service.models`); a missing bank recalls nothing and is
created by its first learn.

Two layouts:

* **one bank** (a ``.db`` file, or a ``postgresql://…?bank=KEY`` URL): every tool works on
  it; its name is the file stem (or the key) and ``bank`` may be omitted. Local use only
  (stdio): one bank cannot be split between tenants.
* **a storage** (a folder of SQLite banks, or a ``postgresql://…`` URL without ``bank=``):
  banks by name per tenant, exactly as ``deltamem serve`` lays them out; ``bank`` defaults
  to ``default_bank``.

A learn without ``success`` is judged: a service built with a ``judge``
(:mod:`deltamem.judge`; ``deltamem mcp --judge SPEC``) reads the steps and decides, the
verdict comes back with the changes, and an uncertain or refused verdict learns nothing;
without a judge ``success`` is required.

A learn names the recall its episode followed by the ``recall_id`` that ``recall``
returned (the tool-calling model need not echo the whole recall). Recalls are kept in
this process, the most recent ``recall_capacity`` of them; an unknown, expired or
foreign id is an error, never a silent re-recall.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, Field, ValidationError

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, InvalidInputError, ToolInputError
from deltamem.extract.base import Extractor
from deltamem.judge import Judge
from deltamem.service import models as m
from deltamem.service.banks import BankSpace, check_name
from deltamem.service.tenants import TenantBanks
from deltamem.store.factory import is_url
from deltamem.types import Change, Recall, Task, Usage

DEFAULT_BANK = "default"
RECALL_CAPACITY = 4096


class RecallResult(m.RecallOut):
    """``recall``: the text for the prompt, the matched chains (ids, scores) and the id to
    hand back to ``learn``."""

    recall_id: str = Field(description="Pass to learn as recall_id (the recall the episode "
                                       "followed).")
    bank: str


class VerdictOut(BaseModel):
    """The judge's verdict on an episode learned without ``success``."""

    outcome: Literal["success", "failure", "uncertain", "refused"]
    reason: str
    judge: str


class LearnResult(m.LearnResponse):
    bank: str
    verdict: VerdictOut | None = Field(default=None, description="When the episode came "
                                       "without success: the judge's verdict (uncertain or "
                                       "refused: nothing was learned).")


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
        judge: decides the outcome of a learn that gives no ``success`` (module doc).
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
        judge: Judge | None = None,
    ) -> None:
        target = str(target)
        self.judge = judge
        self.single = is_single_bank(target)
        if self.single:
            self.bank_name = _single_name(target)
            space = BankSpace(target, fixed=target, fixed_name=self.bank_name)
        else:
            self.bank_name = check_name("bank", default_bank)
            if not is_url(target):
                Path(target).mkdir(parents=True, exist_ok=True)
            space = BankSpace(target)
        self.target = target
        self.banks = TenantBanks(space, embedder=embedder, extractor=extractor, llm=llm,
                                 config=config)
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

    def list_banks(self, tenant: str) -> m.BankListResponse:
        found = self.banks.list(tenant)
        if self.single:
            counts = next(iter(found.values()), None) if found else None
            infos = [m.BankInfo(name=self.bank_name, nodes=counts)] if found else []
            return m.BankListResponse(banks=infos)
        return m.BankListResponse(
            banks=[m.BankInfo(name=k, nodes=v) for k, v in sorted(found.items())]
        )

    # -- tools -----------------------------------------------------------------------------------
    def _task(self, tenant: str, bank: str, goal: str, scene: str, domain: str | None,
              task_id: str) -> m.TaskIn:
        if domain is None:
            domain = self.banks.bank_domain(tenant, bank)
        return _validate(m.TaskIn, {"id": task_id, "goal": goal, "scene": scene,
                                    "domain": domain}, "task")

    def recall(self, tenant: str, *, goal: str, scene: str = "", domain: str | None = None,
               bank: str | None = None, task_id: str = "task") -> RecallResult:
        name = self.bank_of(bank)
        task = self._task(tenant, name, goal, scene, domain, task_id).to_task()
        r = self.banks.recall(tenant, name, task)
        rid = self._keep(_Kept(tenant, name, task.goal, task.scene, r))
        return RecallResult(recall_id=rid, bank=name, **m.RecallOut.of(r).model_dump())

    def learn(self, tenant: str, *, goal: str, steps: list[dict[str, Any]] | list[m.StepIn],
              success: bool | None = None, reward: float | None = None, scene: str = "",
              domain: str | None = None, recall_id: str | None = None,
              bank: str | None = None, episode_id: str | None = None,
              task_id: str = "task") -> LearnResult:
        name = self.bank_of(bank)
        if success is None and self.judge is None:
            raise ToolInputError("success is required: this server has no judge to decide it "
                                 "(start it with --judge SPEC)")
        task_in = self._task(tenant, name, goal, scene, domain, task_id)
        ep_in = _validate(m.EpisodeIn, {
            "id": episode_id, "task": task_in.model_dump(),
            "steps": [s.model_dump() if isinstance(s, BaseModel) else s for s in steps],
            "success": bool(success),
            "reward": (1.0 if success else 0.0) if reward is None else reward,
        }, "episode")
        episode = ep_in.to_episode()
        episode.validate()
        given = self._recalled(recall_id, tenant, name, episode.task) if recall_id else None
        verdict = None
        if success is None:
            assert self.judge is not None
            judged = self.judge.judge(episode.task, episode.steps)
            verdict = VerdictOut(**judged.to_dict())
            if not judged.decided:
                skipped = Change("skipped", "judge", f"{judged.outcome} verdict from "
                                 f"{judged.judge}: {judged.reason}; nothing learned")
                return LearnResult(bank=name, changes=[m.ChangeOut(**skipped.__dict__)],
                                   usage=m.UsageOut.of(Usage()), verdict=verdict)
            won = bool(judged.success)
            episode = replace(episode, success=won, verdict=judged,
                              reward=(1.0 if won else 0.0) if reward is None else reward)
        out = self.banks.learn(tenant, name, episode, given)
        return LearnResult(bank=name, changes=out.changes, usage=out.usage, verdict=verdict)

    def stats(self, tenant: str, *, bank: str | None = None) -> m.StatsResponse:
        return self.banks.stats(tenant, self.bank_of(bank))

    def tree(self, tenant: str, *, bank: str | None = None,
             which: Literal["task", "env", "both"] = "both") -> m.TreeResponse:
        name = self.bank_of(bank)
        if which not in ("task", "env", "both"):
            raise ToolInputError(f"tree must be task, env or both, got {which!r}")
        return self.banks.tree(tenant, name, which)

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


def check_tenant(tenant: str) -> str:
    """``tenant`` if valid (same rule as API-key tenants), else :class:`InvalidInputError`."""
    try:
        return check_name("tenant", tenant)
    except ConfigError as e:
        raise InvalidInputError(str(e)) from None
