"""Learn latency at 1k, 10k and 100k nodes, the sizes taking turns, on SQLite and PostgreSQL.

Issue 52's target: the learn rate behind the exact scan flat within 20 % from 1k to 100k
nodes. Per backend, one bank per size is filled in bulk (one transaction: n roots of random
unit vectors, ``peers.py``'s nodes, and n episodes in the learned ledger, as a bank that
learned n episodes holds) and opened with :class:`deltamem.DeltaMem` (the Env-Tree off, a
table embedder: no embedding time). Then the banks take turns: each learns a block of
``--block`` new episodes (a new random vector each: a cold start, one new root), then the
next bank, in an order rotating from block to block, so a change of load hits every size
alike. Each learn is handed the recall the agent acted on (made before the learn, not
timed), as ``peers.py`` does; what is timed is :meth:`~deltamem.DeltaMem.learn`: the write
decision, the structural extraction (no LLM), one transaction (the ledger's row and count,
the node, the chain's last use) and the tree's update.

The table gives per backend, round and size the learn p50 and p90 (ms), learns per second
at the p50, and the p50 over the smallest size's of the same round (1.00 = flat); a last
row per backend and size has the median of the rounds' ratios.

    python benchmarks/learn_rate.py                                    # SQLite, 1k..100k
    DELTAMEM_TEST_PG_URL=postgresql://... python benchmarks/learn_rate.py --backends sqlite,postgres
    python benchmarks/learn_rate.py --sizes 1000,10000 --learns 30 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers

from deltamem import DeltaMem, Episode, Step, Task


class Bank:
    """One filled bank and the episodes it will learn."""

    def __init__(self, location: str, n: int, dim: int, learns: int, seed: int,
                 synchronous: str) -> None:
        rng = np.random.default_rng(seed)
        self.location, self.n = location, n
        self.emb = peers.VectorEmbedder(dim)
        kw: dict[str, Any] = {"domain": "generic", "use_env_tree": False}
        if "://" not in location:
            kw["synchronous"] = synchronous
        mem = DeltaMem.open(location, embedder=self.emb, **kw)
        t0 = time.perf_counter()
        with mem.store.transaction():
            if "://" in location:
                _fill_in_database(mem.store, n, dim, seed)
            else:
                for lo in range(0, n, 65536):
                    hi = min(n, lo + 65536)
                    vecs = peers.unit(rng.standard_normal((hi - lo, dim), dtype=np.float32))
                    for i in range(lo, hi):
                        mem.store.insert_node(peers._node(i, vecs[i - lo]))
                        mem.store.mark_learned(f"seed-{i}", 1.0)
        mem.close()
        self.fill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.mem = DeltaMem.open(location, embedder=self.emb, **kw)
        self.open_s = time.perf_counter() - t0
        new = peers.unit(rng.standard_normal((learns, dim), dtype=np.float32))
        self.tasks: list[Task] = []
        for j, v in enumerate(new):
            t = Task(id=f"learn-{j}", goal=f"find the {peers.tag(j)} learn item",
                     domain="generic")
            self.emb.register(self.mem.queries(t)["task"], v)
            self.tasks.append(t)
        self.episodes = [Episode(t, (Step("look it up", "Found it.", done=True),),
                                 success=True, reward=1.0) for t in self.tasks]
        self.next = 0
        assert self.mem.store.learned_count() == n

    def learn(self) -> float:
        """One learn (its recall made first, not timed); seconds."""
        j = self.next
        self.next += 1
        r = self.mem.recall(self.tasks[j])
        t0 = time.perf_counter()
        self.mem.learn(self.episodes[j], r)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.mem.close()
        if "://" in self.location:
            from deltamem.store.postgres import drop_bank

            drop_bank(self.location)


def _fill_in_database(store: Any, n: int, dim: int, seed: int) -> None:
    """``peers.py``'s roots and n ledger rows made by the PostgreSQL server itself (one row
    a round trip took ~0.1 s each at load 15: 100k would have taken hours). The vectors are
    random directions (uniform in a cube, normalised), as far from the learned ones as
    ``peers.py``'s; the rows are what :meth:`insert_node` and :meth:`mark_learned` write."""
    counted = store._has_table("learned_count")  # schema version 3: a kept count
    if counted:  # one count at the end, not one update per row (PostgresStore.import_records)
        store._exec("SET LOCAL deltamem.ledger_bulk = 'on'")
    store._exec("SELECT setseed(%s)", ((seed % 1000) / 1000,))
    store._exec(
        "INSERT INTO nodes (id, tree, kind, label, parent_id, depth, success_hits, "
        'consolidated, origin, source_id, "trigger", activation, "procedure", termination, '
        "embedding, episode_id, created_at, failure_hits, last_used) "
        "SELECT 'n' || i, 'task', 'ROOT', 'SUCCESS', NULL, 1, 0, FALSE, 'extracted', NULL, "
        "'stored ' || i, %s, %s, %s, (SELECT array_agg(x / nrm) FROM unnest(r.a) x)::vector, "
        "'seed-' || i, 0.0, 0, 0 FROM generate_series(0, %s) i, "
        "LATERAL (SELECT array_agg(random() - 0.5 + 0 * g) AS a "
        "FROM generate_series(1, %s) g WHERE i >= 0) r, "
        "LATERAL (SELECT sqrt(sum(x * x)) AS nrm FROM unnest(r.a) x) q",
        (peers._PAYLOAD.activation, peers._PAYLOAD.procedure, peers._PAYLOAD.termination,
         n - 1, dim))
    store._exec("INSERT INTO learned (episode_id, learned_at) "
                "SELECT 'seed-' || i, 1.0 FROM generate_series(0, %s) i", (n - 1,))
    if counted:
        store._exec("UPDATE learned_count SET n = (SELECT COUNT(*) FROM learned)")
        store._exec("SET LOCAL deltamem.ledger_bulk = 'off'")
    store._wrote()


