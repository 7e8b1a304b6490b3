"""Recall quality of DeltaMem's trees, measured without an LLM.

A bank is filled from a *train* stream: each task is played with the
environment's own solution (:meth:`Environment.solution`: the household game's
walkthrough, ScienceWorld's gold path, a TextWorld walkthrough) and learned
with the structural extractor, recall before learn as in a run, so the trees
grow (residuals, success hits, consolidation) as they would. Then every task of
a *held-out* stream is recalled (no learning) and, per tree:

* **warm rate**: share of held-out tasks with an accepted match (s(v*) ≥ τ);
* **precision@1**: share of accepted matches whose node is *relevant*: it was
  written by a train task with the same label as the query. Labels come from
  ``Task.meta``: the Task-Tree uses ``task_type`` (household: the six ALFWorld
  types; ScienceWorld: the task name; TextWorld: the game family), the
  Env-Tree ``room`` (household: the room kind the game was generated for).
  Where a stream has no label for a tree, only the score distribution is
  reported (and said so);
* the distributions of each query's best *relevant* and best *irrelevant*
  score (medians in the table, both histograms in a PNG), which show where a
  threshold can separate them;
* ``auto τ``: the τ that maximises the F1 of warm-and-relevant recall on the
  held-out queries (precision = relevant / accepted, recall = relevant accepted
  / queries that had a relevant node in the bank); the midpoint of the best
  interval of thresholds, so it is not glued to one query's score.

Also reported for the bank: depth histogram, consolidations and the mean chain
length shown in the prompt for the accepted held-out matches.

No LLM is called anywhere: this is the cost-free check of the memory's
retrieval before any model time is spent.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.analysis.markdown import table, write_markdown
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.types import Episode, Step, Task

__all__ = [
    "LABEL_KEYS",
    "RECALL_FILE",
    "RecallReport",
    "TreeRecall",
    "best_f1_tau",
    "build_bank",
    "collect_episodes",
    "collect_tasks",
    "eval_recall",
    "evaluate_recall",
    "write_report",
]

RECALL_FILE = "recall.md"
#: Task.meta key of the relevance label of each tree
LABEL_KEYS: Mapping[str, str] = {"task": "task_type", "env": "room"}


# -- what is measured -------------------------------------------------------------------


def best_f1_tau(best: Sequence[float], top_relevant: Sequence[bool],
                has_relevant: Sequence[bool]) -> tuple[float, float]:
    """(τ, F1) maximising the F1 of warm-and-relevant recall (module doc).

    ``best[i]`` is query i's best score, ``top_relevant[i]`` whether that node is
    relevant, ``has_relevant[i]`` whether the bank held any relevant node for it.
    τ is the midpoint between the lowest accepted and the highest rejected best
    score of the best cut (ties of F1: the higher cut, fewer wrong warm starts).
    """
    n = len(best)
    if n == 0:
        raise InvalidInputError("no queries")
    order = np.argsort(-np.asarray(best, dtype=np.float64), kind="stable")
    s = np.asarray(best, dtype=np.float64)[order]
    rel = np.asarray(top_relevant, dtype=bool)[order]
    positives = int(np.sum(has_relevant))
    best_f1, best_k = 0.0, 0
    tp = fp = 0
    for k in range(1, n + 1):  # accept the k highest scores
        tp += int(rel[k - 1])
        fp += int(not rel[k - 1])
        if k < n and s[k] == s[k - 1]:
            continue  # a threshold cannot split equal scores
        fn = positives - tp
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best_f1 + 1e-12:
            best_f1, best_k = f1, k
    if best_k == 0:
        return 1.0, 0.0
    low = s[best_k - 1]
    high = s[best_k] if best_k < n else max(low - 0.05, -1.0)
    return float(math.floor((low + high) / 2 * 1000) / 1000), best_f1


@dataclass(frozen=True)
class TreeRecall:
    """Recall quality of one tree on the held-out queries (module doc).

    Per query i: ``best[i]`` (s(v*)), ``accepted[i]``, ``top_relevant[i]``
    (``None`` without labels), ``best_relevant[i]`` / ``best_irrelevant[i]``
    (the best score among relevant / irrelevant nodes; NaN when there is none),
    ``chain[i]`` (chain length recalled, 0 when cold).
    """

    tree: str
    tau: float
    label_key: str | None
    best: list[float]
    accepted: list[bool]
    top_relevant: list[bool | None]
    best_relevant: list[float]
    best_irrelevant: list[float]
    chain: list[int]

    @property
    def n(self) -> int:
        return len(self.best)

    @property
    def labelled(self) -> bool:
        return self.label_key is not None

    @property
    def warm_rate(self) -> float:
        return sum(self.accepted) / self.n if self.n else 0.0

    @property
    def precision(self) -> float | None:
        """Share of accepted matches that are relevant (``None``: no labels or no match)."""
        if not self.labelled:
            return None
        hits = [bool(r) for a, r in zip(self.accepted, self.top_relevant, strict=True) if a]
        return sum(hits) / len(hits) if hits else None

    @property
    def top1(self) -> float | None:
        """Share of queries whose best node is relevant, whatever τ (labels only)."""
        if not self.labelled or not self.n:
            return None
        return sum(bool(r) for r in self.top_relevant) / self.n

    @property
    def mean_chain(self) -> float:
        warm = [c for c, a in zip(self.chain, self.accepted, strict=True) if a]
        return statistics.fmean(warm) if warm else 0.0

    def median(self, which: str) -> float | None:
        vals = [v for v in getattr(self, f"best_{which}") if not math.isnan(v)]
        return statistics.median(vals) if vals else None

    def auto_tau(self) -> tuple[float, float] | None:
        """:func:`best_f1_tau` on these queries (``None`` without labels)."""
        if not self.labelled or not self.n:
            return None
        return best_f1_tau(self.best, [bool(r) for r in self.top_relevant],
                           [not math.isnan(v) for v in self.best_relevant])


@dataclass(frozen=True)
class RecallReport:
    """Recall quality of both trees of one bank (see the module doc)."""

    source: str
    embedder: str
    config: dict[str, Any]
    n_train: int
    n_test: int
    trees: dict[str, TreeRecall]
    bank: dict[str, Any] = field(default_factory=dict)

    def row(self, tree: str) -> list[str]:
        t = self.trees[tree]
        prec = t.precision
        auto = t.auto_tau()
        rel, irr = t.median("relevant"), t.median("irrelevant")
        return [
            tree, t.label_key or "(no label)", f"{t.tau:.3f}", str(t.n), f"{t.warm_rate:.2f}",
            "-" if prec is None else f"{prec:.2f}", "-" if t.top1 is None else f"{t.top1:.2f}",
            "-" if rel is None else f"{rel:.3f}", "-" if irr is None else f"{irr:.3f}",
            f"{t.mean_chain:.2f}", "-" if auto is None else f"{auto[0]:.3f} (F1 {auto[1]:.2f})",
        ]

    HEADER = ("tree", "label", "τ", "queries", "warm rate", "precision@1", "top-1 relevant",
              "median best relevant", "median best irrelevant", "mean chain", "auto τ")

    def markdown(self) -> list[str]:
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(self.config.items())
                        if k in ("tau_task", "tau_env", "task_trigger", "env_trigger",
                                 "tie_rule", "task_tie_rule", "k_cons", "d_max"))
        lines = [f"# Recall quality: {self.source}", "",
                 f"Embedder `{self.embedder}`; {self.n_train} train episodes (environment "
                 f"solution, structural extractor, no LLM) → {self.n_test} held-out tasks. "
                 f"Config: {cfg}.", ""]
        lines += table(list(self.HEADER), [self.row(t) for t in self.trees])
        lines.append("")
        for t in self.trees.values():
            if not t.labelled:
                lines += [f"The {t.tree} tree has no relevance label in this stream: only its "
                          "score distribution is reported.", ""]
        src = self.config.get("tau_source") or {}
        for tree, s in sorted(src.items()):
            lines.append(f"- τ_{tree}: {s}")
        if self.bank:
            lines += ["", f"Bank: {json.dumps(self.bank, sort_keys=True)}"]
        lines.append("")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "embedder": self.embedder, "n_train": self.n_train,
            "n_test": self.n_test, "config": self.config, "bank": self.bank,
            "trees": {
                name: {"tau": t.tau, "label_key": t.label_key, "warm_rate": t.warm_rate,
                       "precision": t.precision, "top1": t.top1,
                       "median_relevant": t.median("relevant"),
                       "median_irrelevant": t.median("irrelevant"),
                       "mean_chain": t.mean_chain, "auto_tau": t.auto_tau()}
                for name, t in self.trees.items()
            },
        }


# -- streams ------------------------------------------------------------------------------


def _solution(env: Any, task: Task) -> list[str] | None:
    """The environment's winning action list for the task just reset."""
    fn = getattr(env, "solution", None)
    return fn() if callable(fn) else None


