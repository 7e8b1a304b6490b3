"""Recall quality of DeltaMem's trees under several settings, on one cached stream (no LLM).

Plays the train stream with the environment's solution once (cached as JSONL), resets the
held-out tasks once, then builds one in-memory bank per setting and prints, per tree, the
figures of :mod:`deltamem.analysis.recall_eval` (warm rate, precision@1, top-1 relevance,
median best relevant / irrelevant score, mean recalled chain, F1-optimal τ) plus the bank's
depth histogram and consolidations.

    nice -n 10 python benchmarks/recall_matrix.py --env household --n-train 60 --n-test 30 \\
        --seed 0 --test-split unseen --cache runs/recall/household

Settings are given as ``name:key=value,key=value`` (``--setting``); without any, a default
matrix (paper defaults, trigger modes, tie rules) is run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.analysis.recall_eval import (
    RecallReport,
    build_bank,
    collect_episodes,
    collect_tasks,
    evaluate_recall,
    interleave,
)
from deltamem.bench.config import parse_options
from deltamem.embed.factory import make_embedder
from deltamem.envs.registry import make_env
from deltamem.types import Episode, Task

DEFAULT_SETTINGS = {
    "paper (goal, scene)": {"task_trigger": "goal", "env_trigger": "scene",
                            "tau_task": 0.75, "tau_env": 0.85},
    "abstract, places (τ -1)": {"task_trigger": "abstract", "env_trigger": "places",
                                "tau_task": -1.0, "tau_env": -1.0},
    "goal, scene (τ -1)": {"task_trigger": "goal", "env_trigger": "scene",
                           "tau_task": -1.0, "tau_env": -1.0},
}


def load_stream(env_specs: list[str], split: str, n: int, seed: int, cache: Path | None,
                kind: str, env_options: dict[str, Any]) -> list[Any]:
    path = None
    if cache is not None:
        tag = "+".join(s.replace(":", "_") for s in env_specs)
        path = cache / f"{tag}-{kind}-{split}-{n}-s{seed}.jsonl"
        if path.is_file():
            rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            return [Episode.from_dict(r) if kind == "train" else Task.from_dict(r) for r in rows]
    streams = []
    for spec in env_specs:
        env = make_env(spec, **env_options)
        try:
            t0 = time.time()
            if kind == "train":
                streams.append(collect_episodes(env, split, n, seed=seed))
            else:
                streams.append(collect_tasks(env, split, n, seed=seed))
            print(f"# {spec} {kind} {split}: {n} tasks in {time.time() - t0:.0f} s", flush=True)
        finally:
            env.close()
    items = interleave(streams)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(x.to_dict()) + "\n" for x in items))
    return items


class MemoEmbedder:
    """The embedder with a per-process cache (the settings re-embed the same texts)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def _get(self, kind: str, texts: Any) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if (kind, t) not in self._cache]
        if todo:
            fn = self.inner.embed_queries if kind == "q" else self.inner.embed_passages
            for t, v in zip(todo, fn(todo), strict=True):
                self._cache[(kind, t)] = v
        return np.stack([self._cache[(kind, t)] for t in texts]) if texts else \
            np.zeros((0, self.dim), np.float32)

    def embed_queries(self, texts: Any) -> np.ndarray:
        return self._get("q", list(texts))

    def embed_passages(self, texts: Any) -> np.ndarray:
        return self._get("p", list(texts))


def row(name: str, rep: RecallReport) -> list[str]:
    out = []
    for tree, t in rep.trees.items():
        prec = t.precision
        auto = t.auto_tau()
        rel, irr = t.median("relevant"), t.median("irrelevant")
        rels = [v for v in t.best_relevant if v == v]
        irrs = [v for v in t.best_irrelevant if v == v]
        span = (f"{min(rels):.3f} / {max(irrs):.3f}" if rels and irrs else "-")
        best = [v for v in t.best if v == v]
        if not t.labelled and best:  # no labels: the best-score distribution only
            span = f"best score median {sorted(best)[len(best) // 2]:.3f} (no label)"
        out.append(
            f"| {name} | {tree} | {t.tau:.3f} | {t.warm_rate:.2f} | "
            f"{'-' if prec is None else f'{prec:.2f}'} | "
            f"{'-' if t.top1 is None else f'{t.top1:.2f}'} | "
            f"{'-' if rel is None else f'{rel:.3f}'} | {'-' if irr is None else f'{irr:.3f}'} | "
            f"{t.mean_chain:.2f} | {'-' if auto is None else f'{auto[0]:.3f} ({auto[1]:.2f})'} | "
            f"{rep.bank['depth_histogram'][tree]} | {rep.bank['consolidated'][tree]} | {span} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", required=True)
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--test-split", default="unseen")
    ap.add_argument("--n-train", type=int, default=60)
    ap.add_argument("--n-test", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--setting", action="append", default=[],
                    help="name:key=value,key=value (DeltaMem options)")
    ap.add_argument("--env-option", "-e", action="append", default=[])
    args = ap.parse_args()
    env_options = parse_options(args.env_option)
    train = load_stream(args.env, args.train_split, args.n_train, args.seed, args.cache,
                        "train", env_options)
    tests = load_stream(args.env, args.test_split, args.n_test, args.seed, args.cache,
                        "test", env_options)
    solved = sum(ep.success for ep in train)
    print(f"# train {len(train)} episodes ({solved} solved), held-out {len(tests)} tasks; "
          f"embedder {args.embedder}; seed {args.seed}")
    settings: dict[str, dict[str, Any]] = {}
    for s in args.setting:
        name, _, opts = s.partition(":")
        settings[name] = parse_options([o for o in opts.split(",") if o])
    settings = settings or DEFAULT_SETTINGS
    embedder = MemoEmbedder(make_embedder(args.embedder))
    t0 = time.perf_counter()
    embedder.inner.embed_queries(["warm-up"])
    t0 = time.perf_counter()
    for i in range(20):
        embedder.inner.embed_queries([f"put a clean mug {i} in the shelf"])
    print(f"# {args.embedder}: {(time.perf_counter() - t0) / 20 * 1000:.1f} ms per query "
          "(one short text, this machine, now)")
    domain = make_env(args.env[0], **env_options).domain
    print("| setting | tree | τ | warm rate | precision@1 | top-1 relevant | med. best rel. "
          "| med. best irr. | mean chain | F1-τ (F1) | depth hist. | consolidated "
          "| min best rel. / max best irr. |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, opts in settings.items():
        mem = build_bank([ep for ep in train if ep.steps], embedder, domain=domain, options=opts)
        rep = evaluate_recall(mem, train, tests)
        mem.close()
        print("\n".join(row(name, rep)), flush=True)


if __name__ == "__main__":
    main()
