"""The DeltaMem memory system (paper §3): the facade over its rooms.

:class:`DeltaMem` wires an embedder, an extractor and a bank together and answers the
memory contract; each concern lives in its own module of this package (config, bank view,
search, rendering, write planning, decisions, forgetting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem import telemetry
from deltamem.core.payload import TreeName
from deltamem.core.tree import BestNode, Node, ResidualTree
from deltamem.embed.base import Embedder
from deltamem.errors import StoreError
from deltamem.extract.base import Extractor
from deltamem.memories.banked import BankedMemory, _Replan, _store_id
from deltamem.memories.deltamem import decision, forgetting, inspector, render, search
from deltamem.memories.deltamem.bank import BankView, set_durability
from deltamem.memories.deltamem.config import (
    PER_OPEN,
    DeltaMemConfig,
    check_bank_config,
    make_config,
    reopen_settings,
)
from deltamem.memories.deltamem.edit_log import Edit, edits
from deltamem.memories.deltamem.planner import Planner
from deltamem.memories.plan import Plan, Rejection
from deltamem.memories.prune import PruneEntry
from deltamem.store.base import SearchStore, Store
from deltamem.types import Changes, Episode, Match, Recall, Task

__all__ = ["DeltaMem"]


class DeltaMem(BankedMemory):
    """The DeltaMem memory system: dual residual trees (§3.1, §3.2), failure-penalised
    retrieval with chain reconstruction (§3.3), consolidation (§3.5).

    Args:
        store: the bank store.
        embedder: any object implementing :class:`~deltamem.embed.base.Embedder`.
        extractor: any object implementing :class:`~deltamem.extract.base.Extractor`
            (``None``: the structural one, with the bank's ``skill_words``/``skill_deltas``).
        config: a :class:`DeltaMemConfig`, a mapping, or ``None`` (defaults); keyword
            overrides are applied on top. On an existing bank the stored configuration
            is the base and these (the fields a config object sets, the keys of a
            mapping, the keywords) override it for this session; the bank keeps its
            stored configuration. A different ``domain``, ``task_trigger``,
            ``env_trigger`` or ``d_max`` (:data:`BANK_LAYOUT`) is a :class:`ConfigError`.
        readonly: the store was opened read-only (``learn`` refuses at once).

    Use :meth:`open` to get one on a bank file. The embedder is checked against
    the one recorded in the bank (name and dimension) on open.

    Example:
        >>> from deltamem import DeltaMem, Episode, Step, Task
        >>> from deltamem.embed import HashingEmbedder
        >>> mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")
        >>> task = Task(id="t1", goal="put a clean apple in fridge", domain="alfworld",
        ...             scene="You are in a kitchen. You see a countertop 1 and a fridge 1.")
        >>> recall = mem.recall(task)
        >>> recall.text
        ''
        >>> ep = Episode(task, (Step("take apple 1 from countertop 1", "You pick up the apple 1."),
        ...                     Step("put apple 1 in/on fridge 1", "You win.", done=True)),
        ...              success=True, reward=1.0)
        >>> [c.kind for c in mem.learn(ep, recall)]
        ['written', 'written']
        >>> mem.stats()["nodes"]
        {'task': 1, 'env': 1}
    """

    name = "deltamem"
    stats_names_system = False
    change_source = "bank"  # type: ignore[assignment]

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        extractor: Extractor | None = None,
        config: DeltaMemConfig | Mapping[str, Any] | None = None,
        *,
        readonly: bool = False,
        **overrides: Any,
    ) -> None:
        self.store = store
        store.config_check = check_bank_config  # what an import into this bank must pass
        self.embedder = embedder
        self.readonly = readonly
        meta = store.meta()
        if "config" in meta:  # an existing bank: its settings, the caller's on top
            config = reopen_settings(meta["config"], config, overrides, store.path)
            overrides = {}
        emb_name = embedder.name if embedder is not None else meta.get("embedder_name")
        self.config = make_config(config, emb_name, **overrides)
        if extractor is None:
            from deltamem.extract.structural import StructuralExtractor

            extractor = StructuralExtractor(skill_words=self.config.skill_words,
                                            skill_deltas=self.config.skill_deltas)
        self.extractor = extractor
        set_durability(store, self.config.synchronous)
        if embedder is not None:
            self._check_embedder(meta)
            # durability and the recall budget are chosen per open, never inherited from
            # the bank: not stored. Read-only: nothing is recorded (a bank a killed import
            # left without meta opens, empty, instead of failing on a write)
            if not readonly:
                store.init_meta(embedder.name, embedder.dim,
                                self.config.model_dump(exclude=PER_OPEN))
        self.dim = int(store.meta().get("embedder_dim") or (embedder.dim if embedder else 0))
        #: the store's Eq. 6 search when :meth:`match` uses it (``search`` auto/store), else None
        self.store_search: SearchStore | None = search.store_search(store, self.config)
        #: the trees, kept in step with the store
        self.bank = BankView(store, self.config, self.dim)
        self.bank.reload()
        #: rendered recalls of this bank view (:class:`render.RecallCache`)
        self.recalls = render.RecallCache(self.bank, self.config)
        self._trees = search.enabled(self.config)  # the config is fixed per open

    @classmethod
    def open(
        cls,
        path: str | Path = ":memory:",
        *,
        embedder: Embedder | None,
        extractor: Extractor | None = None,
        config: DeltaMemConfig | Mapping[str, Any] | None = None,
        readonly: bool = False,
        **overrides: Any,
    ) -> DeltaMem:
        """Open (or create) the bank at ``path`` (``":memory:"``: not persisted).

        ``path`` may also be a ``postgresql://…`` URL (see
        :mod:`deltamem.store.postgres`); :func:`deltamem.store.factory.open_store` decides.

        ``embedder=None`` opens the bank for inspection only (recall and learn
        need an embedder). Raises :class:`EmbedderMismatchError` when the bank
        was built with another embedder.
        """
        from deltamem.store.factory import open_store

        store = open_store(path, readonly=readonly)
        try:
            return cls(store, embedder, extractor, config, readonly=readonly, **overrides)
        except BaseException:
            store.close()
            raise

    @property
    def trees(self) -> dict[TreeName, ResidualTree]:
        """The in-memory trees (:class:`~deltamem.memories.deltamem.bank.BankView`)."""
        return self.bank.trees

    # -- recall (§3.3) ----------------------------------------------------------------------
    def queries(self, task: Task) -> dict[TreeName, str]:
        """The query text of each tree (§3.1: goal → Task-Tree, scene → Env-Tree)."""
        return search.queries(task, self.config)

    def match(self, task: Task) -> dict[TreeName, BestNode]:
        """Eq. 6 match of each enabled tree for ``task`` (no side effects on the bank), in
        the store or in-process as ``config.search`` says (:func:`search.match`): the same
        node id, score, acceptance at τ and tie-break either way."""
        self._check_task(task)
        return search.match(self.bank, self.store_search, self._need_embedder(), task,
                            self.config, self._trees)

    def recall(self, task: Task) -> Recall:
        """Eq. 6 match and Eq. 7 chain of each tree under the domain's memory header.

        With ``supersede``, Env-Tree knowledge lines a deeper (newer) node contradicts are
        left out (``details["env"]["superseded"]`` lists them); with
        ``max_recall_tokens``, chains are cut to fit (``details["budget"]``). Items are the
        nodes shown, in prompt order (:func:`render.render`). A recall that shows the same
        chains as an earlier one since the bank last changed is not rendered again
        (:class:`render.RecallCache`). A PostgreSQL connection cut mid-read (the server rolled
        it back) is tried once more on a new connection.
        """
        try:
            return self.recalls.recall(self.match(task))
        except StoreError as e:
            if not getattr(e, "rolled_back", False):
                raise
            return self.recalls.recall(self.match(task))

    # -- learn (§3.2, §3.4, §3.5): the hooks of BankedMemory.learn ---------------------------
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Write what ``episode`` teaches into each enabled tree; all writes in one transaction.

        The write decision of each tree (Eq. 4, 5) is the match of ``recall`` (made now
        when ``None``, without rendering a recall): the retrieval the agent acted on,
        whichever process or search path produced it; a match on a node another process
        wrote attaches under it. Extraction runs before the transaction; inside it, under
        the store's write lock, only self-contained writes run
        (:mod:`deltamem.memories.plan`): the episode id is claimed, nodes are inserted,
        hits counted in the store, and a consolidation commits only if the store's count
        reached K_cons and the node's flag was not set yet (compare-and-set). Processes
        sharing a bank decide as one process would, in commit order
        (:mod:`~deltamem.memories.deltamem.decision`).
        """
        return super().learn(episode, recall)

    def _prepare_learn(self, episode: Episode, recall: Recall | None) -> decision.LearnInputs:
        trees = tuple(search.enabled(self.config))
        given = recall.matches if recall is not None else {}
        triggers = self.queries(episode.task)
        vecs = self._need_embedder().embed_passages([triggers[t] for t in trees])
        return decision.LearnInputs(trees, given, not all(t in given for t in trees),
                                    triggers, vecs)

    def _attempts(self) -> list[bool]:
        return decision.attempts()

    def _matches(self, episode: Episode, inputs: decision.LearnInputs) -> Mapping[str, Match]:
        """The matches a learn decides on (typed), every matched node loaded."""
        matches = (search.typed(self.match(episode.task)) if inputs.decides
                   else inputs.given)
        self.bank.load_matched(matches)
        return matches

    def _plan_learn(self, episode: Episode, recall: Recall | None,
                    inputs: decision.LearnInputs) -> Plan:
        version = self.store.version()
        matches = self._matches(episode, inputs)
        plan = Planner(self.bank, self.extractor, self.config).plan(
            episode, matches, inputs.trees, inputs.vecs, inputs.triggers)
        plan.basis = decision.Decision(version, decision.basis(self.bank, matches, inputs.trees))
        return plan

    def _check_plan(self, plan: Plan, episode: Episode, inputs: decision.LearnInputs) -> None:
        if self.store.version() != plan.basis.version:
            now = self._matches(episode, inputs)
            if decision.basis(self.bank, now, inputs.trees) != plan.basis.basis:
                raise _Replan

    def _learned(self, plan: Plan) -> None:
        self.bank.reload(force=True, touched={c.id for c in plan.changes
                                              if c.kind in ("hit", "failed") and c.id})

    def _log_rejection(self, episode_id: str, rej: Rejection) -> None:
        self.store.add_rejection(episode_id=episode_id, tree=rej.source, role=rej.role,
                                 reason=rej.reason, raw=rej.raw)

    # -- inspection -------------------------------------------------------------------------
    def nodes(self, tree: TreeName) -> list[Node]:
        """Every node of one tree (``"task"`` or ``"env"``), parents before children, as
        stored now (the bank is re-read first if another process wrote to it).

        A :class:`~deltamem.core.tree.Node` has ``id``, ``tree``, ``kind`` (``ROOT`` /
        ``RESIDUAL``), ``label`` (``SUCCESS`` / ``FAILURE``), ``parent`` (``None`` for a
        root), ``depth`` (roots 1), ``success_hits`` c(v), ``consolidated``, ``trigger``
        (the text its ``embedding`` was made from), ``seq`` (insertion order), ``payload``
        (:class:`~deltamem.core.payload.Payload`), ``origin`` (``consolidated`` for a
        root distilled by Eq. 8, with ``source`` the node it came from), ``episode_id``
        and ``created_at``. Works on a bank opened for inspection (``embedder=None``).
        """
        self.bank.reload()
        return list(self.bank.trees[tree])

    def chain(self, node_id: str) -> list[Node]:
        """The root → ``node_id`` path (Eq. 7), root first; ``KeyError`` for an unknown id."""
        self.bank.reload()
        return self.bank.chain(node_id)

    def _figures(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Node counts by tree, depth, kind, label; avg whitespace tokens per ROOT/RESIDUAL;
        ``units``; after the ledger's figures, ``failure_hits`` and ``audit`` entries."""
        self.bank.reload()
        head = self.bank.figures()
        failure_hits = head.pop("failure_hits")
        return head, {"failure_hits": failure_hits, "audit": len(self.store.audit())}

    # -- forgetting, copies ---------------------------------------------------------------------
    def prune(self, policies: Sequence[str], *, dry_run: bool = False) -> list[PruneEntry]:
        """Remove what ``policies`` name (:mod:`deltamem.memories.prune`: ``unused:N``,
        ``harmful[:K]``), each node with its subtree, in one transaction; every removal is
        written to the audit trail (``store.audit()``) with the policy, the reason and the
        node's fields and payload. ``dry_run``: only say what would go.

        Returns the nodes removed (or that would be), parents before children.
        """
        with telemetry.memory_span("delete_memory", system=self.name,
                                   store=_store_id(self.store),
                                   attributes={"deltamem.policies": list(policies),
                                               "deltamem.dry_run": dry_run}) as span:
            removed = forgetting.prune(self.bank, policies, dry_run=dry_run)
            telemetry.set_attributes(span, {"gen_ai.memory.record.count": len(removed)})
            return removed

    # -- the inspector's edits (see :mod:`deltamem.memories.deltamem.inspector`) ----------------
    def edit_node(self, node_id: str, *, who: str, trigger: str | None = None,
                  activation: str | None = None, procedure: str | None = None,
                  termination: str | None = None, reason: str = "") -> Edit:
        """Change a node's trigger (embedded again) and/or payload fields; one audit row."""
        return inspector.edit_node(self, node_id, who=who, trigger=trigger,
                                   activation=activation, procedure=procedure,
                                   termination=termination, reason=reason)

    def hide_node(self, node_id: str, *, who: str, hidden: bool = True,
                  reason: str = "") -> Edit:
        """Hide a node and its subtree from recall (``hidden=False``: show them again)."""
        return inspector.hide_node(self, node_id, who=who, hidden=hidden, reason=reason)

    def relabel_node(self, node_id: str, label: str, *, who: str, reason: str = "") -> Edit:
        """Set a node's label (``SUCCESS`` / ``FAILURE``)."""
        return inspector.relabel_node(self, node_id, label, who=who, reason=reason)

    def delete_node(self, node_id: str, *, who: str, subtree: bool = False,
                    reason: str = "") -> Edit:
        """Remove a node (one with children only with ``subtree=True``, then with them)."""
        return inspector.delete_node(self, node_id, who=who, subtree=subtree, reason=reason)

    def undo_edit(self, edit_id: str, *, who: str, reason: str = "") -> Edit:
        """Revert one inspector edit exactly (embeddings re-computed by the embedder)."""
        return inspector.undo_edit(self, edit_id, who=who, reason=reason)

    def edits(self) -> list[Edit]:
        """The inspector's edits of this bank, oldest first (from the audit trail)."""
        return edits(self.store)

    def export(self, path: str | Path) -> int:
        """Write this bank to the JSONL file ``path`` (the same records as ``deltamem
        export``); returns the number of records. See :func:`deltamem.export_bank`."""
        from deltamem.store import export_jsonl

        return export_jsonl(self.store, path)

    @classmethod
    def import_(cls, source: str | Path, bank: str | Path, *, embedder: Embedder | None,
                extractor: Extractor | None = None, **overrides: Any) -> DeltaMem:
        """Load the JSONL export ``source`` into the new (empty) bank ``bank`` and open it.

        The bank keeps the exported configuration and embedder record, so ``embedder``
        must be the one the export was built with (else
        :class:`~deltamem.errors.EmbedderMismatchError`); ``None`` opens it for
        inspection. See :func:`deltamem.import_bank` for the errors of the import itself.
        """
        from deltamem.store.factory import import_bank_file

        with telemetry.memory_span("create_memory", system=cls.name,
                                   store=Path(str(bank)).name,
                                   attributes={"deltamem.import.format": "jsonl"}) as span:
            n = import_bank_file(source, bank, config_check=check_bank_config)
            telemetry.set_attributes(span, {"gen_ai.memory.record.count": n})
        return cls.open(bank, embedder=embedder, extractor=extractor, **overrides)