def play_solution(env: Any, task_id: str) -> Episode:
    """Reset ``task_id`` and replay the environment's solution; the episode as played."""
    task = env.reset(task_id)
    actions = _solution(env, task)
    if not actions:
        raise ConfigError(f"environment {env.name!r} knows no solution for task {task_id!r}")
    steps: list[Step] = []
    success, reward = False, 0.0
    for action in actions:
        admissible = tuple(env.admissible_actions())
        t = env.step(action)
        steps.append(Step(action=action, observation=t.observation, reward=t.score,
                          done=t.done, valid=t.valid, admissible=admissible))
        success, reward = t.success, t.score
        if t.done:
            break
    return Episode(task, tuple(steps), success=success, reward=reward, id=f"solution:{task.id}")


def collect_episodes(env: Any, split: str, n: int, *, seed: int = 0,
                     progress: Callable[[int, int], None] | None = None) -> list[Episode]:
    """The first ``n`` tasks of ``split`` played with the environment's solution."""
    ids = list(env.task_ids(split, seed))[:n]
    out = []
    for i, task_id in enumerate(ids):
        out.append(play_solution(env, task_id))
        if progress:
            progress(i + 1, len(ids))
    return out


def collect_tasks(env: Any, split: str, n: int, *, seed: int = 0) -> list[Task]:
    """The first ``n`` tasks of ``split`` (reset only)."""
    return [env.reset(i) for i in list(env.task_ids(split, seed))[:n]]


