"""DeltaMem's settings: :class:`DeltaMemConfig`, and how a bank's stored settings meet the
caller's when it is reopened (:func:`reopen_settings`, :data:`BANK_LAYOUT`).

The parameters of paper §3: the acceptance thresholds τ_base of each tree (Eq. 4, 6), the
failure penalty ε (Eq. 6), the depth bound D_max (Eq. 5), K_cons (Eq. 8); and what this
implementation adds (trigger modes, the standing penalty, supersede, the recall budget, the
search path, durability). A bank stores its resolved settings; a bank written before a
setting existed reopens with what it was written with (:func:`reopen_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deltamem.core.payload import TreeName
from deltamem.domains import (
    DOMAINS,
    d_max_source,
    default_trigger,
    get_domain,
    skill_deltas_source,
    skill_words_source,
    task_tie_rule_source,
    thresholds,
)
from deltamem.errors import ConfigError, explain_validation

__all__ = [
    "BANK_LAYOUT",
    "PER_OPEN",
    "TREES",
    "DeltaMemConfig",
    "check_bank_config",
    "make_config",
    "reopen_settings",
]

TREES: tuple[TreeName, ...] = ("task", "env")
PER_OPEN = frozenset({"synchronous", "max_recall_tokens"})
"""Settings chosen by each open of a bank, never stored with it."""


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
        skill_deltas: what the default (structural) extractor writes for a residual skill:
            ``exact`` (what turns the steps the chain composes to into the episode's, so a
            SUCCESS node's chain composes to its episode's steps: :mod:`deltamem.core.
            residual`), or the earlier ``additions`` (the steps found nowhere in the chain,
            appended) and ``edits`` (as exact, but steps the episode left out stay);
            ``None``: the domain's setting
            (:attr:`deltamem.domains.DomainPreset.skill_deltas`). Stored with the bank with
            where it came from (``skill_deltas_source``); a bank written before this
            setting existed reopens with ``additions``.
        k_cons: success hits that trigger consolidation (Eq. 8); ``None`` = preset.
        consolidation: set False for K_cons = ∞.
        epsilon: failure penalty ε (Eq. 6).
        d_max: maximum depth D_max (Eq. 5), at least 2 (roots have depth 1; with
            D_max = 1 a warm start would file a delta at the virtual root); ``None``: the
            domain's (:attr:`deltamem.domains.DomainPreset.d_max`; the paper's 5 is
            ``d_max=5``). Fixed when a bank is created, stored with where it came from
            (``d_max_source``).
        tie_rule: which node wins an exact tie of Eq. 6 (see :mod:`deltamem.core.tree`):
            ``deepest`` (default: deeper, then newer) or ``bfs`` (as the authors'
            code: first in breadth-first order). The in-store search of a PostgreSQL
            bank implements ``deepest`` only; with ``bfs`` the ``auto`` search runs
            in-process.
        task_tie_rule: the Task-Tree's tie rule, where it differs from ``tie_rule``:
            ``None`` means the domain's (:attr:`deltamem.domains.DomainPreset.task_tie_rule`)
            unless ``tie_rule`` is given, then ``tie_rule``. The Env-Tree's residuals add
            knowledge (the deepest chain holds the most), the Task-Tree's are alternative
            procedures for one goal, so the two trees may break ties differently. Stored
            with where it came from (``task_tie_rule_source``).
        use_task_tree, use_env_tree: ablation switches (paper Table 3).
        search: where and how Eq. 6 is computed (see
            :meth:`~deltamem.memories.deltamem.DeltaMem.match`):

            * ``auto`` (default): in the store when its search spares the scan of every
              node (:class:`~deltamem.store.base.SearchStore` with ``search_first``: a
              ``postgresql://…?index=hnsw`` bank, pgvector's HNSW indexes), else
              in-process ``exact`` (every SQLite bank, and a PostgreSQL bank with the
              exact scan: the same result as the database's scan, without its two
              queries per recall);
            * ``exact``: in-process, scanning every node, whatever the store;
            * ``ann``: in-process, candidates from an approximate index (optional extra
              ``deltamem[ann]``; see :mod:`deltamem.core.ann`), with the failure penalty
              and ties still exact;
            * ``store``: in the store, and a :class:`ConfigError` when the store has no
              search (SQLite).

            ``store`` on PostgreSQL gives exactly the in-process ``exact`` result
            (same node, score, acceptance, ties) unless the bank URL asks for
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
    skill_deltas: Literal["exact", "additions", "edits"] | None = None
    skill_deltas_source: str = ""
    k_cons: int | None = Field(default=None, ge=1)
    consolidation: bool = True
    epsilon: float = Field(default=0.05, ge=0.0, le=2.0)
    d_max: int | None = Field(default=None, ge=2, le=1000)
    d_max_source: str = ""
    tie_rule: Literal["bfs", "deepest", "record"] = "deepest"
    task_tie_rule: Literal["bfs", "deepest", "record"] | None = None
    task_tie_rule_source: str = ""
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
        d_max = self.d_max or p.d_max
        update["d_max"] = d_max
        update["d_max_source"] = self.d_max_source or d_max_source(self.domain, d_max)
        given = "tie_rule" in self.model_fields_set
        task_rule = self.task_tie_rule or (self.tie_rule if given
                                           else p.task_tie_rule or self.tie_rule)
        update["task_tie_rule"] = task_rule
        update["task_tie_rule_source"] = (
            self.task_tie_rule_source
            or ("set by the user" if self.task_tie_rule
                else task_tie_rule_source(self.domain, task_rule, given)))
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

    def tie_rule_of(self, tree: TreeName) -> str:
        """The tie rule of ``tree`` (the Task-Tree's own when it has one)."""
        if tree == "task" and self.task_tie_rule is not None:
            return self.task_tie_rule
        return self.tie_rule

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
        cfg = DeltaMemConfig(**config)
        return cfg.model_dump() | {"d_max": cfg.d_max or get_domain(cfg.domain).d_max}
    except (ConfigError, ValueError, TypeError) as e:  # pydantic's errors are ValueErrors
        first = str(e).strip().splitlines()
        raise ConfigError(
            f"not a valid DeltaMem configuration: {' '.join(first[:3])[:200]}"
        ) from None


def make_config(
    config: DeltaMemConfig | Mapping[str, Any] | None,
    embedder: str | None = None,
    **overrides: Any,
) -> DeltaMemConfig:
    """``config`` (an object, a mapping or ``None``) with ``overrides`` on top, validated and
    resolved for ``embedder`` (:meth:`DeltaMemConfig.resolved`); :class:`ConfigError` when
    invalid."""
    try:
        if config is None:
            cfg = DeltaMemConfig(**overrides)
        elif isinstance(config, DeltaMemConfig):
            cfg = config.model_copy(update=overrides) if overrides else config
            cfg = DeltaMemConfig(**cfg.model_dump(exclude_unset=True))
        else:
            cfg = DeltaMemConfig(**{**dict(config), **overrides})
    except ConfigError:
        raise
    except ValueError as e:  # pydantic.ValidationError is a ValueError
        raise ConfigError(f"invalid DeltaMem configuration: {explain_validation(e)}") from e
    return cfg.resolved(embedder)


BANK_LAYOUT: tuple[str, ...] = ("domain", "task_trigger", "env_trigger", "d_max",
                                "skill_words", "skill_deltas")
"""Settings fixed when a bank is created: they decide how its nodes are organised (the
domain's extraction rules, how skills write the goal's words and what their residuals
record, the texts each tree embeds, the depth bound of Eq. 5)."""


def reopen_settings(
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
    if "d_max_source" not in stored and "d_max" in stored:  # written before it existed
        base["d_max_source"] = (f"a bank written before d_max_source existed "
                                f"(d_max = {stored['d_max']})")
    if "task_tie_rule" not in stored and "tie_rule" in stored:  # written before it existed
        base["task_tie_rule"] = stored["tie_rule"]
        base["task_tie_rule_source"] = (f"a bank written before task_tie_rule existed "
                                        f"(tie_rule = {stored['tie_rule']})")
    if isinstance(config, DeltaMemConfig):
        given = {k: getattr(config, k) for k in config.model_fields_set}
    else:
        given = dict(config or {})
    given.update(overrides)
    given = {k: v for k, v in given.items()
             if v is not None and k not in ("tau_source", "skill_words_source",
                                            "skill_deltas_source", "d_max_source",
                                            "task_tie_rule_source")}
    if "tie_rule" in given and "task_tie_rule" not in given:  # tie_rule names both trees'
        base.pop("task_tie_rule", None)
        base.pop("task_tie_rule_source", None)
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

