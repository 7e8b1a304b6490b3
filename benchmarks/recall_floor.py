"""Recall p50 ÷ the ``M @ q`` floor, the systems taking turns query by query (issue 52).

``benchmarks/peers.py`` times each system in its own pass; on a loaded machine two passes
minutes apart see different loads, and its ratios at 1k nodes (tens of microseconds a call)
moved by 2× between runs of the same code. Here the same systems answer the same queries
in turns: the queries are cut in blocks (``--block``, 50: a few milliseconds), every system
answers a block in a row, then the next system the same block, in an order that rotates
from block to block, so a change of load hits them alike while each runs with its own data
in the caches, as in ``peers.py``'s passes (``--block 1`` alternates call by call: then
every call finds the caches holding the other systems' data, which costs the longer code
path more). A round is one pass over the queries; the table has one row per round and size,
and a last row per size with the median of the rounds' ratios.

Systems (the vectors and the bank are ``peers.py``'s: n random unit vectors as roots of the
Task-Tree, the Env-Tree off, a table embedder, so embedding time is excluded everywhere):

* ``floor``: ``M @ q`` + ``argmax`` on a float32 matrix, numpy's ``M @ q`` (OpenBLAS) and
  one dot per row on the calling thread; the ratio divides by the faster of the two medians;
* ``tree scan``: :meth:`deltamem.core.tree.ResidualTree.match` (Eq. 6, float64 re-scoring
  of the rows within the rounding window, tie rule), no storage;
* ``recall``: :meth:`deltamem.DeltaMem.recall` on a SQLite bank: the query text, the
  embedder's table lookup, the bank's version check, the scan, the chain's rendering (a
  first recall of a chain renders it; a recall showing chains rendered since the bank last
  changed is served from :class:`~deltamem.memories.deltamem.render.RecallCache`).

The queries are ``peers.py``'s: half small perturbations of a stored vector, half fresh
draws. ``--fresh`` empties the recall cache before every recall, so every recall renders
its chain (the first-recall cost).

    python benchmarks/recall_floor.py                              # 1k, 10k, 100k; 5 rounds
    python benchmarks/recall_floor.py --sizes 1000 --rounds 7 --queries 1000
    python benchmarks/recall_floor.py --sizes 1000 --fresh
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers


def systems(data: peers.Data, tmp: Path, fresh: bool) -> tuple[dict[str, Callable[[int], int]],
                                                                Callable[[], None]]:
    """The timed calls by name (each returns its top-1 row) and the bank's close."""
    opened: list[object] = []
    open_bank = peers.DeltaMem.open

    def remember(*a: object, **k: object) -> object:
        mem = open_bank(*a, **k)  # type: ignore[arg-type]
        opened.append(mem)
        return mem

    peers.DeltaMem.open = remember  # type: ignore[method-assign]
    try:
        library = peers.deltamem_library(data, tmp)
    finally:
        peers.DeltaMem.open = open_bank  # type: ignore[method-assign]
    mem = opened[-1]
    recall = library.recall
    if fresh:
        cache = mem.recalls._entries  # type: ignore[attr-defined]

        def recall(i: int) -> int:
            cache.clear()
            return library.recall(i)

    return {
        "floor M @ q": peers.numpy_blas(data, tmp).recall,
        "floor 1-thread": peers.numpy_one_thread(data, tmp).recall,
        "tree scan": peers.deltamem_tree(data, tmp).recall,
        "recall": recall,
    }, library.close


def one_round(calls: dict[str, Callable[[int], int]], n_queries: int, block: int,
              offset: int) -> tuple[dict[str, float], int]:
    """Median seconds per system over one pass (blocks of queries, rotating order); queries
    whose top-1 row differs between the systems."""
    names = list(calls)
    fns = [calls[k] for k in names]
    times: list[list[float]] = [[] for _ in names]
    tops: list[list[int]] = [[] for _ in names]
    pc = time.perf_counter
    for b, lo in enumerate(range(0, n_queries, block)):
        qs = range(lo, min(n_queries, lo + block))
        start = (b + offset) % len(names)
        for j in (*range(start, len(names)), *range(start)):
            f, ts, out = fns[j], times[j], tops[j]
            for i in qs:
                t0 = pc()
                out.append(f(i))
                ts.append(pc() - t0)
    differ = sum(len({repr(x) for x in t}) > 1 for t in zip(*tops, strict=True))
    return {k: statistics.median(t) for k, t in zip(names, times, strict=True)}, differ


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=600, help="queries per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--block", type=int, default=50,
                   help="queries a system answers in a row before the next one's turn "
                        "(1: strict alternation, each call's caches cold after the others)")
    p.add_argument("--fresh", action="store_true",
                   help="empty the recall cache before each recall (every recall renders)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    print(f"# recall ÷ floor, interleaved — {os.cpu_count()} cores, numpy {np.__version__}, "
          f"d {a.dim}, {a.queries} queries × {a.rounds} rounds, blocks of {a.block}"
          f"{', recall cache emptied before each recall' if a.fresh else ''}")
    print(f"machine before: {peers.uptime()}\n")
    cols = ["n", "round", "floor M @ q µs", "floor 1-thread µs", "tree scan µs", "recall µs",
            "tree ÷ floor", "recall ÷ floor", "top-1 ≠ floor"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|", flush=True)
    for n in (int(x) for x in a.sizes.split(",")):
        data = peers.make_data(n, a.dim, a.queries, 1, a.seed)
        with tempfile.TemporaryDirectory(prefix="recall-floor-") as tmp:
            calls, close = systems(data, Path(tmp), a.fresh)
            try:
                for i in range(min(50, a.queries)):  # warm-up, not timed
                    for f in calls.values():
                        f(i)
                ratios: list[tuple[float, float]] = []
                for r in range(a.rounds):
                    med, differ = one_round(calls, a.queries, a.block, r)
                    floor = min(med["floor M @ q"], med["floor 1-thread"])
                    ratios.append((med["tree scan"] / floor, med["recall"] / floor))
                    us = [f"{med[k] * 1e6:.1f}" for k in list(calls)]
                    print(f"| {n:,} | {r + 1} | " + " | ".join(us) + f" | {ratios[-1][0]:.2f} "
                          f"| {ratios[-1][1]:.2f} | {differ} |", flush=True)
                tree_m = statistics.median(x[0] for x in ratios)
                rec_m = statistics.median(x[1] for x in ratios)
                print(f"| {n:,} | median | | | | | {tree_m:.2f} | {rec_m:.2f} | |", flush=True)
            finally:
                close()
    print(f"\nmachine after: {peers.uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
