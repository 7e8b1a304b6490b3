"""DeltaMem: dual residual trees with failure-penalised retrieval and consolidation (paper §3).

One :class:`DeltaMem` owns a bank (a :class:`~deltamem.store.sqlite.SQLiteStore` or a
:class:`~deltamem.store.postgres.PostgresStore`) holding two trees: the Task-Tree
of skills, queried with the task goal, and the Env-Tree of knowledge, queried
with the scene text (§3.1). The pure tree logic is in :mod:`deltamem.core.tree`;
this module wires it to an embedder, an extractor and the store, and implements
the episode-level rules:

* recall (§3.3): Eq. 6 match in each tree (in-process, or in the database for
  a PostgreSQL bank: ``DeltaMemConfig.search``), Eq. 7 chain of each accepted
  match, both chains under the domain's memory header;
* learn (§3.2, §3.4): per tree, Eq. 4 write decision from the recall's
  match, the extraction role it implies, Eq. 5 attachment; a success hit on
  the matched node; at c(v) ≥ K_cons the root→v chain is consolidated into a
  new ROOT and v is marked (Eq. 8). All writes of one episode happen in one
  transaction; extraction (LLM time) happens before it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from deltamem.core.payload import ChainEntry, TreeName, entry_title, render_chain
from deltamem.core.tree import Match, Node, ResidualTree
from deltamem.core.triggers import tree_texts
from deltamem.domains import DOMAINS, default_trigger, get_domain, thresholds
from deltamem.embed.base import Embedder
from deltamem.errors import (
    ConfigError,
    EmbedderMismatchError,
    ExtractionError,
    InvalidInputError,
    StoreError,
)
from deltamem.extract.base import Extractor, role_for
from deltamem.memory import Memory
from deltamem.store.base import SearchStore
from deltamem.store.sqlite import SQLiteStore
from deltamem.types import Change, Changes, Episode, Recall, RecallItem, Task, new_id

log = logging.getLogger("deltamem.memory")

TREES: tuple[TreeName, ...] = ("task", "env")


class DeltaMemConfig(BaseModel):
    """DeltaMem settings. ``None`` values take the domain's presets.

    Attributes:
        domain: preset and memory header (``alfworld``, ``scienceworld``, ``webshop``,
            ``textworld``, ``generic``).
        tau_task, tau_env: acceptance thresholds τ_base per tree (Eq. 4, 6), in [−1, 1].
            ``"auto"`` or ``None`` (default): the preset for this domain, embedder and
            trigger mode (:func:`deltamem.domains.thresholds`: a measured value when
            one exists, else the paper's Table 4). The value chosen and where it came
            from (``tau_source``) are stored with the bank, so a reopened bank keeps them.
        task_trigger, env_trigger: what each tree embeds (:mod:`deltamem.core.triggers`):
            Task-Tree ``goal`` (raw) or ``abstract`` (object and place words replaced by
            placeholders); Env-Tree ``scene`` (raw) or ``places`` (the kinds of things the
            scene lists). ``None``: the domain's default for the embedder
            (:func:`deltamem.domains.default_trigger`: raw texts with E5, as in the paper;
            ``abstract``/``places`` for ``alfworld`` with other embedders). Stored with
            the bank (a bank written before these settings existed reopens with
            ``goal``/``scene``).
        tau_source: provenance of each threshold, filled when the config is resolved.
        k_cons: success hits that trigger consolidation (Eq. 8); ``None`` = preset.
        consolidation: set False for K_cons = ∞.
        epsilon: failure penalty ε (Eq. 6).
        d_max: maximum depth D_max (Eq. 5), at least 2 (roots have depth 1; with
            D_max = 1 a warm start would file a delta at the virtual root).
        tie_rule: which node wins an exact tie of Eq. 6 (see :mod:`deltamem.core.tree`):
            ``deepest`` (default: deeper, then newer) or ``bfs`` (as the authors'
            code: first in breadth-first order). The in-store search of a PostgreSQL
            bank implements ``deepest`` only; with ``bfs`` the ``auto`` search runs
            in-process.
        use_task_tree, use_env_tree: ablation switches (paper Table 3).
        search: where and how Eq. 6 is computed (see :meth:`DeltaMem.match`):

            * ``auto`` (default): in the store when it offers a search of its own
              (:class:`~deltamem.store.base.SearchStore`: a ``postgresql://`` bank,
              pgvector), else in-process ``exact`` (every SQLite bank);
            * ``exact``: in-process, scanning every node, whatever the store;
            * ``ann``: in-process, candidates from an approximate index (optional extra
              ``deltamem[ann]``; see :mod:`deltamem.core.ann`), with the failure penalty
              and ties still exact;
            * ``store``: in the store, and a :class:`ConfigError` when the store has no
              search (SQLite).

            ``auto``/``store`` on PostgreSQL give exactly the in-process ``exact``
            result (same node, score, acceptance, ties) unless the bank URL asks for
            ``index=hnsw``, which is approximate like ``ann``.
        synchronous: commit durability of a SQLite bank (see
            :mod:`deltamem.store.sqlite`). ``full`` (default): every ``learn()``
            commit is fsynced and survives a power loss. ``normal``: no fsync per
            commit (WAL); a committed learn survives the process being killed but
            a power loss or OS crash may undo the last few; the bank never
            corrupts. A per-open choice, not stored with the bank (a later open
            without it gets ``full``); a store that cannot honour ``normal``
            (PostgreSQL) raises :class:`ConfigError`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = "generic"
    tau_task: float | Literal["auto"] | None = Field(default=None)
    tau_env: float | Literal["auto"] | None = Field(default=None)
    task_trigger: Literal["goal", "abstract"] | None = None
    env_trigger: Literal["scene", "places"] | None = None
    tau_source: dict[str, str] = Field(default_factory=dict)
    k_cons: int | None = Field(default=None, ge=1)
    consolidation: bool = True
    epsilon: float = Field(default=0.05, ge=0.0, le=2.0)
    d_max: int = Field(default=5, ge=2, le=1000)
    tie_rule: Literal["bfs", "deepest"] = "deepest"
    use_task_tree: bool = True
    use_env_tree: bool = True
    search: Literal["auto", "exact", "ann", "store"] = "auto"
    synchronous: Literal["full", "normal"] = "full"

    @model_validator(mode="after")
    def _check(self) -> DeltaMemConfig:
        for name in ("tau_task", "tau_env"):
            v = getattr(self, name)
            if isinstance(v, (int, float)) and not -1.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [-1, 1] or 'auto', got {v}")
        if self.domain not in DOMAINS:
            get_domain(self.domain)  # raises ConfigError with the known names
        if not (self.use_task_tree or self.use_env_tree):
            raise ValueError("at least one of use_task_tree / use_env_tree must be on")
        return self

    def resolved(self, embedder: str | None = None) -> DeltaMemConfig:
        """A copy with every preset-dependent value filled in (``embedder``: its name)."""
        p = get_domain(self.domain)
        task_trigger = self.task_trigger or default_trigger(self.domain, "task", embedder)
        env_trigger = self.env_trigger or default_trigger(self.domain, "env", embedder)
        update: dict[str, Any] = {
            "task_trigger": task_trigger,
            "env_trigger": env_trigger,
            "k_cons": p.k_cons if self.k_cons is None else self.k_cons,
        }
        source = dict(self.tau_source)
        for tree, trigger in (("task", task_trigger), ("env", env_trigger)):
            value = getattr(self, f"tau_{tree}")
            if value is None or value == "auto":
                th = thresholds(self.domain, tree, embedder, trigger)
                update[f"tau_{tree}"] = th.value
                source[tree] = th.source
            elif tree not in source:
                source[tree] = "set by the user"
        update["tau_source"] = source
        return self.model_copy(update=update)

    def tau(self, tree: TreeName) -> float:
        value = self.tau_task if tree == "task" else self.tau_env
        assert isinstance(value, float | int), "call resolved() first"
        return float(value)

    def enabled(self, tree: TreeName) -> bool:
        return self.use_task_tree if tree == "task" else self.use_env_tree


def _make_config(
    config: DeltaMemConfig | Mapping[str, Any] | None,
    embedder: str | None = None,
    **overrides: Any,
) -> DeltaMemConfig:
    try:
        if config is None:
            cfg = DeltaMemConfig(**overrides)
        elif isinstance(config, DeltaMemConfig):
            cfg = config.model_copy(update=overrides) if overrides else config
            cfg = DeltaMemConfig(**cfg.model_dump())
        else:
            cfg = DeltaMemConfig(**{**dict(config), **overrides})
    except ConfigError:
        raise
    except ValueError as e:  # pydantic.ValidationError is a ValueError
        raise ConfigError(f"invalid DeltaMem configuration: {e}") from e
    return cfg.resolved(embedder)


class DeltaMem(Memory):
    """The DeltaMem memory system.

    Args:
        store: the bank store.
        embedder: any object implementing :class:`~deltamem.embed.base.Embedder`.
        extractor: any object implementing :class:`~deltamem.extract.base.Extractor`.
        config: a :class:`DeltaMemConfig`, a mapping, or ``None`` (defaults); keyword
            overrides are applied on top.

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

    def __init__(
        self,
        store: SQLiteStore,
        embedder: Embedder | None,
        extractor: Extractor | None = None,
        config: DeltaMemConfig | Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        self.store = store
        self.embedder = embedder
        if extractor is None:
            from deltamem.extract.structural import StructuralExtractor

            extractor = StructuralExtractor()
        self.extractor = extractor
        meta = store.meta()
        if config is None and not overrides and "config" in meta:
            # a bank written before trigger modes existed embedded the raw texts
            config = {"task_trigger": "goal", "env_trigger": "scene", **meta["config"]}
        emb_name = embedder.name if embedder is not None else meta.get("embedder_name")
        self.config = _make_config(config, emb_name, **overrides)
        self._apply_synchronous()
        if embedder is not None:
            self._check_embedder(meta)
            # durability is chosen per open, never inherited from the bank: not stored
            bank_config = self.config.model_dump(exclude={"synchronous"})
            store.init_meta(embedder.name, embedder.dim, bank_config)
        self.dim = int(store.meta().get("embedder_dim") or (embedder.dim if embedder else 0))
        offers_search = isinstance(store, SearchStore) and self.config.tie_rule == "deepest"
        if self.config.search == "store" and not offers_search:
            raise ConfigError(
                f"search='store' needs a store with its own search (a postgresql:// bank) "
                f"and tie_rule='deepest'; {type(store).__name__} with tie_rule="
                f"{self.config.tie_rule!r} has none: use search='auto' or 'exact'"
            )
        #: the store's Eq. 6 search when :meth:`match` uses it (``search`` auto/store), else None
        self.store_search: SearchStore | None = (
            store if offers_search and self.config.search in ("auto", "store") else None
        )
        self._version = -1
        self._max_seq = 0
        self.trees: dict[TreeName, ResidualTree] = {}
        self._reload()

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
            return cls(store, embedder, extractor, config, **overrides)  # type: ignore[arg-type]
        except BaseException:
            store.close()
            raise

    # -- state -------------------------------------------------------------------
    def _check_embedder(self, meta: Mapping[str, Any]) -> None:
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

    def _apply_synchronous(self) -> None:
        """Set the store's commit durability from ``config.synchronous`` (SQLite only)."""
        mode = self.config.synchronous
        setter = getattr(self.store, "set_synchronous", None)
        if setter is not None:
            setter(mode)
        elif mode != "full":
            raise ConfigError(
                f"synchronous={mode!r} is a SQLite bank option; {type(self.store).__name__} "
                "has no such setting: use synchronous='full'"
            )

    def _reload(self, *, force: bool = False, touched: Collection[str] | None = None) -> None:
        """Bring both trees up to date with the store, incrementally.

        ``PRAGMA data_version`` tells when another connection committed; our own
        commits do not change it, so :meth:`learn` calls this with ``force=True``
        and ``touched``, the nodes whose hits or flags its transaction changed.
        Nodes are append-only (ordered by ``seq``), so only rows past the last
        seen ``seq`` are loaded. Hit counts and consolidation flags: when no
        other connection committed since the last reload, only the ``touched``
        nodes are re-read; otherwise all are, from one narrow query.
        """
        v = self.store.version()
        if v == self._version and self.trees and not force:
            return
        if self.trees and touched is not None and v == self._version:
            for n in self.store.load_nodes(after_seq=self._max_seq):
                self.trees[n.tree].add(n)
                self._max_seq = max(self._max_seq, n.seq)
            for node_id in touched:
                for t in self.trees.values():
                    if node_id in t:
                        hits, cons = self.store.node_state(node_id)
                        old = t.get(node_id)
                        t.replace(replace(old, success_hits=hits, consolidated=cons))
            return
        if not self.trees:
            nodes = self.store.load_nodes()
            dim = self.dim or (len(nodes[0].embedding) if nodes else 1)
            self.trees = {
                t: ResidualTree(t, dim, (n for n in nodes if n.tree == t),
                                search="ann" if self.config.search == "ann" else "exact",
                                tie_rule=self.config.tie_rule)
                for t in TREES
            }
            self._max_seq = max((n.seq for n in nodes), default=0)
        else:
            for n in self.store.load_nodes(after_seq=self._max_seq):
                self.trees[n.tree].add(n)
                self._max_seq = max(self._max_seq, n.seq)
            for node_id, tree, hits, cons in self.store.node_states():
                t = self.trees[tree]
                if node_id not in t:
                    # committed by another process after load_nodes() read: data_version
                    # has moved past ``v``, so the next reload loads it
                    continue
                old = t.get(node_id)
                if old.success_hits != hits or old.consolidated != cons:
                    t.replace(replace(old, success_hits=hits, consolidated=cons))
        self._version = v

    def _need_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigError("this bank was opened without an embedder (inspection only)")
        return self.embedder

    @staticmethod
    def _check_task(task: Task) -> None:
        if not isinstance(task, Task):
            raise InvalidInputError(f"expected a Task, got {type(task).__name__}")
        get_domain(task.domain)  # unknown domain → ConfigError
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")

    def queries(self, task: Task) -> dict[TreeName, str]:
        """The query text of each tree (§3.1): goal → Task-Tree, scene → Env-Tree,
        each in the config's trigger mode (:func:`deltamem.core.triggers.tree_texts`)."""
        return tree_texts(task, self.config.task_trigger or "goal",
                          self.config.env_trigger or "scene")

    # -- recall (§3.3) ---------------------------------------------------------------
    def match(self, task: Task) -> dict[TreeName, Match]:
        """Eq. 6 match of each enabled tree for ``task`` (no side effects on the bank).

        Where it is computed follows ``config.search``. In the store
        (:attr:`store_search`, PostgreSQL): one query per tree over the rows committed
        at that moment, by any process; the result is the one
        :meth:`ResidualTree.match` gives on those rows (same node id, same exact score,
        same acceptance at τ, ε applied to FAILURE nodes, ties: unconsolidated >
        deeper > newer). In-process: the in-memory trees, first brought up to date
        with the store. Either way every returned node is in :attr:`trees` on return
        (a node another process committed after the last reload triggers one), so
        its chain can be read; a node the store cannot load back is a
        :class:`~deltamem.errors.StoreError`.
        """
        self._check_task(task)
        emb = self._need_embedder()
        q = self.queries(task)
        trees = [t for t in TREES if self.config.enabled(t)]
        vecs = emb.embed_queries([q[t] for t in trees])
        self._reload()
        cfg = self.config
        if self.store_search is None:
            return {
                t: self.trees[t].match(vecs[i], cfg.tau(t), cfg.epsilon)
                for i, t in enumerate(trees)
            }
        out = {
            t: self.store_search.match(t, vecs[i], cfg.tau(t), cfg.epsilon)
            for i, t in enumerate(trees)
        }
        if any(m.node_id and m.node_id not in self.trees[t] for t, m in out.items()):
            self._reload(force=True)  # committed by another process since the reload above
            for t, m in out.items():
                if m.node_id and m.node_id not in self.trees[t]:
                    raise StoreError(
                        f"bank {self.store.path}: the store's search returned node "
                        f"{m.node_id!r} of the {t} tree, which loading the bank does not give"
                    )
        return out

    def recall(self, task: Task) -> Recall:
        matches = self.match(task)
        sections: list[str] = []
        items: list[RecallItem] = []
        details: dict[str, Any] = {}
        for tree, m in matches.items():
            chain = self.trees[tree].chain(m.node_id) if m.accepted and m.node_id else []
            details[tree] = {**m.to_dict(), "chain": [n.id for n in chain]}
            if not chain:
                continue
            title = "Task skill memory" if tree == "task" else "Environment knowledge memory"
            sections.append(f"## {title}\n{render_chain(tree, [n.entry() for n in chain])}")
            for n in chain:
                role = (
                    "warning" if n.label == "FAILURE" else "base" if n.kind == "ROOT" else "delta"
                )
                items.append(
                    RecallItem(
                        source=tree,
                        id=n.id,
                        text=render_chain(tree, [n.entry()]),
                        score=m.score if n.id == m.node_id else None,
                        role=role,
                    )
                )
        text = ""
        if sections:
            text = get_domain(self.config.domain).header + "\n\n" + "\n\n".join(sections)
        return Recall(text=text, items=tuple(items), details=details)

    # -- learn (§3.2, §3.4, §3.5) --------------------------------------------------------
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Write what ``episode`` teaches into each enabled tree; all writes in one transaction.

        The write decision of each tree (Eq. 4, 5) is the match of ``recall`` (made
        now when ``None``): the retrieval the agent acted on, whichever process or
        search path (in-store or in-process) produced it. The trees are brought up to
        date with every node committed so far (forcing a reload when a recalled node
        is not loaded yet), so a match on a node another process wrote attaches under
        it. Extraction runs before the transaction; inside it, under the store's write
        lock (PostgreSQL: the bank's advisory lock), only self-contained writes run:
        the episode id is claimed (a concurrent learn of the same episode writes
        nothing), nodes are inserted with their parent and depth (immutable fields of
        an append-only table), success hits are incremented in the store, and a
        consolidation commits only if the store's hit count reached K_cons and the
        node's flag was not set yet (compare-and-set). Two concurrent cold starts on
        the same new task therefore both write a ROOT, as two sequential learns with
        the same stale recall would.
        """
        episode.validate()
        self._check_task(episode.task)
        emb = self._need_embedder()
        if self.store.is_learned(episode.id):
            return Changes((Change("unchanged", "bank", "episode already learned", episode.id),))
        if recall is None or not all(t in recall.details for t in self._enabled()):
            recall = self.recall(episode.task)
        self._reload()
        if any(
            recall.details[t].get("accepted")
            and recall.details[t].get("node_id") not in self.trees[t]
            for t in self._enabled()
        ):
            self._reload(force=True)  # a recalled node committed after our last reload
        queries = self.queries(episode.task)
        changes: list[Change] = []
        plans: list[Callable[[], None]] = []
        rejections: list[dict[str, str]] = []
        trees = self._enabled()
        vecs = emb.embed_passages([queries[t] for t in trees])
        for i, tree in enumerate(trees):
            self._plan_tree(
                tree,
                episode,
                recall.details[tree],
                vecs[i],
                queries[tree],
                changes,
                plans,
                rejections,
            )
        with self.store.transaction():
            if not self.store.mark_learned(episode.id):
                return Changes(
                    (Change("unchanged", "bank", "episode already learned", episode.id),)
                )
            for rej in rejections:
                self.store.add_rejection(episode_id=episode.id, **rej)
            for plan in plans:
                plan()
        self._reload(force=True, touched={c.id for c in changes if c.kind == "hit" and c.id})
        return Changes(tuple(changes))

    def _enabled(self) -> list[TreeName]:
        return [t for t in TREES if self.config.enabled(t)]

    def _plan_tree(
        self,
        tree_name: TreeName,
        episode: Episode,
        detail: Mapping[str, Any],
        vec: np.ndarray,
        trigger: str,
        changes: list[Change],
        plans: list[Callable[[], None]],
        rejections: list[dict[str, str]],
    ) -> None:
        """Decide and extract what ``episode`` writes into one tree; queue the writes."""
        tree = self.trees[tree_name]
        cfg = self.config
        match = Match(
            detail.get("node_id"),
            detail.get("score"),
            cfg.tau(tree_name),
            bool(detail.get("accepted")),
        )
        if match.accepted and match.node_id not in tree:
            changes.append(
                Change(
                    "skipped",
                    tree_name,
                    f"recalled node {match.node_id} is not in this bank; treated as a cold start",
                )
            )
            match = Match(None, None, match.tau, False)
        chain = [n.entry() for n in tree.chain(match.node_id)] if match.warm else []
        role = role_for(tree_name, match.warm, episode.success)
        score_txt = "empty tree" if match.score is None else f"best score {match.score:.3f}"
        try:
            payload = self.extractor.extract(role, episode, chain, cfg.domain)
        except ExtractionError as e:
            changes.append(Change("rejected", tree_name, f"{role}: {e}"))
            rejections.append({"tree": tree_name, "role": role, "reason": str(e), "raw": e.raw})
            payload = None
        else:
            if payload is None:
                changes.append(
                    Change(
                        "skipped",
                        tree_name,
                        f"{role}: the retrieved chain already covers this episode",
                    )
                )
        if payload is not None:
            parent, depth = tree.attachment(match, cfg.d_max)
            node = Node(
                id=new_id(),
                tree=tree_name,
                kind="RESIDUAL" if match.warm else "ROOT",
                # Env-Tree knowledge is valid whatever the outcome (paper App. C.5:
                # "regardless of whether the task succeeded or failed, the environmental
                # observations are valid knowledge"; the authors' code labels env
                # nodes SUCCESS), so ε never pushes recall away from a scene
                label="SUCCESS" if episode.success or tree_name == "env" else "FAILURE",
                parent=parent,
                depth=depth,
                trigger=trigger,
                embedding=vec,
                payload=payload,
                episode_id=episode.id,
                created_at=time.time(),
            )
            if match.warm:
                where = (
                    f"under {parent}"
                    if parent == match.node_id
                    else f"as a sibling of {match.node_id} (depth {depth} = D_max)"
                )
                reason = f"warm start: {score_txt} ≥ τ {match.tau:g} → RESIDUAL {where}"
            else:
                reason = f"cold start: {score_txt} < τ {match.tau:g} → ROOT"
            changes.append(Change("written", tree_name, f"{role}: {reason}", node.id))
            plans.append(lambda node=node: self.store.insert_node(node))
        if episode.success and match.warm and match.node_id is not None:
            self._plan_hit(tree_name, match.node_id, episode, changes, plans, rejections)

    def _plan_hit(
        self,
        tree_name: TreeName,
        node_id: str,
        episode: Episode,
        changes: list[Change],
        plans: list[Callable[[], None]],
        rejections: list[dict[str, str]],
    ) -> None:
        """Success hit on the matched node and, at K_cons, consolidation (Eq. 8)."""
        tree = self.trees[tree_name]
        v = tree.get(node_id)
        k = self.config.k_cons or math.inf
        will_consolidate = (
            self.config.consolidation
            and v.kind == "RESIDUAL"
            and not v.consolidated
            and v.success_hits + 1 >= k
        )
        root: Node | None = None
        if will_consolidate:
            chain = tree.chain(node_id)
            role = "consolidate_skill" if tree_name == "task" else "consolidate_knowledge"
            try:
                payload = self.extractor.consolidate(
                    tree_name, [n.entry() for n in chain], self.config.domain
                )
            except ExtractionError as e:
                changes.append(Change("rejected", tree_name, f"{role}: {e}", node_id))
                rejections.append({"tree": tree_name, "role": role, "reason": str(e), "raw": e.raw})
            else:
                root = Node(
                    id=new_id(),
                    tree=tree_name,
                    kind="ROOT",
                    label="SUCCESS",
                    parent=None,
                    depth=1,
                    trigger=v.trigger,
                    embedding=v.embedding,
                    payload=payload,
                    origin="consolidated",
                    source=v.id,
                    episode_id=episode.id,
                    created_at=time.time(),
                )

        def apply() -> None:
            hits = self.store.increment_hits(node_id)
            if root is not None and hits >= k and self.store.mark_consolidated(node_id):
                self.store.insert_node(root)

        plans.append(apply)
        changes.append(
            Change("hit", tree_name, f"success hit {v.success_hits + 1} on matched node", node_id)
        )
        if root is not None:
            changes.append(
                Change(
                    "consolidated",
                    tree_name,
                    f"c(v) reached K_cons={int(k)}: chain of {len(tree.chain(node_id))}"
                    f" nodes fused into new ROOT {root.id}; node marked",
                    root.id,
                )
            )

    # -- inspection ----------------------------------------------------------------------
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
        self._reload()
        return list(self.trees[tree])

    def chain(self, node_id: str) -> list[Node]:
        """The root → ``node_id`` path (Eq. 7), root first; ``KeyError`` for an unknown id."""
        self._reload()
        for t in self.trees.values():
            if node_id in t:
                return t.chain(node_id)
        raise KeyError(node_id)

    def stats(self) -> dict[str, Any]:
        """Node counts by tree, depth, kind, label; avg whitespace tokens per ROOT/RESIDUAL."""
        self._reload()
        out: dict[str, Any] = {
            "nodes": {},
            "depth_histogram": {},
            "kind": {},
            "label": {},
            "consolidated": {},
            "avg_tokens": {},
        }
        tokens: dict[str, list[int]] = {"ROOT": [], "RESIDUAL": []}
        for t in TREES:
            tree = self.trees[t]
            out["nodes"][t] = len(tree)
            out["depth_histogram"][t] = {str(d): c for d, c in tree.depth_histogram().items()}
            kinds: dict[str, int] = {}
            labels: dict[str, int] = {}
            for n in tree:
                kinds[n.kind] = kinds.get(n.kind, 0) + 1
                labels[n.label] = labels.get(n.label, 0) + 1
                tokens[n.kind].append(len(n.payload.text.split()))
            out["kind"][t] = kinds
            out["label"][t] = labels
            out["consolidated"][t] = sum(1 for n in tree if n.consolidated)
        for kind, vals in tokens.items():
            out["avg_tokens"][kind] = round(sum(vals) / len(vals), 1) if vals else 0.0
        out["units"] = sum(out["nodes"].values())
        out["episodes_learned"] = self.store.learned_count()
        out["last_episode_id"] = self.store.last_learned()
        out["rejections"] = len(self.store.rejections())
        return out

    def export(self, path: str | Path) -> int:
        """Write this bank to the JSONL file ``path`` (the same records as ``deltamem
        export``); returns the number of records. See :func:`deltamem.export_bank`."""
        from deltamem.store import export_jsonl

        return export_jsonl(self.store, path)

    @classmethod
    def import_(
        cls,
        source: str | Path,
        bank: str | Path,
        *,
        embedder: Embedder | None,
        extractor: Extractor | None = None,
        **overrides: Any,
    ) -> DeltaMem:
        """Load the JSONL export ``source`` into the new (empty) bank ``bank`` and open it.

        The bank keeps the exported configuration and embedder record, so ``embedder``
        must be the one the export was built with (else
        :class:`~deltamem.errors.EmbedderMismatchError`); ``None`` opens it for
        inspection. See :func:`deltamem.import_bank` for the errors of the import itself.
        """
        from deltamem.portable import import_bank

        import_bank(source, bank)
        return cls.open(bank, embedder=embedder, extractor=extractor, **overrides)

    def close(self) -> None:
        self.store.close()


def render_entry_title(tree: TreeName, node: Node, index: int) -> str:
    """Title of a node as shown in recalls (re-exported for CLIs)."""
    return entry_title(tree, ChainEntry(node.kind, node.label, node.payload), index)


def make(
    *,
    bank: str | Path | None = None,
    embedder: Embedder | None = None,
    llm: Any = None,
    extractor: Extractor | Literal["structural", "llm"] | None = "structural",
    domain: str = "generic",
    options: Mapping[str, Any] | None = None,
    **_: Any,
) -> DeltaMem:
    """Registry factory (see :mod:`deltamem.memories`)."""
    if embedder is None:
        raise ConfigError("DeltaMem needs an embedder (--embedder on the command line, "
                          "e.g. minilm; embedder= in Python)")
    if extractor == "llm":
        if llm is None:
            raise ConfigError("extractor 'llm' needs an llm (--llm on the command line)")
        from deltamem.extract.llm import LLMExtractor

        extractor = LLMExtractor(llm)
    elif extractor in (None, "structural"):
        from deltamem.extract.structural import StructuralExtractor

        extractor = StructuralExtractor()
    elif isinstance(extractor, str):
        raise ConfigError(f"unknown extractor {extractor!r}; use 'structural' or 'llm'")
    opts = {"domain": domain, **dict(options or {})}
    return DeltaMem.open(bank or ":memory:", embedder=embedder, extractor=extractor, **opts)
