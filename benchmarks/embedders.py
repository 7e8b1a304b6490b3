"""Embedder speed on this machine: the numpy MiniLM and, if installed, sentence-transformers.

Prints, per embedder: load time, batch throughput (sentences/s embedding ~200
short task-like sentences as passages, median over ``--runs``) and per-query
latency (one query per call, median and p90 over ``--queries`` calls).
sentence-transformers runs the same bundled all-MiniLM-L6-v2 folder (offline)
unless ``--st-model`` names another.

    python benchmarks/embedders.py [--runs 3] [--queries 50] [--threads N] [--st-model NAME]
                                   [--no-st]

``--threads`` caps BLAS / torch threads (set before numpy is imported).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

VERBS = ["put", "take", "open", "close", "heat", "cool", "clean", "slice", "examine", "move"]
OBJECTS = [
    "the apple", "a mug", "the red key", "the knife", "a bowl of water", "the thermometer",
    "the book", "two potatoes", "the blue vase", "a candle", "the laptop", "the soap bar",
]  # fmt: skip
PLACES = [
    "in the fridge", "on the counter", "in the drawer", "on the stove", "in the sink",
    "on the shelf", "next to the door", "in the cabinet", "on the desk", "in the microwave",
]  # fmt: skip
TAILS = ["", " and then go north", " before the timer ends", " carefully", " to finish the task"]


def sentences(n: int = 200) -> list[str]:
    """``n`` deterministic, varied task-like sentences (3 to ~15 words)."""
    out = []
    for i in range(n):
        v, o, p = VERBS[i % 10], OBJECTS[(i * 7) % 12], PLACES[(i * 3) % 10]
        out.append(f"{v} {o} {p}{TAILS[(i * 11) % 5]}".capitalize())
    return out


def measure(
    label: str, make: Callable[[], object], texts: list[str], runs: int, queries: int
) -> None:
    t0 = time.perf_counter()
    emb = make()
    emb.embed_passages(texts[:4])  # type: ignore[attr-defined]  # force the lazy load
    load_s = time.perf_counter() - t0

    batch_s = []
    for _ in range(runs):
        t = time.perf_counter()
        emb.embed_passages(texts)  # type: ignore[attr-defined]
        batch_s.append(time.perf_counter() - t)
    lat_ms = []
    for i in range(queries):
        q = texts[(i * 13) % len(texts)]
        t = time.perf_counter()
        emb.embed_queries([q])  # type: ignore[attr-defined]
        lat_ms.append((time.perf_counter() - t) * 1000)
    lat_ms.sort()
    med = statistics.median(batch_s)
    print(
        f"{label:<34} load {load_s:6.2f} s | batch of {len(texts)}: {med:6.3f} s "
        f"= {len(texts) / med:7.1f} sent/s | 1 query: median {statistics.median(lat_ms):6.1f} ms, "
        f"p90 {lat_ms[int(0.9 * (len(lat_ms) - 1))]:6.1f} ms",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--n", type=int, default=200, help="sentences in the batch")
    ap.add_argument("--threads", type=int, default=0, help="cap BLAS/torch threads (0: default)")
    ap.add_argument("--st-model", default="", help="sentence-transformers model (default: MiniLM)")
    ap.add_argument("--no-st", action="store_true", help="the numpy MiniLM only")
    args = ap.parse_args()
    if args.threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)

    from deltamem.embed.minilm import MiniLMEmbedder, bundled_model_dir

    texts = sentences(args.n)
    threads = args.threads or "default"
    print(f"python {sys.version.split()[0]}, cpus {os.cpu_count()}, threads {threads}")
    measure("minilm (numpy)", MiniLMEmbedder, texts, args.runs, args.queries)
    if args.no_st:
        return

    try:
        import sentence_transformers  # noqa: F401
        import torch
    except ImportError:
        print("sentence-transformers/torch not installed: skipped")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from deltamem.embed.sentence_transformers import SentenceTransformerEmbedder

    model = args.st_model or str(bundled_model_dir())
    label = f"sentence-transformers (torch {torch.__version__.split('+')[0]})"
    measure(label, lambda: SentenceTransformerEmbedder(model), texts, args.runs, args.queries)


if __name__ == "__main__":
    main()
