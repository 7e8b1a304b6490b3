"""τ calibration: the similarity scores DeltaMem's match gate would see on an environment's tasks.

The paper picks τ_base per tree "by sampling a small subset of episodes from
each benchmark and examining the empirical similarity score distribution"
(§4.1, Appendix A). This module makes that step a command.

What is measured. DeltaMem embeds a new task's query text with
``embed_queries`` and compares it with the stored nodes' texts embedded with
``embed_passages`` (:meth:`DeltaMem.queries`: the goal for the Task-Tree, the
scene text for the Env-Tree, each in its trigger mode). For n sampled tasks we form
``S[i, j] = query_i · passage_j`` and report, per tree:

* the distribution of all pairs ``S[i, j]``, ``i ≠ j`` (mostly unrelated
  tasks: the background level of the embedding space);
* the distribution of nearest-neighbour scores ``nn_i = max_{j≠i} S[i, j]``:
  exactly the best score the Eq. 6 gate would see for task i against a bank
  holding the other sampled tasks.

Two rules; which one applies is said in the report:

* **labelled (F1)**, whenever the sampled tasks carry a label for the tree
  (``Task.meta``: ``task_type`` for the Task-Tree, ``room`` for the Env-Tree):
  τ maximises the F1 of warm-and-relevant matches when each sampled task is
  matched against the others (:func:`deltamem.analysis.recall_eval.best_f1_tau`:
  precision = same-label nearest neighbours among accepted ones, recall = over
  tasks that have a same-label neighbour; τ is the midpoint of the best cut).
  This is the rule the measured presets of :mod:`deltamem.domains` come from.
* **unlabelled (quantile)**: τ = the q-quantile of the nearest-neighbour
  scores, q = 0.75, rounded down to two decimals: only the closest pairings
  warm-start. It knows nothing of what is relevant: measured on the household
  stream with MiniLM and raw goals it suggested τ_task 0.92 / τ_env 0.99, where
  the nearest goal is most often of another task type and every scene is
  nearest to one of another room kind; it is a fallback only.

The report also gives, when labels exist, the nearest-neighbour scores of
same-label and different-label pairs and, at the suggested τ, the share of
tasks that would warm-start on a same-label vs a different-label neighbour.
A warning is added when τ is at or below the median of all pairs.

The texts are those DeltaMem embeds (:func:`deltamem.core.triggers.tree_texts`)
in the trigger modes given (default: the domain's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.analysis.markdown import table, write_markdown
from deltamem.core.triggers import tree_texts
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.types import Task

__all__ = [
    "CALIBRATE_FILE",
    "QUANTILES",
    "Calibration",
    "TreeCalibration",
    "calibrate",
    "calibrate_tasks",
    "calibrate_tree",
    "sample_tasks",
    "suggested",
    "tree_queries",
    "write_calibration",
]

CALIBRATE_FILE = "calibrate.md"
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
DEFAULT_QUANTILE = 0.75


@dataclass(frozen=True)
class TreeCalibration:
    """Similarity distributions of one tree and the suggested τ (see the module docstring).

    ``histogram`` is ``(low, high, count)`` per bin over all pairs;
    ``warm_share`` the fraction of sampled tasks whose nearest-neighbour score
    is ≥ ``tau``. ``same_kind`` / ``different_kind`` hold nearest-neighbour
    quantiles per label relation, and ``warm_same`` / ``warm_different`` the
    shares of tasks warm-starting on a same / different-kind neighbour, when
    labels were given (else empty / ``None``).
    """

    tree: str
    n: int
    quantile: float
    tau_exact: float
    tau: float
    pairs: dict[float, float]
    nearest: dict[float, float]
    histogram: list[tuple[float, float, int]]
    warm_share: float
    same_kind: dict[float, float] = field(default_factory=dict)
    different_kind: dict[float, float] = field(default_factory=dict)
    warm_same: float | None = None
    warm_different: float | None = None
    rule: str = "quantile"

    @property
    def warning(self) -> str | None:
        """Set when τ is at or below the median of all pairs (see the module docstring)."""
        median = self.pairs[0.5]
        if self.tau <= median:
            return (f"τ {self.tau:.2f} is at or below the median similarity of all pairs "
                    f"({median:.3f}): the typical pair of tasks would pass the gate; the "
                    "embedder barely separates these tasks (sample more tasks or raise q)")
        return None


def calibrate_tree(
    queries: np.ndarray,
    passages: np.ndarray | None = None,
    *,
    tree: str = "task",
    quantile: float = DEFAULT_QUANTILE,
    bins: int = 10,
    labels: Sequence[Any] | None = None,
    rule: str | None = None,
) -> TreeCalibration:
    """Calibrate one tree from the embeddings of n sampled tasks (pure; no model).

    Args:
        queries: ``(n, d)`` query embeddings (``embed_queries``), rows unit-norm.
        passages: ``(n, d)`` passage embeddings of the same texts
            (``embed_passages``); ``None``: the queries (symmetric embedders).
        quantile: q of the rule τ = q-quantile of nearest-neighbour scores.
        bins: histogram bins over all pairs.
        labels: optional task kinds (relevance labels of this tree).
        rule: ``f1`` (needs labels) or ``quantile``; ``None``: ``f1`` with labels,
            else ``quantile`` (module doc).
    """
    q = np.asarray(queries, dtype=np.float64)
    p = q if passages is None else np.asarray(passages, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] < 2:
        raise InvalidInputError(f"need an (n, d) matrix with n >= 2, got shape {q.shape}")
    if p.shape != q.shape:
        raise InvalidInputError(f"queries {q.shape} and passages {p.shape} differ in shape")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(p))):
        raise InvalidInputError("embeddings must be finite")
    if not 0.0 < quantile < 1.0:
        raise InvalidInputError(f"quantile must be in (0, 1), got {quantile}")
    if bins < 1:
        raise InvalidInputError(f"bins must be >= 1, got {bins}")
    n = q.shape[0]
    if labels is not None and len(labels) != n:
        raise InvalidInputError(f"{len(labels)} labels for {n} tasks")
    sims = q @ p.T
    off = ~np.eye(n, dtype=bool)
    pairs = sims[off]
    masked = np.where(off, sims, -np.inf)
    nearest = masked.max(axis=1)
    rule = rule or ("f1" if labels is not None else "quantile")
    if rule not in ("f1", "quantile"):
        raise InvalidInputError(f"unknown rule {rule!r}; use 'f1' or 'quantile'")
    if rule == "f1" and labels is None:
        raise InvalidInputError("rule 'f1' needs labels")
    tau_exact = float(np.quantile(nearest, quantile))
    tau = _round_down(tau_exact)
    counts, edges = np.histogram(pairs, bins=bins)
    hist = [(float(edges[i]), float(edges[i + 1]), int(c)) for i, c in enumerate(counts)]
    extra: dict[str, Any] = {}
    if labels is not None:
        lab = np.asarray([str(x) for x in labels])
        same = lab[:, None] == lab[None, :]
        same_nn = np.where(off & same, sims, -np.inf).max(axis=1)
        diff_nn = np.where(off & ~same, sims, -np.inf).max(axis=1)
        nn_same = same[np.arange(n), masked.argmax(axis=1)]
        if rule == "f1":
            from deltamem.analysis.recall_eval import best_f1_tau

            has_same = (off & same).any(axis=1)
            tau_exact, _ = best_f1_tau(nearest.tolist(), nn_same.tolist(), has_same.tolist())
            tau = tau_exact
        warm = nearest >= tau
        extra = {
            "same_kind": _quantiles(same_nn[np.isfinite(same_nn)]),
            "different_kind": _quantiles(diff_nn[np.isfinite(diff_nn)]),
            "warm_same": float(np.mean(warm & nn_same)),
            "warm_different": float(np.mean(warm & ~nn_same)),
        }
    return TreeCalibration(
        tree=tree, n=n, quantile=quantile, tau_exact=tau_exact, tau=tau, rule=rule,
        pairs=_quantiles(pairs), nearest=_quantiles(nearest), histogram=hist,
        warm_share=float(np.mean(nearest >= tau)), **extra,
    )


def _round_down(x: float) -> float:
    """``x`` rounded down to two decimals (``0.29`` stays ``0.29`` despite binary floats)."""
    tau = math.floor(x * 100 + 1e-9) / 100
    return round(tau - 0.01, 2) if tau > x else tau


def _quantiles(x: np.ndarray) -> dict[float, float]:
    if x.size == 0:
        return {}
    return {qq: float(v) for qq, v in zip(QUANTILES, np.quantile(x, QUANTILES), strict=True)}


def tree_queries(task: Task, task_trigger: str = "goal",
                 env_trigger: str = "scene") -> dict[str, str]:
    """The text each tree is queried with (the same as :meth:`DeltaMem.queries`)."""
    return tree_texts(task, task_trigger, env_trigger)


@dataclass(frozen=True)
class Calibration:
    """Calibration of both trees on a sample of an environment's tasks."""

    source: str
    embedder: str
    trees: dict[str, TreeCalibration]
    label_key: str | None = None
    label_keys: dict[str, str] = field(default_factory=dict)
    triggers: dict[str, str] = field(default_factory=dict)

    def markdown(self) -> list[str]:
        """The report as Markdown lines."""
        lines = [f"# τ calibration: {self.source}, embedder {self.embedder}", ""]
        for name, t in self.trees.items():
            if t.rule == "f1":
                how = (f"τ maximises the F1 of warm-and-relevant matches (labels "
                       f"`{self.label_keys.get(name, '?')}`) = {t.tau_exact:.3f}")
            else:
                how = (f"τ = q{t.quantile:g} quantile of the nearest-neighbour scores = "
                       f"{t.tau_exact:.4f}, rounded down (no labels: unlabelled fallback)")
            lines += [
                f"## {name} tree: suggested τ_{name} = {t.tau:.3f}", "",
                f"{t.n} tasks, trigger `{self.triggers.get(name, '?')}`. Rule: {how}; "
                f"{t.warm_share:.0%} of the sampled tasks would warm-start against a bank "
                "holding the others.", "",
            ]
            rows = [["all pairs", *(f"{t.pairs[q]:.3f}" for q in QUANTILES)],
                    ["nearest neighbour", *(f"{t.nearest[q]:.3f}" for q in QUANTILES)]]
            key = self.label_keys.get(name, self.label_key)
            if t.same_kind:
                rows.append([f"NN, same {key}",
                             *(f"{t.same_kind[q]:.3f}" for q in QUANTILES)])
            if t.different_kind:
                rows.append([f"NN, different {key}",
                             *(f"{t.different_kind[q]:.3f}" for q in QUANTILES)])
            lines += table(["similarity", *(f"p{round(q * 100):d}" for q in QUANTILES)], rows)
            lines.append("")
            if t.warm_same is not None and t.warm_different is not None:
                lines += [f"Labels `{key}`: at "
                          f"τ = {t.tau:.2f}, {t.warm_same:.0%} of tasks warm-start on a "
                          f"same-kind neighbour, {t.warm_different:.0%} on a different-kind "
                          "one.", ""]
            if t.warning:
                lines += [f"**Warning:** {t.warning}", ""]
            top = max(c for _, _, c in t.histogram) or 1
            lines += ["All-pairs histogram:", "", "```"]
            lines += [f"[{lo:6.3f}, {hi:6.3f}) {c:6d} {'#' * round(40 * c / top)}"
                      for lo, hi, c in t.histogram]
            lines += ["```", ""]
        lines += ["Rule and rationale: see `deltamem.analysis.calibrate` (module docstring).", ""]
        return lines