def _ledger_row(backend: str, b: Bank, reps: int) -> str:
    """p50 of the store's ``learned_count()`` and of ``COUNT(*)`` over the ledger, taking
    turns in blocks of 10 calls (call by call, the one-row read waited behind the count's
    CPU burst: the database's process had just used its share of a loaded core)."""
    store = b.mem.store
    kept: list[float] = []
    counted: list[float] = []
    calls = ((kept, store.learned_count),
             (counted, lambda: store._fetch_one("SELECT COUNT(*) FROM learned")))
    for _ in range(max(1, reps // 10)):
        for out, fn in calls:
            for _ in range(10):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
    return (f"| {backend} | {b.n:,} | {statistics.median(kept) * 1e3:.3f} | "
            f"{statistics.median(counted) * 1e3:.3f} |")


def location(backend: str, tmp: Path, n: int, pg_url: str) -> str:
    if backend == "sqlite":
        return str(tmp / f"learn-{n}.db")
    sep = "&" if "?" in pg_url else "?"
    return f"{pg_url}{sep}bank=learnrate-{uuid.uuid4().hex[:10]}-{n}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--backends", default="sqlite", help="comma list: sqlite, postgres")
    p.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL", ""),
                   help="PostgreSQL database (default: $DELTAMEM_TEST_PG_URL)")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--learns", type=int, default=60, help="timed learns per size and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--block", type=int, default=10, help="learns a bank makes in a row")
    p.add_argument("--synchronous", default="full", choices=("full", "normal"),
                   help="SQLite durability (full: an fsync per learn)")
    p.add_argument("--ledger-reps", type=int, default=50,
                   help="then time the ledger's count this many times per bank (0: not)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",")]
    backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    if "postgres" in backends and not a.pg_url:
        p.error("postgres needs --pg-url or DELTAMEM_TEST_PG_URL")
    print(f"# learn rate by bank size, sizes taking turns — {os.cpu_count()} cores, d {a.dim}, "
          f"{a.learns} learns per size × {a.rounds} rounds, blocks of {a.block}, SQLite "
          f"synchronous={a.synchronous}")
    print(f"machine before: {peers.uptime()}\n")
    cols = ["backend", "n", "round", "learn p50 ms", "learn p90 ms", "learns/s (p50)",
            "p50 ÷ smallest"]
    rows: list[str] = []
    builds: list[str] = []
    ledger: list[str] = []
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="learn-rate-") as tmp:
            banks = []
            try:
                for k, n in enumerate(sizes):
                    b = Bank(location(backend, Path(tmp), n, a.pg_url), n, a.dim,
                             a.learns * a.rounds + 1, a.seed + k, a.synchronous)
                    banks.append(b)
                    builds.append(f"{backend} {n:,}: filled in {b.fill_s:.1f} s, opened in "
                                  f"{b.open_s:.1f} s")
                    print(f"<!-- {builds[-1]} -->", file=sys.stderr, flush=True)
                for b in banks:  # warm-up, not timed
                    b.learn()
                ratios: dict[int, list[float]] = {n: [] for n in sizes}
                for r in range(a.rounds):
                    times: dict[int, list[float]] = {n: [] for n in sizes}
                    for blk, lo in enumerate(range(0, a.learns, a.block)):
                        count = min(a.block, a.learns - lo)
                        start = (blk + r) % len(banks)
                        for b in (*banks[start:], *banks[:start]):
                            times[b.n] += [b.learn() for _ in range(count)]
                    p50 = {n: statistics.median(t) for n, t in times.items()}
                    for n in sizes:
                        ratios[n].append(p50[n] / p50[sizes[0]])
                        p90 = sorted(times[n])[int(0.9 * (len(times[n]) - 1))]
                        rows.append(f"| {backend} | {n:,} | {r + 1} | {p50[n] * 1e3:.2f} | "
                                    f"{p90 * 1e3:.2f} | {1 / p50[n]:.0f} | "
                                    f"{ratios[n][-1]:.2f} |")
                        print(rows[-1], file=sys.stderr, flush=True)
                for n in sizes:
                    rows.append(f"| {backend} | {n:,} | median | | | | "
                                f"{statistics.median(ratios[n]):.2f} |")
                for b in banks if a.ledger_reps else ():
                    ledger.append(_ledger_row(backend, b, a.ledger_reps))
            finally:
                for b in banks:
                    b.close()
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    print("\n".join(rows))
    if ledger:
        print("\nThe episode number a learn records: the store's `learned_count()` against "
              "counting the ledger, taking turns (p50 ms):\n")
        print("| backend | n | learned_count() | SELECT COUNT(*) FROM learned |")
        print("|---|---|---|---|")
        print("\n".join(ledger))
    print("\n" + "\n".join(builds))
    print(f"\nmachine after: {peers.uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