def interleave(streams: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin merge (one item of each stream in turn), for mixed-family streams."""
    out: list[Any] = []
    for i in range(max((len(s) for s in streams), default=0)):
        out += [s[i] for s in streams if i < len(s)]
    return out


# -- bank and evaluation -----------------------------------------------------------------


def build_bank(episodes: Sequence[Episode], embedder: Any, *, domain: str,
               options: Mapping[str, Any] | None = None, bank: str | Path = ":memory:") -> Any:
    """A DeltaMem bank filled from ``episodes`` (recall, then learn, in order)."""
    from deltamem.extract.structural import StructuralExtractor
    from deltamem.memories.deltamem import DeltaMem

    mem = DeltaMem.open(bank, embedder=embedder, extractor=StructuralExtractor(),
                        **{"domain": domain, **dict(options or {})})
    for ep in episodes:
        mem.learn(ep, mem.recall(ep.task))
    return mem


def _labels(tasks: Sequence[Task], key: str) -> list[str] | None:
    if tasks and all(key in t.meta for t in tasks):
        return [str(t.meta[key]) for t in tasks]
    return None


def evaluate_recall(mem: Any, train: Sequence[Episode], tests: Sequence[Task], *,
                    label_keys: Mapping[str, str] = LABEL_KEYS, source: str = "") -> RecallReport:
    """Recall every held-out task against ``mem`` (filled from ``train``), per tree."""
    if not tests:
        raise InvalidInputError("no held-out tasks")
    by_episode = {ep.id: ep.task for ep in train}
    trees: dict[str, TreeRecall] = {}
    matches = [mem.match(t) for t in tests]
    for tree in [t for t in ("task", "env") if mem.config.enabled(t)]:
        key = label_keys.get(tree)
        train_labels = _labels([ep.task for ep in train], key) if key else None
        test_labels = _labels(tests, key) if key else None
        labelled = train_labels is not None and test_labels is not None
        rtree = mem.trees[tree]
        nodes = list(rtree)
        node_label: list[str | None] = []
        for n in nodes:
            ep_id = rtree.get(n.source).episode_id if n.source and n.source in rtree \
                else n.episode_id
            task = by_episode.get(ep_id)
            node_label.append(str(task.meta.get(key)) if labelled and task and key else None)
        texts = [mem.queries(t)[tree] for t in tests]
        qv = mem.embedder.embed_queries(texts)
        out: dict[str, list[Any]] = {k: [] for k in
                                     ("best", "accepted", "top", "rel", "irr", "chain")}
        eps = mem.config.epsilon
        for i in range(len(tests)):
            m = matches[i][tree]
            s = rtree.scores(qv[i], eps) if nodes else np.zeros(0, np.float32)
            out["best"].append(float(m.score) if m.score is not None else float("nan"))
            out["accepted"].append(bool(m.accepted))
            out["chain"].append(len(rtree.chain(m.node_id)) if m.accepted and m.node_id else 0)
            if labelled and nodes:
                lab = test_labels[i]  # type: ignore[index]
                rel = np.array([nl == lab for nl in node_label])
                top_label = node_label[[n.id for n in nodes].index(m.node_id)] \
                    if m.node_id else None
                out["top"].append(top_label == lab)
                out["rel"].append(float(s[rel].max()) if rel.any() else float("nan"))
                out["irr"].append(float(s[~rel].max()) if (~rel).any() else float("nan"))
            else:
                out["top"].append(None)
                out["rel"].append(float("nan"))
                out["irr"].append(float("nan"))
        trees[tree] = TreeRecall(tree, mem.config.tau(tree), key if labelled else None,
                                 out["best"], out["accepted"], out["top"], out["rel"],
                                 out["irr"], out["chain"])
    stats = mem.stats()
    bank = {"nodes": stats["nodes"], "depth_histogram": stats["depth_histogram"],
            "consolidated": stats["consolidated"]}
    return RecallReport(source, mem.embedder.name, mem.config.model_dump(mode="json"),
                        len(train), len(tests), trees, bank)


def eval_recall(
    envs: Sequence[str] | str,
    *,
    train_split: str = "train",
    test_split: str = "unseen",
    n_train: int = 60,
    n_test: int = 30,
    embedder: Any = "minilm",
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    env_options: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RecallReport:
    """Fill a bank from ``n_train`` solved tasks of ``train_split`` of each environment and
    score recall on ``n_test`` tasks of ``test_split`` (several environments: their streams
    are interleaved, e.g. the TextWorld families)."""
    from deltamem.envs.registry import make_env

    if isinstance(embedder, str):
        from deltamem.embed.factory import make_embedder

        embedder = make_embedder(embedder)
    specs = [envs] if isinstance(envs, str) else list(envs)
    if not specs:
        raise ConfigError("eval-recall needs at least one environment")
    trains, tests, domain = [], [], None
    for spec in specs:
        env = make_env(spec, **dict(env_options or {}))
        try:
            domain = domain or env.domain
            trains.append(collect_episodes(
                env, train_split, n_train, seed=seed,
                progress=(lambda i, n, s=spec: progress(f"{s}: solved {i}/{n}"))
                if progress else None))
            tests.append(collect_tasks(env, test_split, n_test, seed=seed))
        finally:
            env.close()
    train = interleave(trains)
    test = interleave(tests)
    mem = build_bank(train, embedder, domain=domain or "generic", options=options)
    try:
        return evaluate_recall(mem, train, test, source=f"{'+'.join(specs)} "
                               f"{train_split}:{n_train} → {test_split}:{n_test} (seed {seed})")
    finally:
        mem.close()


# -- output -----------------------------------------------------------------------------


def write_report(report: RecallReport, out: str | Path, *, plot: bool = True) -> Path:
    """Write ``recall.md``, ``recall.json`` and (with matplotlib) ``recall_scores.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = report.markdown()
    if plot:
        png = plot_scores(report, out / "recall_scores.png")
        if png is not None:
            lines += [f"![best relevant vs irrelevant scores]({png.name})", ""]
    (out / "recall.json").write_text(json.dumps(report.to_dict(), indent=1, sort_keys=True,
                                                default=str) + "\n", encoding="utf-8")
    return write_markdown(out / RECALL_FILE, lines)


def plot_scores(report: RecallReport, path: Path) -> Path | None:
    """Histograms of each query's best relevant / irrelevant score per tree, τ marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    trees = list(report.trees.values())
    fig, axes = plt.subplots(1, len(trees), figsize=(5 * len(trees), 3.2), squeeze=False)
    for ax, t in zip(axes[0], trees, strict=True):
        rel = [v for v in t.best_relevant if not math.isnan(v)]
        irr = [v for v in t.best_irrelevant if not math.isnan(v)]
        if rel or irr:
            ax.hist([rel, irr], bins=20, label=["best relevant", "best irrelevant"],
                    color=["tab:green", "tab:red"], alpha=0.8)
        else:
            ax.hist([v for v in t.best if not math.isnan(v)], bins=20, color="tab:blue",
                    label="best score (no labels)")
        ax.axvline(t.tau, color="k", linestyle="--", label=f"τ = {t.tau:.3f}")
        ax.set_title(f"{t.tree} tree ({t.label_key or 'no label'})")
        ax.set_xlabel("cosine score")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