def calibrate_tasks(
    tasks: Sequence[Task],
    embedder: Any,
    *,
    source: str = "tasks",
    quantile: float = DEFAULT_QUANTILE,
    bins: int = 10,
    label_key: str | None = "task_type",
    env_label_key: str | None = "room",
    task_trigger: str | None = None,
    env_trigger: str | None = None,
    rule: str | None = None,
) -> Calibration:
    """Embed the tasks' tree texts as DeltaMem does and calibrate both trees.

    Labels (``task.meta[label_key]`` for the Task-Tree, ``task.meta[env_label_key]``
    for the Env-Tree) are used when every task has one: they select the F1 rule
    (``rule=None``) and the same/different-label rows. Trigger modes default to
    those of the tasks' domain (:mod:`deltamem.domains`).
    """
    from deltamem.domains import default_trigger

    if len(tasks) < 2:
        raise InvalidInputError(f"need at least 2 tasks, got {len(tasks)}")
    name = getattr(embedder, "name", None)
    triggers = {"task": task_trigger or default_trigger(tasks[0].domain, "task", name),
                "env": env_trigger or default_trigger(tasks[0].domain, "env", name)}
    keys = {"task": label_key, "env": env_label_key}
    used: dict[str, str] = {}
    trees = {}
    for name in ("task", "env"):
        key = keys[name]
        labels = None
        if key is not None and all(key in t.meta for t in tasks):
            labels = [t.meta[key] for t in tasks]
            used[name] = key
        texts = [tree_queries(t, triggers["task"], triggers["env"])[name] for t in tasks]
        trees[name] = calibrate_tree(
            embedder.embed_queries(texts), embedder.embed_passages(texts), tree=name,
            quantile=quantile, bins=bins, labels=labels,
            rule=rule if labels is not None else "quantile",
        )
    return Calibration(source, str(getattr(embedder, "name", type(embedder).__name__)), trees,
                       used.get("task"), used, triggers)


