"""What a tenant does with its banks: list, recall, learn, stats, tree, explain, export,
import, delete.

:class:`TenantBanks` holds the operations behind the HTTP routes (:mod:`deltamem.server`)
and the MCP tools (:mod:`deltamem.integrations.mcp`), without either framework. A tenant
names banks, never another tenant: the tenant is part of the bank's storage key
(:class:`~deltamem.service.banks.BankSpace`), so no call reaches another tenant's rows. A
missing bank recalls nothing and is created by its first learn. Answers are the response
bodies of :mod:`deltamem.service.models`; errors are the library's (:mod:`deltamem.errors`),
among them :class:`~deltamem.errors.BankNotFound`, :class:`~deltamem.errors.ReadOnlyError` and
:class:`~deltamem.errors.BankNotEmpty` (re-exported here and by :mod:`deltamem.service`; the
HTTP service answers 404, 403 and 409).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from deltamem import telemetry
from deltamem.embed.base import Embedder
from deltamem.errors import (
    BankNotEmpty,
    BankNotFound,
    EmbedderMismatchError,
    InvalidImportError,
    ReadOnlyError,
)
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.memories.deltamem.edit_log import Edit
from deltamem.service import models as m
from deltamem.service.banks import BankSpace, OpenBanks
from deltamem.store.frames import Unframe, frame
from deltamem.types import Episode, Recall, Task, Usage

__all__ = ["LOCAL_TENANT", "BankNotEmpty", "ReadOnlyError", "TenantBanks"]

LOCAL_TENANT = "local"
"""The tenant of a service without API keys (the local viewer, an MCP server on stdio)."""

TreeChoice = Literal["task", "env", "both"]


class TenantBanks:
    """The banks of every tenant under one storage, and what a tenant can do with them.

    Args:
        space: where banks live.
        embedder: used for every bank (a bank built with another one is an
            :class:`~deltamem.errors.EmbedderMismatchError`).
        extractor: the extractor of learns (default: structural).
        llm: the LLM behind ``extractor``, if any; its token usage per learn is returned.
        config: DeltaMem settings of banks created here.
        readonly: open banks for reading only and refuse learn, import and delete.
    """

    def __init__(
        self,
        space: BankSpace,
        *,
        embedder: Embedder,
        extractor: Extractor | None = None,
        llm: Any = None,
        config: dict[str, Any] | None = None,
        readonly: bool = False,
    ) -> None:
        self.space = space
        self.banks = OpenBanks(space, embedder, extractor, config, readonly=readonly)
        self.llm = llm
        self.readonly = readonly
        self._llm_lock = threading.Lock()

    # -- helpers ------------------------------------------------------------------------------
    def _writable(self) -> None:
        if self.readonly:
            raise ReadOnlyError("this service is read-only")

    @contextmanager
    def use(self, tenant: str, bank: str, *, create: bool) -> Iterator[DeltaMem]:
        """The tenant's bank, locked for the block; :class:`BankNotFound` when it does not
        exist and ``create`` is False."""
        loc = self.space.location(tenant, bank)
        try:
            with telemetry.tenant(tenant), self.banks.use(loc, create=create) as mem:
                yield mem
        except BankNotFound:
            raise BankNotFound(f"no bank named {bank!r}") from None

    @contextmanager
    def metered(self) -> Iterator[Usage]:
        """Usage of the service's LLM during the block (serialised while an LLM is in use)."""
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

    def bank_domain(self, tenant: str, bank: str) -> str:
        """The domain of an existing bank, else that of banks created here."""
        try:
            with self.use(tenant, bank, create=False) as mem:
                return mem.config.domain
        except BankNotFound:
            return str(self.banks.config.get("domain", "generic"))

    # -- operations ---------------------------------------------------------------------------
    def list(self, tenant: str) -> dict[str, dict[str, int] | None]:
        """The tenant's banks: name → node count per tree (``None``: unreadable now)."""
        return self.space.list(tenant)

    def recall(self, tenant: str, bank: str, task: Task) -> Recall:
        """Eq. 6 match in each tree and the matched chains; a missing bank recalls nothing."""
        try:
            with self.use(tenant, bank, create=False) as mem:
                return mem.recall(task)
        except BankNotFound:
            DeltaMem._check_task(task)
            return Recall()

    def learn(self, tenant: str, bank: str, episode: Episode,
              recall: Recall | None = None) -> m.LearnResponse:
        """Learn ``episode`` (creating the bank); every change and the LLM tokens spent."""
        self._writable()
        episode.validate()
        with self.use(tenant, bank, create=True) as mem, self.metered() as usage:
            changes = mem.learn(episode, recall)
        return m.LearnResponse(
            changes=[m.ChangeOut(**c) for c in changes.to_list()], usage=m.UsageOut.of(usage)
        )

    def stats(self, tenant: str, bank: str) -> m.StatsResponse:
        """Node counts by tree, depth, kind and label; episodes learned; the bank's meta."""
        with self.use(tenant, bank, create=False) as mem:
            return m.StatsResponse(bank=bank, meta=mem.store.meta(), **mem.stats())

    def tree(self, tenant: str, bank: str, which: TreeChoice = "both") -> m.TreeResponse:
        """Every node of one tree or both, with the bank's embedder and configuration."""
        with self.use(tenant, bank, create=False) as mem:
            names = ("task", "env") if which == "both" else (which,)
            nodes = [n for t in names for n in mem.nodes(t)]  # type: ignore[arg-type]
            hidden = set(mem.bank.hidden)
            if hidden:  # kept out of the trees: read from the store, in commit order
                nodes = sorted(nodes + [n for n in mem.store.nodes_by_id(sorted(hidden))
                                        if n.tree in names], key=lambda n: (n.tree, n.seq))
            meta = mem.store.meta()
        return m.TreeResponse(bank=bank, embedder=meta.get("embedder_name"),
                              config=meta.get("config", {}),
                              nodes=[m.NodeOut.of(n, n.id in hidden) for n in nodes])

    def explain(self, tenant: str, bank: str, query: str, scene: str = "") -> m.ExplainResponse:
        """Scores of a query against both trees: the Eq. 6 match, its chain with each node's
        score, and the five best nodes of each tree (the viewer's search)."""
        with self.use(tenant, bank, create=False) as mem:
            task = Task(id="explain", goal=query, scene=scene or query, domain=mem.config.domain)
            matches = mem.match(task)
            queries = mem.queries(task)
            assert mem.embedder is not None
            out: dict[str, m.TreeExplain] = {}
            for name, match in matches.items():
                t = mem.trees[name]
                q = mem.embedder.embed_queries([queries[name]])[0]
                scores = dict(zip((n.id for n in t), t.scores(q, mem.config.epsilon).tolist(),
                                  strict=True))
                chain = t.chain(match.node_id) if match.accepted and match.node_id else []
                if match.node_id is not None:
                    scores[match.node_id] = float(match.score or 0.0)
                top = sorted(scores.items(), key=lambda kv: -kv[1])[:5]
                out[name] = m.TreeExplain(
                    match=m.MatchDetail(**match.to_dict(), chain=[n.id for n in chain]),
                    chain=[m.ScoredNode(id=n.id, score=scores[n.id]) for n in chain],
                    top=[m.ScoredNode(id=i, score=s) for i, s in top],
                )
        return m.ExplainResponse(trees=out)  # type: ignore[arg-type]

    # -- the inspector's edits (:mod:`deltamem.memories.deltamem.inspector`) -------------------
    def _edit(self, tenant: str, bank: str, do: Callable[[DeltaMem], Edit]) -> m.EditOut:
        self._writable()
        with self.use(tenant, bank, create=False) as mem:
            return m.EditOut(**do(mem).to_dict())

    def edit_node(self, tenant: str, bank: str, node_id: str, body: m.NodeEditRequest,
                  who: str) -> m.EditOut:
        """New text for a node (a new trigger embedded again); the edit's audit row."""
        return self._edit(tenant, bank, lambda mem: mem.edit_node(
            node_id, who=who, trigger=body.trigger, activation=body.activation,
            procedure=body.procedure, termination=body.termination, reason=body.reason))

    def hide_node(self, tenant: str, bank: str, node_id: str, hidden: bool, who: str,
                  reason: str = "") -> m.EditOut:
        """Hide a node and its subtree from recall (``hidden=False``: show them again)."""
        return self._edit(tenant, bank, lambda mem: mem.hide_node(
            node_id, who=who, hidden=hidden, reason=reason))

    def relabel_node(self, tenant: str, bank: str, node_id: str, label: str, who: str,
                     reason: str = "") -> m.EditOut:
        """Set a node's label to SUCCESS or FAILURE."""
        return self._edit(tenant, bank, lambda mem: mem.relabel_node(
            node_id, label, who=who, reason=reason))

    def delete_node(self, tenant: str, bank: str, node_id: str, who: str, *,
                    subtree: bool = False, reason: str = "") -> m.EditOut:
        """Remove a node (one with children only with ``subtree``)."""
        return self._edit(tenant, bank, lambda mem: mem.delete_node(
            node_id, who=who, subtree=subtree, reason=reason))

    def undo_edit(self, tenant: str, bank: str, edit_id: str, who: str,
                  reason: str = "") -> m.EditOut:
        """Revert one inspector edit exactly."""
        return self._edit(tenant, bank, lambda mem: mem.undo_edit(
            edit_id, who=who, reason=reason))

    def edits(self, tenant: str, bank: str) -> m.EditsResponse:
        """The inspector's edits of the bank, oldest first."""
        with self.use(tenant, bank, create=False) as mem:
            return m.EditsResponse(bank=bank, edits=[m.EditOut(**e.to_dict())
                                                     for e in mem.edits()])

    def export(self, tenant: str, bank: str) -> list[dict[str, Any]]:
        """Every record of the bank (meta, nodes, logs), as ``deltamem export`` writes them:
        between a header and a trailer (:mod:`deltamem.store.frames`)."""
        with self.use(tenant, bank, create=False) as mem:
            return frame(mem.store.iter_export())

    def import_(self, tenant: str, bank: str, records: list[dict[str, Any]], *,
                partial: bool = False) -> m.ImportResponse:
        """Load exported ``records`` into a new (or empty) bank: all in one transaction or
        none (a bank made for it is removed again). Records with a header must end with
        their trailer and agree with it (else :class:`IncompleteExportError`, naming what is
        missing) unless ``partial``; the response's ``notes`` say what was skipped."""
        self._writable()
        emb = self.banks.embedder
        body = [r for r in records if r.get("type") not in ("header", "trailer")]
        if not body:
            raise InvalidImportError("the export holds no records")
        first = body[0]
        if first.get("type") != "meta":
            raise InvalidImportError("the first record must be the bank's meta record")
        if "embedder_name" in first and (
            first.get("embedder_name") != emb.name or first.get("embedder_dim") != emb.dim
        ):
            raise EmbedderMismatchError(
                f"the export was built with embedder {first.get('embedder_name')!r} (dim "
                f"{first.get('embedder_dim')}); this service uses {emb.name!r} (dim {emb.dim})"
            )
        loc = self.space.location(tenant, bank)
        existed = self.space.exists(loc)
        try:
            with self.banks.use(loc, create=True) as mem:
                if mem.store.load_nodes():
                    raise BankNotEmpty(f"bank {bank!r} already has nodes; import needs "
                                       "an empty bank")
                stream = Unframe(records, partial=partial, partial_hint='"partial": true')
                try:
                    n = mem.store.import_records(stream)
                except InvalidImportError as e:
                    raise type(e)(f"cannot import: {e}") from e
        except BaseException:
            if not existed:
                self.banks.forget(loc)
                self.space.drop(loc)
            raise
        self.banks.forget(loc)  # reopen with the imported configuration
        return m.ImportResponse(nodes=n, notes=stream.result.notes)

    def delete(self, tenant: str, bank: str) -> m.DeleteResponse:
        """Remove the bank's storage (SQLite file / PostgreSQL schema); :class:`BankNotFound`
        when absent. Requests already using the bank finish first; requests arriving meanwhile
        wait, then find no bank (see :mod:`deltamem.service.banks` for other processes)."""
        self._writable()
        if not self.banks.delete(self.space.location(tenant, bank)):
            raise BankNotFound(f"no bank named {bank!r}")
        return m.DeleteResponse(bank=bank)

    def close(self) -> None:
        self.banks.close()
