"""DeltaMem: dual residual trees with failure-penalised retrieval and consolidation (paper §3).

One :class:`DeltaMem` owns a bank (any :class:`~deltamem.store.base.Store`: a
:class:`~deltamem.store.sqlite.SQLiteStore` or a
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
from collections.abc import Collection, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from deltamem.core.forgetting import fit_budget, supersede
from deltamem.core.payload import ChainEntry, TreeName, render_chain
from deltamem.core.tree import BestNode, Node, ResidualTree, standing_penalty
from deltamem.core.triggers import tree_texts
from deltamem.domains import (
    DOMAINS,
    default_trigger,
    get_domain,
    skill_deltas_source,
    skill_words_source,
    thresholds,
)
from deltamem.embed.base import Embedder
from deltamem.errors import (
    ConfigError,
    EmbedderMismatchError,
    ExtractionError,
    InvalidInputError,
    StoreError,
)
from deltamem.extract.base import Extractor, role_for
from deltamem.memories.plan import Plan
from deltamem.memories.prune import PruneEntry, parse_policy, select
from deltamem.memory import Memory
from deltamem.store.base import SearchStore, Store
from deltamem.types import Change, Changes, Episode, Match, Recall, RecallItem, Task, new_id

log = logging.getLogger("deltamem.memory")

TREES: tuple[TreeName, ...] = ("task", "env")
PER_OPEN = frozenset({"synchronous", "max_recall_tokens"})
"""Settings chosen by each open of a bank, never stored with it."""

OPTIMISTIC_TRIES = 2
"""Times a learn takes its write decision outside the store's write lock before it takes
it under the lock (see :meth:`DeltaMem.learn`)."""


OPEN_HEADROOM = 2
"""A tree opened on a bank of n nodes makes room for ``OPEN_HEADROOM × n`` rows up front.
Room for exactly n made the first learn after an open copy the whole matrix (the tree
doubles its arrays when full: 0.1–0.25 s at 100k nodes, a quarter of 200 learns' time);
unused rows are zeroed pages never written, so they cost address space, not memory
(:class:`~deltamem.core.tree.ResidualTree`, Memory), and the next copy comes after n
more nodes."""


class _StaleDecision(Exception):
    """Rolls back a learn's transaction: the bank changed under its write decision."""


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
        skill_words: how the default (structural) extractor writes a skill's steps:
            ``slots`` (goal words become placeholders) or ``literal``; ``None``: the
            domain's setting (:attr:`deltamem.domains.DomainPreset.skill_words`). Stored
            with the bank with where it came from (``skill_words_source``); a bank written
            before this setting existed reopens with ``slots``.
        skill_deltas: what the default (structural) extractor writes for a residual skill
            whose episode did something else where the retrieved chain has steps:
            ``additions`` (the steps the chain lacks, appended) or ``edits`` (its steps
            that stand instead of the chain's, in place: :mod:`deltamem.core.residual`);
            ``None``: the domain's setting
            (:attr:`deltamem.domains.DomainPreset.skill_deltas`). Stored with the bank with
            where it came from (``skill_deltas_source``); a bank written before this
            setting existed reopens with ``additions``.
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
        failure_weight: λ of the standing penalty (Eq. 6 extended, see
            :func:`deltamem.core.tree.standing_penalty`): a node followed by failed
            episodes scores λ·f(v)/(f(v) + c(v) + 1) lower. 0 (default): the paper's Eq. 6.
            Failure hits f(v) are counted on the Task-Tree's matched node whatever λ is.
            With λ > 0 the search runs in-process (a PostgreSQL bank's in-store search
            implements the paper's Eq. 6 only; ``search="store"`` is refused).
        supersede: Env-Tree knowledge contradicted by a newer observation of the same place
            is left out of the recall (:func:`deltamem.core.forgetting.supersede`), and
            each contradiction a learn writes is logged in the audit trail. Default off
            (the paper keeps every observation).
        max_recall_tokens: the recall budget in whitespace tokens (at least 20): the
            Env-Tree's chain is cut from its root side, then the Task-Tree's from its deep
            side, so the base skill stays (:func:`deltamem.core.forgetting.fit_budget`), the
            cut recorded in
            ``recall.details["budget"]``. ``None`` (default): no limit. A per-open choice
            like ``synchronous``, not stored with the bank.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = "generic"
    tau_task: float | Literal["auto"] | None = Field(default=None)
    tau_env: float | Literal["auto"] | None = Field(default=None)
    task_trigger: Literal["goal", "abstract"] | None = None
    env_trigger: Literal["scene", "places"] | None = None
    tau_source: dict[str, str] = Field(default_factory=dict)
    skill_words: Literal["slots", "literal"] | None = None
    skill_words_source: str = ""
    skill_deltas: Literal["additions", "edits"] | None = None
    skill_deltas_source: str = ""
    k_cons: int | None = Field(default=None, ge=1)
    consolidation: bool = True
    epsilon: float = Field(default=0.05, ge=0.0, le=2.0)
    d_max: int = Field(default=5, ge=2, le=1000)
    tie_rule: Literal["bfs", "deepest"] = "deepest"
    use_task_tree: bool = True
    use_env_tree: bool = True
    search: Literal["auto", "exact", "ann", "store"] = "auto"
    synchronous: Literal["full", "normal"] = "full"
    failure_weight: float = Field(default=0.0, ge=0.0, le=2.0)
    supersede: bool = False
    max_recall_tokens: int | None = Field(default=None, ge=20)

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
        words = self.skill_words or p.skill_words
        update["skill_words"] = words
        update["skill_words_source"] = (self.skill_words_source
                                        or skill_words_source(self.domain, words))
        deltas = self.skill_deltas or p.skill_deltas
        update["skill_deltas"] = deltas
        update["skill_deltas_source"] = (self.skill_deltas_source
                                         or skill_deltas_source(self.domain, deltas))
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


def check_bank_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A bank configuration as DeltaMem reads it, every default filled in: the
    :data:`~deltamem.store.base.ConfigCheck` DeltaMem gives its store, so an import refuses
    a configuration DeltaMem could not open. Raises :class:`ConfigError` naming the first
    problems."""
    try:
        return DeltaMemConfig(**config).model_dump()
    except (ConfigError, ValueError, TypeError) as e:  # pydantic's errors are ValueErrors
        first = str(e).strip().splitlines()
        raise ConfigError(
            f"not a valid DeltaMem configuration: {' '.join(first[:3])[:200]}"
        ) from None


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


BANK_LAYOUT: tuple[str, ...] = ("domain", "task_trigger", "env_trigger", "d_max",
                                "skill_words", "skill_deltas")
"""Settings fixed when a bank is created: they decide how its nodes are organised (the
domain's extraction rules, how skills write the goal's words and what their residuals
record, the texts each tree embeds, the depth bound of Eq. 5)."""


def _reopen_settings(
    stored: Mapping[str, Any],
    config: DeltaMemConfig | Mapping[str, Any] | None,
    overrides: Mapping[str, Any],
    path: str,
) -> dict[str, Any]:
    """The settings of a session on an existing bank: the stored configuration with the
    caller's on top (``config``: the fields a :class:`DeltaMemConfig` sets, or a mapping;
    then ``overrides``). ``None`` means "not given". A threshold given anew is named
    ``set by the user`` (``"auto"``: the preset, looked up again). Raises
    :class:`ConfigError` for a :data:`BANK_LAYOUT` setting that differs from the bank's."""
    # a bank written before trigger modes existed embedded the raw texts
    base: dict[str, Any] = {"task_trigger": "goal", "env_trigger": "scene", **stored}
    if "skill_words" not in stored:  # written before skill_words existed: placeholders
        base["skill_words"] = "slots"
        base["skill_words_source"] = "a bank written before skill_words existed (slots)"
    if "skill_deltas" not in stored:  # written before skill_deltas existed: additions
        base["skill_deltas"] = "additions"
        base["skill_deltas_source"] = ("a bank written before skill_deltas existed "
                                       "(additions)")
    if isinstance(config, DeltaMemConfig):
        given = {k: getattr(config, k) for k in config.model_fields_set}
    else:
        given = dict(config or {})
    given.update(overrides)
    given = {k: v for k, v in given.items()
             if v is not None and k not in ("tau_source", "skill_words_source",
                                            "skill_deltas_source")}
    for key in BANK_LAYOUT:
        if key in given and given[key] != base.get(key):
            raise ConfigError(
                f"bank {path} was built with {key}={base.get(key)!r}; opening it with "
                f"{key}={given[key]!r} would change how its nodes are organised (the domain, "
                "the texts each tree embeds and D_max are fixed when a bank is created): "
                f"open it without {key}, or build a new bank"
            )
    source = dict(base.get("tau_source") or {})
    for tree in TREES:
        key = f"tau_{tree}"
        if key in given and given[key] != base.get(key):
            source.pop(tree, None)  # resolved() names the new one
            if given[key] == "auto":
                given[key] = None
    return {**base, **given, "tau_source": source}


class DeltaMem(Memory):
    """The DeltaMem memory system.

    Args:
        store: the bank store.
        embedder: any object implementing :class:`~deltamem.embed.base.Embedder`.
        extractor: any object implementing :class:`~deltamem.extract.base.Extractor`.
        config: a :class:`DeltaMemConfig`, a mapping, or ``None`` (defaults); keyword
            overrides are applied on top. On an existing bank the stored configuration
            is the base and these (the fields a config object sets, the keys of a
            mapping, the keywords) override it for this session; the bank keeps its
            stored configuration. A different ``domain``, ``task_trigger``,
            ``env_trigger`` or ``d_max`` (:data:`BANK_LAYOUT`) is a :class:`ConfigError`.

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
        store: Store,
        embedder: Embedder | None,
        extractor: Extractor | None = None,
        config: DeltaMemConfig | Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        self.store = store
        store.config_check = check_bank_config  # what an import into this bank must pass
        self.embedder = embedder
        meta = store.meta()
        if "config" in meta:  # an existing bank: its settings, the caller's on top
            config = _reopen_settings(meta["config"], config, overrides, store.path)
            overrides = {}
        emb_name = embedder.name if embedder is not None else meta.get("embedder_name")
        self.config = _make_config(config, emb_name, **overrides)
        if extractor is None:
            from deltamem.extract.structural import StructuralExtractor

            extractor = StructuralExtractor(skill_words=self.config.skill_words,
                                            skill_deltas=self.config.skill_deltas)
        self.extractor = extractor
        self._apply_synchronous()
        if embedder is not None:
            self._check_embedder(meta)
            # durability and the recall budget are chosen per open, never inherited from
            # the bank: not stored
            bank_config = self.config.model_dump(exclude=PER_OPEN)
            store.init_meta(embedder.name, embedder.dim, bank_config)
        self.dim = int(store.meta().get("embedder_dim") or (embedder.dim if embedder else 0))
        offers_search = (isinstance(store, SearchStore) and self.config.tie_rule == "deepest"
                         and not self.config.failure_weight)
        if self.config.search == "store" and not offers_search:
            raise ConfigError(
                f"search='store' needs a store with its own search (a postgresql:// bank), "
                f"tie_rule='deepest' and failure_weight=0; {type(store).__name__} with "
                f"tie_rule={self.config.tie_rule!r}, failure_weight="
                f"{self.config.failure_weight:g} has none: use search='auto' or 'exact'"
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
            return cls(store, embedder, extractor, config, **overrides)
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

        The trees keep what Eq. 6 and the write decisions read (embeddings, labels,
        parents, depths, hits, flags); the text of a node is read from the store when a
        chain is recalled (:class:`~deltamem.core.tree.ResidualTree`, ``details``), so
        an open bank costs about its embedding matrix in memory.
        """
        v = self.store.version()
        if v == self._version and self.trees and not force:
            return
        if self.trees and touched is not None and v == self._version:
            self._load_new()
            for node_id in touched:
                for t in self.trees.values():
                    if node_id in t:
                        hits, cons = self.store.node_state(node_id)
                        t.set_state(node_id, hits, cons, self.store.node_failures(node_id))
            return
        if not self.trees:
            counts = self.store.node_counts()
            nodes = self.store.iter_nodes()
            first = next(nodes, None)
            dim = self.dim or (len(first.embedding) if first is not None else 1)
            self.trees = {
                t: ResidualTree(t, dim, search="ann" if self.config.search == "ann" else "exact",
                                tie_rule=self.config.tie_rule,
                                failure_weight=self.config.failure_weight,
                                details=self.store.nodes_by_id,
                                capacity=OPEN_HEADROOM * counts.get(t, 0))
                for t in TREES
            }
            self._max_seq = 0
            if first is not None:
                self._add_loaded(first)
                for n in nodes:
                    self._add_loaded(n)
        else:
            self._load_new()
            states = self.store.node_states()
            known = {state[0] for state in states}
            if any(i not in known for t in self.trees.values() for i in t.ids()):
                # nodes were removed (``prune``, by any process): load the bank afresh
                self.trees = {}
                self._reload(force=True)
                return
            for node_id, tree, hits, cons, failures in states:
                t = self.trees[tree]
                if node_id not in t:
                    # committed by another process after load_nodes() read: data_version
                    # has moved past ``v``, so the next reload loads it
                    continue
                if t.state(node_id) != (hits, cons, failures):
                    t.set_state(node_id, hits, cons, failures)
        self._version = v

    def _load_new(self) -> None:
        """Add the nodes committed after the last one loaded."""
        for n in self.store.iter_nodes(after_seq=self._max_seq):
            self._add_loaded(n)

    def _add_loaded(self, n: Node) -> None:
        self.trees[n.tree].add(n)
        self._max_seq = max(self._max_seq, n.seq)

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
    def match(self, task: Task) -> dict[TreeName, BestNode]:
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
        """Eq. 6 match and Eq. 7 chain of each tree under the domain's memory header.

        With ``supersede``, Env-Tree knowledge lines a deeper (newer) node contradicts are
        left out (``details["env"]["superseded"]`` lists them); with
        ``max_recall_tokens``, chains are cut to fit (the Env-Tree's from its root side, the
        Task-Tree's from its deep side: :func:`~deltamem.core.forgetting.fit_budget`)
        (``details["budget"]``: tokens before and after, the node ids left out, words
        cut). Items are the nodes shown, in prompt order.
        """
        matches = self.match(task)
        cfg = self.config
        details: dict[str, Any] = {}
        chains: dict[TreeName, list[Node]] = {}
        entries: dict[str, list[ChainEntry]] = {}
        for tree, m in matches.items():
            chain = self.trees[tree].chain(m.node_id) if m.accepted and m.node_id else []
            details[tree] = {**m.to_dict(), "chain": [n.id for n in chain]}
            if not chain:
                continue
            chains[tree] = chain
            shown = [n.entry() for n in chain]
            if tree == "env" and cfg.supersede:
                shown, gone = supersede(shown)
                if gone:
                    details[tree]["superseded"] = [
                        {"node": chain[g.index].id, "subject": g.subject, "line": g.line,
                         "by": chain[g.by].id} for g in gone]
            entries[tree] = shown
        header = get_domain(cfg.domain).header

        def render(shown: Mapping[str, Sequence[int]]) -> str:
            sections = []
            for tree, idx in shown.items():
                if not idx:
                    continue
                title = ("Task skill memory" if tree == "task"
                         else "Environment knowledge memory")
                ents = entries[tree]
                before = sum(1 for e in ents[: idx[0]]
                             if e.kind == "RESIDUAL" and e.label == "SUCCESS")
                left = (f"[{idx[0]} earlier {'entry' if idx[0] == 1 else 'entries'} of this "
                        "chain left out: recall budget]\n" if idx[0] else "")
                body = render_chain(tree, [ents[i] for i in idx],  # type: ignore[arg-type]
                                    deltas_before=before)
                later = len(ents) - 1 - idx[-1]
                right = (f"\n[{later} later {'entry' if later == 1 else 'entries'} of this "
                         "chain left out: recall budget]" if later else "")
                sections.append(f"## {title}\n{left}{body}{right}")
            return header + "\n\n" + "\n\n".join(sections) if sections else ""

        positions: dict[str, list[int]] = {t: list(range(len(e))) for t, e in entries.items()}
        if cfg.max_recall_tokens is None:
            text = render(positions)
        else:
            text, cut = fit_budget(entries, render, cfg.max_recall_tokens)
            for t, dropped in cut.dropped.items():
                positions[t] = [i for i in positions[t] if i not in dropped]
            details["budget"] = {
                "max_tokens": cfg.max_recall_tokens, "tokens_before": cut.tokens_before,
                "tokens_after": cut.tokens_after, "truncated_tokens": cut.truncated,
                "left_out": {t: [chains[t][i].id for i in d]  # type: ignore[index]
                             for t, d in cut.dropped.items()},
            }
        items: list[RecallItem] = []
        for tree, chain in chains.items():
            m = matches[tree]
            for i in positions[tree]:
                n = chain[i]
                role = (
                    "warning" if n.label == "FAILURE" else "base" if n.kind == "ROOT" else "delta"
                )
                items.append(
                    RecallItem(
                        source=tree,
                        id=n.id,
                        text=render_chain(tree, [entries[tree][i]]),
                        score=m.score if n.id == m.node_id else None,
                        role=role,
                    )
                )
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
        node's flag was not set yet (compare-and-set).

        Serialised decisions (several processes on one bank). The decision is checked
        under the write lock before anything is written: when another writer committed
        since it was taken, the trees are reloaded and, for a learn that matches for
        itself (``recall`` is ``None``), the match is made again; when the matched node
        differs, or its hit count or consolidation flag moved, the transaction rolls
        back and the decision is taken again (:data:`OPTIMISTIC_TRIES` times outside the
        lock; the last attempt decides while holding it, so a learn always finishes).
        So processes sharing a bank make the decisions one process makes in commit
        order: two concurrent cold starts on the same new task write one ROOT and one
        RESIDUAL under it. A given ``recall`` fixes the matched node (a stale cold-start
        recall still writes a ROOT, as a sequential learn with that recall would); its
        hit count and flag are checked the same way, so consolidation (Eq. 8) follows
        the committed count.
        """
        episode.validate()
        self._check_task(episode.task)
        emb = self._need_embedder()
        if self.store.is_learned(episode.id):
            return Changes((Change("unchanged", "bank", "episode already learned", episode.id),))
        trees = self._enabled()
        given = recall.matches if recall is not None else {}
        decides = not all(t in given for t in trees)
        queries = self.queries(episode.task)
        vecs = emb.embed_passages([queries[t] for t in trees])
        plan = Plan()
        for attempt in range(OPTIMISTIC_TRIES + 1):
            locked = attempt == OPTIMISTIC_TRIES  # the last try decides under the lock
            try:
                with self.store.transaction() if locked else nullcontext():
                    version = self.store.version()
                    matches = self.recall(episode.task).matches if decides else given
                    self._load_matched(matches)
                    basis = self._decision_basis(matches)
                    plan = Plan.join(
                        self._plan_tree(tree, episode, matches[tree], vecs[i], queries[tree])
                        for i, tree in enumerate(trees)
                    )
                    with self.store.transaction():  # joins the locked attempt's
                        if not self.store.mark_learned(episode.id):
                            return Changes(
                                (Change("unchanged", "bank", "episode already learned",
                                        episode.id),)
                            )
                        if not locked and self.store.version() != version:
                            now = self.match(episode.task) if decides else given
                            self._load_matched(now)
                            if self._decision_basis(now) != basis:
                                raise _StaleDecision
                        for rej in plan.rejections:
                            self.store.add_rejection(episode_id=episode.id, tree=rej.source,
                                                     role=rej.role, reason=rej.reason,
                                                     raw=rej.raw)
                        for write in plan.writes:
                            write()
                        self._touch(matches, plan)
            except _StaleDecision:
                log.debug("learn %s: the bank changed under its decision; deciding again "
                          "(attempt %d)", episode.id, attempt + 2)
                continue
            break
        self._reload(force=True, touched={c.id for c in plan.changes
                                          if c.kind in ("hit", "failed") and c.id})
        return Changes(tuple(plan.changes))

    def _touch(self, matches: Mapping[str, Match | BestNode], plan: Plan) -> None:
        """Record the last use of the chains this episode followed and of its writes (the
        episode number is the learned ledger's size, this episode counted): what
        ``prune --policy unused:N`` reads. Inside the learn's transaction."""
        used = [nid for t, m in matches.items() if t in self.trees and m.accepted
                and m.node_id in self.trees[t] for nid in self.trees[t].chain_ids(m.node_id)]
        used += [c.id for c in plan.changes if c.kind == "written" and c.id]
        if used:
            self.store.touch(used, self.store.learned_count())

    def _load_matched(self, matches: Mapping[str, Match | BestNode]) -> None:
        """Bring the trees up to date, forcing a reload when a matched node committed after
        the last one (so its chain and state can be read)."""
        self._reload()
        if any(m.accepted and m.node_id not in self.trees[t]  # type: ignore[index]
               for t, m in matches.items() if t in self.trees):
            self._reload(force=True)

    def _decision_basis(self, matches: Mapping[str, Match | BestNode]) -> tuple[object, ...]:
        """What a learn's writes depend on, per enabled tree: the anchor v* (``None``: a
        cold start) and its success hits and consolidation flag (Eq. 4, 5, 8)."""
        out: list[object] = []
        for t in self._enabled():
            m = matches[t]
            tree = self.trees[t]
            if not (m.accepted and m.node_id is not None and m.node_id in tree):
                out.append((t, None))
                continue
            v = tree.get(m.node_id)
            out.append((t, v.id, v.success_hits, v.consolidated))
        return tuple(out)

    def _enabled(self) -> list[TreeName]:
        return [t for t in TREES if self.config.enabled(t)]

    def _plan_tree(
        self, tree_name: TreeName, episode: Episode, match: Match, vec: np.ndarray, trigger: str
    ) -> Plan:
        """What ``episode`` writes into one tree given the recalled ``match`` (Eq. 4, 5):
        extraction runs now, the writes are queued in the returned plan."""
        tree = self.trees[tree_name]
        cfg = self.config
        plan = Plan()
        tau = cfg.tau(tree_name)
        anchor = match.node_id if match.accepted else None  # v*, for a warm start
        score = match.score
        if match.accepted and anchor not in tree:
            plan.changes.append(Change(
                "skipped", tree_name,
                f"recalled node {match.node_id} is not in this bank; treated as a cold start",
            ))
            anchor = score = None
        warm = anchor is not None
        # the delta is written against the chain it will hang under (§3.2: "relative to its
        # parent chain"): v*'s own, or parent(v*)'s when v* is at D_max and the new node
        # becomes its sibling (Eq. 5) -- against v*'s chain it would leave out what v* adds,
        # which the sibling's recalled chain (Eq. 7) does not hold
        parent, depth = tree.attachment(anchor, cfg.d_max)
        chain = [n.entry() for n in tree.chain(parent)] if parent is not None else []
        role = role_for(tree_name, warm, episode.success)
        score_txt = "empty tree" if score is None else f"best score {score:.3f}"
        try:
            payload = self.extractor.extract(role, episode, chain, cfg.domain)
        except ExtractionError as e:
            plan.reject(tree_name, e, role=role)
            payload = None
        else:
            if payload is None:
                plan.changes.append(Change(
                    "skipped", tree_name,
                    f"{role}: the chain it would extend already covers this episode",
                ))
        if payload is not None:
            node = Node(
                id=new_id(),
                tree=tree_name,
                kind="RESIDUAL" if warm else "ROOT",
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
            if warm:
                where = (
                    f"under {parent}"
                    if parent == anchor
                    else f"as a sibling of {anchor} (depth {depth} = D_max)"
                )
                reason = f"warm start: {score_txt} ≥ τ {tau:g} → RESIDUAL {where}"
            else:
                reason = f"cold start: {score_txt} < τ {tau:g} → ROOT"
            plan.changes.append(Change("written", tree_name, f"{role}: {reason}", node.id))
            plan.writes.append(lambda node=node: self.store.insert_node(node))
            if tree_name == "env" and cfg.supersede and parent is not None:
                plan.extend(self._plan_supersede(tree, node, episode))
        if episode.success and anchor is not None:
            plan.extend(self._plan_hit(tree_name, anchor, episode))
        elif anchor is not None and tree_name == "task":
            plan.extend(self._plan_failure(tree_name, anchor, episode))
        return plan

    def _plan_failure(self, tree_name: TreeName, node_id: str, episode: Episode) -> Plan:
        """A failure hit on the matched node: the failed episode followed its chain.

        Counted whatever ``failure_weight`` is (beside c(v), for reports and ``prune
        --policy harmful``); with λ > 0 it lowers the node's standing (Eq. 6 extended) and
        the audit trail says so.
        """
        plan = Plan()
        v = self.trees[tree_name].get(node_id)
        lam = self.config.failure_weight
        penalty = standing_penalty(v.success_hits, v.failure_hits + 1, lam)
        reason = f"failure hit {v.failure_hits + 1} on matched node (c(v) = {v.success_hits})"
        if lam:
            reason += f"; standing penalty {penalty:.4f}"

        def apply() -> None:
            failures = self.store.increment_failures(node_id)
            if lam:
                self.store.add_audit(
                    episode_id=episode.id, node_id=node_id, tree=tree_name, action="penalised",
                    policy="standing",
                    reason=f"a failed episode followed this node: f(v) = {failures}, c(v) = "
                           f"{v.success_hits}, penalty λ·f/(f+c+1) = "
                           f"{standing_penalty(v.success_hits, failures, lam):.4f}")

        plan.writes.append(apply)
        plan.changes.append(Change("failed", tree_name, reason, node_id))
        return plan

    def _plan_supersede(self, tree: ResidualTree, node: Node, episode: Episode) -> Plan:
        """Knowledge of the new env ``node``'s chain that it contradicts (``supersede``):
        a ``superseded`` change and an audit entry per line (the recall leaves them out)."""
        plan = Plan()
        assert node.parent is not None
        chain = tree.chain(node.parent)
        entries = [n.entry() for n in chain]
        _, before = supersede(entries)
        already = {(g.index, g.line) for g in before}
        _, after = supersede([*entries, node.entry()])
        for g in after:
            if g.by != len(chain) or (g.index, g.line) in already:
                continue
            old = chain[g.index]
            reason = (f"{g.line!r} superseded by node {node.id}, a newer observation of "
                      f"{g.subject!r}")
            plan.changes.append(Change("superseded", "env", reason, old.id))
            plan.writes.append(lambda old=old, g=g, reason=reason: self.store.add_audit(
                episode_id=episode.id, node_id=old.id, tree="env", action="superseded",
                policy="supersede", reason=reason,
                record={"line": g.line, "subject": g.subject, "by": node.id}))
        return plan

    def _plan_hit(self, tree_name: TreeName, node_id: str, episode: Episode) -> Plan:
        """Success hit on the matched node and, at K_cons, consolidation (Eq. 8)."""
        plan = Plan()
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
                plan.reject(tree_name, e, role=role, id=node_id)
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

        plan.writes.append(apply)
        plan.changes.append(
            Change("hit", tree_name, f"success hit {v.success_hits + 1} on matched node", node_id)
        )
        if root is not None:
            plan.changes.append(
                Change(
                    "consolidated",
                    tree_name,
                    f"c(v) reached K_cons={int(k)}: chain of {len(tree.chain(node_id))}"
                    f" nodes fused into new ROOT {root.id}; node marked",
                    root.id,
                )
            )
        return plan

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
        tokens: dict[str, list[int]] = {"ROOT": [0, 0], "RESIDUAL": [0, 0]}  # sum, nodes
        failure_hits: dict[str, int] = {}
        for t in TREES:
            tree = self.trees[t]
            out["nodes"][t] = len(tree)
            out["depth_histogram"][t] = {str(d): c for d, c in tree.depth_histogram().items()}
            summary = tree.summary()  # from the tree's columns: no text is read
            out["kind"][t] = summary["kind"]
            out["label"][t] = summary["label"]
            out["consolidated"][t] = summary["consolidated"]
            failure_hits[t] = summary["failure_hits"]
            for kind, (total, count) in summary["tokens"].items():
                tokens[kind][0] += total
                tokens[kind][1] += count
        for kind, (total, count) in tokens.items():
            out["avg_tokens"][kind] = round(total / count, 1) if count else 0.0
        out["units"] = sum(out["nodes"].values())
        out["episodes_learned"] = self.store.learned_count()
        out["last_episode_id"] = self.store.last_learned()
        out["rejections"] = len(self.store.rejections())
        out["failure_hits"] = failure_hits
        out["audit"] = len(self.store.audit())
        return out

    # -- forgetting ----------------------------------------------------------------------
    def prune(self, policies: Sequence[str], *, dry_run: bool = False) -> list[PruneEntry]:
        """Remove what ``policies`` name (:mod:`deltamem.memories.prune`: ``unused:N``,
        ``harmful[:K]``), each node with its subtree, in one transaction; every removal is
        written to the audit trail (``store.audit()``) with the policy, the reason and the
        node's fields and payload. ``dry_run``: only say what would go.

        Returns the nodes removed (or that would be), parents before children.
        """
        parsed = [parse_policy(p) for p in policies]
        if not parsed:
            raise ConfigError("prune needs at least one policy (unused:N, harmful[:K])")
        if dry_run:  # reads only: works on a bank opened read-only
            return select(self.store.load_nodes(), parsed, self.store.learned_count())
        with self.store.transaction():
            self._reload(force=True)
            clock = self.store.learned_count()
            nodes = self.store.load_nodes()  # the stored last uses (trees may lag behind)
            chosen = select(nodes, parsed, clock)
            if dry_run or not chosen:
                return chosen
            by_id = {n.id: n for n in nodes}
            for e in chosen:
                n = by_id[e.node_id]
                self.store.add_audit(
                    episode_id="", node_id=n.id, tree=n.tree, action="pruned", policy=e.policy,
                    reason=e.reason,
                    record={"kind": n.kind, "label": n.label, "parent": n.parent,
                            "depth": n.depth, "success_hits": n.success_hits,
                            "failure_hits": n.failure_hits, "last_used": n.last_used,
                            "consolidated": n.consolidated, "origin": n.origin,
                            "trigger": n.trigger, "payload": n.payload.to_dict(),
                            "episode_id": n.episode_id, "created_at": n.created_at,
                            "episodes_learned": clock})
            self.store.delete_nodes(e.node_id for e in chosen)
        self.trees = {}
        self._reload(force=True)
        return chosen

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
        from deltamem.store.factory import import_bank_file

        import_bank_file(source, bank, config_check=check_bank_config)
        return cls.open(bank, embedder=embedder, extractor=extractor, **overrides)

    def close(self) -> None:
        self.store.close()


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
        extractor = None  # the bank's own: its skill_words and skill_deltas settings
    elif isinstance(extractor, str):
        raise ConfigError(f"unknown extractor {extractor!r}; use 'structural' or 'llm'")
    opts = {"domain": domain, **dict(options or {})}
    return DeltaMem.open(bank or ":memory:", embedder=embedder, extractor=extractor, **opts)