def sample_tasks(env: Any, split: str, n: int, *, seed: int = 0) -> list[Task]:
    """``env.reset`` on the first ``n`` task ids of ``split``, in the order of
    ``env.task_ids(split, seed)``."""
    if n < 2:
        raise ConfigError(f"calibration needs n >= 2 tasks, got {n}")
    if env.splits and split not in env.splits:
        raise ConfigError(f"environment {env.name!r} has no split {split!r}; "
                          f"splits: {', '.join(env.splits)}")
    ids = list(env.task_ids(split, seed))[:n]
    if len(ids) < 2:
        raise ConfigError(f"split {split!r} has {len(ids)} task(s); calibration needs 2")
    return [env.reset(i) for i in ids]


def calibrate(
    env: Any,
    split: str,
    *,
    n: int = 40,
    embedder: Any = "minilm",
    seed: int = 0,
    quantile: float = DEFAULT_QUANTILE,
    bins: int = 10,
    label_key: str | None = "task_type",
) -> Calibration:
    """Sample ``n`` tasks of ``env`` (a spec for ``make_env`` or an Environment) and
    calibrate both trees with ``embedder`` (a spec for ``make_embedder`` or an Embedder)."""
    if isinstance(embedder, str):
        from deltamem.embed.factory import make_embedder

        embedder = make_embedder(embedder)
    own = isinstance(env, str)
    if own:
        from deltamem.envs.registry import make_env

        env = make_env(env)
    try:
        tasks = sample_tasks(env, split, n, seed=seed)
    finally:
        if own:
            env.close()
    return calibrate_tasks(tasks, embedder, source=f"{env.name}/{split}", quantile=quantile,
                           bins=bins, label_key=label_key)


def write_calibration(calibration: Calibration, out: str | Path) -> Path:
    """Write ``calibrate.md`` into directory ``out`` and return its path."""
    return write_markdown(Path(out) / CALIBRATE_FILE, calibration.markdown())


def suggested(calibration: Calibration) -> Mapping[str, float]:
    """``{"tau_task": …, "tau_env": …}``, ready for ``--option`` / ``memory_options``."""
    return {f"tau_{name}": t.tau for name, t in calibration.trees.items()}
