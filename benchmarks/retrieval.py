"""Latency of one tree query (Eq. 6) at 1k–1M nodes: naive loop, exact vectorised, ANN.

Prints Markdown tables. Per size n and width d it builds one
:class:`~deltamem.core.tree.ResidualTree` of n nodes and times, query by
query (interleaved, so background load hits every method alike):

* ``raw``: ``M @ q`` on the tree's own float32 matrix — the memory-bandwidth
  reference no exact scan can beat;
* ``exact``: ``tree.match`` (one mat-vec + penalty + window + exact re-scoring
  + tie rule) and its ratio to ``raw``;
* ``naive``: a Python loop over the nodes implementing Eq. 6 and the tie rule;
  run only up to ``--naive-max`` nodes, larger sizes are extrapolated from
  its per-node cost and marked ``~``;
* ``ann``: ``search="ann"`` (hnswlib; see :mod:`deltamem.core.ann`), its build
  time, and its agreement with exact (same node id).

Memory is the float32 matrix (plus the per-node Python objects, measured as
the growth of the process's resident set while building the tree) and, for
ANN, the resident-set growth while building the graphs.

Data (the "benchmark distribution"): unit vectors in n/40 clusters (random
centres, within-cluster spread 0.6/√d per coordinate, typical best cosine
≈ 0.77); 5 % of nodes repeat an earlier node's embedding (a goal seen again);
25 % are FAILURE. Queries: 40 % fresh draws from a random cluster, 40 % small
perturbations of a stored node, 20 % exact copies of a stored node (ties).

    python benchmarks/retrieval.py                 # 1k..1M, d 384 and 768 (long: ANN builds)
    python benchmarks/retrieval.py --quick         # ~1 minute
    python benchmarks/retrieval.py --compare-libs 100000   # hnswlib vs usearch vs faiss
    python benchmarks/retrieval.py --sizes 1000000 --dims 384 --ann-k 4,8 --ann-ef 64,128,256
                                                   # ANN agreement/latency trade-off, one build
    python benchmarks/retrieval.py --sizes 1000000 --dims 384 --ann-m 32 --ann-efc 200
                                                   # other graph parameters (--ann-m, --ann-efc)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node, ResidualTree

TAU = 0.75
EPS = 0.05


def rss_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class Data:
    """Node embeddings, FAILURE flags and query vectors of one benchmark case."""

    emb: np.ndarray
    failure: np.ndarray
    queries: np.ndarray


def make_data(n: int, d: int, n_queries: int, seed: int = 0) -> Data:
    """The benchmark distribution (module doc), deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    n_clusters = max(1, n // 40)
    spread = np.float32(0.6 / np.sqrt(d))
    centres = unit(rng.standard_normal((n_clusters, d), dtype=np.float32))
    emb = np.empty((n, d), dtype=np.float32)
    step = 65536
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        noise = rng.standard_normal((hi - lo, d), dtype=np.float32) * spread
        emb[lo:hi] = unit(centres[rng.integers(0, n_clusters, hi - lo)] + noise)
    dup = np.flatnonzero(rng.random(n) < 0.05)
    dup = dup[dup > 0]
    emb[dup] = emb[rng.integers(0, dup)]  # repeat an earlier node
    failure = rng.random(n) < 0.25
    kinds = rng.random(n_queries)
    qs = np.empty((n_queries, d), dtype=np.float32)
    for i, u in enumerate(kinds):
        if u < 0.4:
            c = centres[rng.integers(0, n_clusters)]
            qs[i] = unit(c + rng.standard_normal(d, dtype=np.float32) * spread)
        elif u < 0.8:
            e = emb[rng.integers(0, n)]
            qs[i] = unit(e + rng.standard_normal(d, dtype=np.float32) * spread / 3)
        else:
            qs[i] = emb[rng.integers(0, n)]
    return Data(emb, failure, qs)


_PAYLOAD = Payload("benchmark", "benchmark")


def make_nodes(data: Data) -> list[Node]:
    """Roots (depth 1) with the data's embeddings (views, no copies)."""
    return [
        Node(
            id=f"n{i}",
            tree="task",
            kind="ROOT",
            label="FAILURE" if data.failure[i] else "SUCCESS",
            parent=None,
            depth=1,
            trigger="",
            embedding=data.emb[i],
            payload=_PAYLOAD,
            seq=i + 1,
        )
        for i in range(len(data.emb))
    ]


def naive_match(nodes: list[Node], q: np.ndarray) -> str:
    """Eq. 6 by definition: a Python loop, float64 cosine, penalty, tie rule."""
    q64 = q.astype(np.float64)
    best_key: tuple[float, int, int, int] | None = None
    best_id = ""
    for n in nodes:
        s = float(np.dot(n.embedding.astype(np.float64), q64)) - (
            EPS if n.label == "FAILURE" else 0.0
        )
        key = (s, -int(n.consolidated), n.depth, n.seq)
        if best_key is None or key > best_key:
            best_key, best_id = key, n.id
    return best_id


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1e3:.3f}" if x < 1 else f"{x * 1e3:.0f}"


def run_case(n: int, d: int, args: argparse.Namespace) -> dict[str, str]:
    n_q = args.queries if n <= 100_000 else args.queries_1m
    data = make_data(n, d, n_q)
    nodes = make_nodes(data)
    rss0 = rss_mb()
    tree = ResidualTree("task", d, nodes)
    rss_tree = rss_mb() - rss0
    matrix = tree._emb[: len(tree)]  # the tree's own matrix, for the raw reference
    ann_tree: ResidualTree | None = None
    build_s = ann_mb = float("nan")
    if args.ann and n <= args.ann_max:
        ann_tree = ResidualTree(
            "task", d, search="ann",
            ann_options={"k": args.ann_k[0], "ef_search": args.ann_ef[0],
                         "threads": args.threads, "m": args.ann_m,
                         "ef_construction": args.ann_efc},
        )  # fmt: skip
        for node in nodes:
            ann_tree.add(node)
        rss1 = rss_mb()
        assert ann_tree._ann is not None
        build_s, _ = timed(lambda: ann_tree._ann.sync(ann_tree._emb, ann_tree._fail, n))
        ann_mb = rss_mb() - rss1
    raw_t: list[float] = []
    exact_t: list[float] = []
    ann_t: list[float] = []
    agree = 0
    for q in data.queries:
        raw_t.append(timed(lambda q=q: matrix @ q)[0])
        t, m = timed(lambda q=q: tree.match(q, TAU, EPS))
        exact_t.append(t)
        if ann_tree is not None:
            t2, m2 = timed(lambda q=q: ann_tree.match(q, TAU, EPS))
            ann_t.append(t2)
            agree += m2.node_id == m.node_id  # type: ignore[attr-defined]
    if ann_tree is not None and (len(args.ann_k) > 1 or len(args.ann_ef) > 1):
        args.sweep_rows += ann_sweep(ann_tree, tree, data, n, d, args)
    naive_note = ""
    if n <= args.naive_max:
        naive_t = []
        for q in data.queries[: args.naive_queries]:
            t, nid = timed(lambda q=q: naive_match(nodes, q))
            naive_t.append(t)
            assert nid == tree.match(q, TAU, EPS).node_id, "exact search disagrees with Eq. 6"
        naive_p50 = statistics.median(naive_t)
        args.naive_per_node = naive_p50 / n
        naive_cell = ms(naive_p50)
    else:
        naive_cell = "~" + ms(args.naive_per_node * n) if args.naive_per_node else "—"
        naive_note = " (extrapolated)"
    row = {
        "n": f"{n:,}",
        "d": str(d),
        "naive p50 ms": naive_cell + naive_note,
        "raw M@q p50 ms": ms(statistics.median(raw_t)),
        "exact p50 ms": ms(statistics.median(exact_t)),
        "exact p95 ms": ms(pct(exact_t, 0.95)),
        "exact/raw": f"{statistics.median(exact_t) / statistics.median(raw_t):.2f}",
        "ANN p50 ms": ms(statistics.median(ann_t)) if ann_t else "—",
        "ANN p95 ms": ms(pct(ann_t, 0.95)) if ann_t else "—",
        "ANN agree": f"{agree / len(data.queries):.3f}" if ann_t else "—",
        "ANN build s": f"{build_s:.1f}" if ann_t else "—",
        "matrix MiB": f"{matrix.nbytes / 2**20:.0f}",
        "tree RSS MiB": f"{rss_tree:.0f}",
        "ANN RSS MiB": f"{ann_mb:.0f}" if ann_t else "—",
        "queries": str(len(data.queries)),
    }
    return row


def ann_sweep(ann_tree: ResidualTree, tree: ResidualTree, data: Data, n: int, d: int,
              args: argparse.Namespace) -> list[dict[str, str]]:
    """Latency and agreement of the same built ANN graphs for every (k, ef_search) pair."""
    ann = ann_tree._ann
    assert ann is not None
    truth = [tree.match(q, TAU, EPS).node_id for q in data.queries]
    rows = []
    for k in args.ann_k:
        for ef in args.ann_ef:
            ann.k, ann.ef_search = k, max(ef, k)
            lat, agree = [], 0
            for q, want in zip(data.queries, truth, strict=True):
                t, m = timed(lambda q=q: ann_tree.match(q, TAU, EPS))
                lat.append(t)
                agree += m.node_id == want  # type: ignore[attr-defined]
            rows.append({
                "n": f"{n:,}", "d": str(d), "M": str(args.ann_m),
                "ef_construction": str(args.ann_efc), "k": str(k), "ef_search": str(max(ef, k)),
                "ANN p50 ms": ms(statistics.median(lat)), "ANN p95 ms": ms(pct(lat, 0.95)),
                "ANN agree": f"{agree / len(truth):.3f}", "queries": str(len(truth)),
            })  # fmt: skip
            print(f"<!-- sweep n={n} d={d} k={k} ef={ef} -->", file=sys.stderr, flush=True)
    ann.k, ann.ef_search = args.ann_k[0], args.ann_ef[0]
    return rows


def print_table(rows: list[dict[str, str]]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        print("| " + " | ".join(r[c] for c in cols) + " |")
    sys.stdout.flush()


# -- library comparison -----------------------------------------------------------------------


def compare_libs(n: int, d: int, n_q: int, threads: int) -> list[dict[str, str]]:
    """Build + query each installed ANN library on the same data (k=4, ef=64, M=16, efC=100)."""
    data = make_data(n, d, n_q)
    x, qs = data.emb, data.queries
    truth = [int(np.argmax(x @ q)) for q in qs]  # plain cosine, no penalty: a pure index test
    libs: list[tuple[str, Callable[[], object], Callable[[object, np.ndarray], np.ndarray]]] = []
    try:
        import hnswlib

        def hb() -> object:
            i = hnswlib.Index(space="ip", dim=d)
            i.init_index(max_elements=n, ef_construction=100, M=16)
            i.add_items(x, np.arange(n), num_threads=threads)
            i.set_ef(64)
            return i

        libs.append(("hnswlib", hb, lambda i, q: i.knn_query(q, k=4, num_threads=1)[0][0]))
    except ImportError:
        print("hnswlib not installed", file=sys.stderr)
    try:
        from usearch.index import Index

        for dt in ("f32", "f16", "i8"):

            def ub(dt: str = dt) -> object:
                i = Index(ndim=d, metric="ip", dtype=dt, connectivity=16, expansion_add=100,
                          expansion_search=64)  # fmt: skip
                i.add(np.arange(n), x, threads=threads)
                return i

            libs.append((f"usearch {dt}", ub, lambda i, q: i.search(q, 4).keys))
    except ImportError:
        print("usearch not installed", file=sys.stderr)
    try:
        import faiss

        def fb() -> object:
            faiss.omp_set_num_threads(threads)
            i = faiss.IndexHNSWFlat(d, 16, faiss.METRIC_INNER_PRODUCT)
            i.hnsw.efConstruction = 100
            i.add(x)
            i.hnsw.efSearch = 64
            faiss.omp_set_num_threads(1)
            return i

        libs.append(("faiss-cpu HNSWFlat", fb, lambda i, q: i.search(q[None], 4)[1][0]))
    except ImportError:
        print("faiss-cpu not installed", file=sys.stderr)
    rows = []
    for name, build, query in libs:
        rss0 = rss_mb()
        bt, index = timed(build)
        mem = rss_mb() - rss0
        lat, hit = [], 0
        for q, t in zip(qs, truth, strict=True):
            dt_, ids = timed(lambda q=q, f=query, i=index: f(i, q))
            lat.append(dt_)
            hit += t in np.asarray(ids).tolist()
        rows.append({
            "library": name, "n": f"{n:,}", "d": str(d), "build s": f"{bt:.1f}",
            "top-4 p50 ms": ms(statistics.median(lat)), "p95 ms": ms(pct(lat, 0.95)),
            "best in top-4": f"{hit / len(qs):.3f}", "RSS MiB": f"{mem:.0f}",
        })  # fmt: skip
        del index
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000,1000000")
    p.add_argument("--dims", default="384,768")
    p.add_argument("--queries", type=int, default=200, help="queries per case up to 100k")
    p.add_argument("--queries-1m", type=int, default=30, help="queries per case above 100k")
    p.add_argument("--naive-max", type=int, default=10_000)
    p.add_argument("--naive-queries", type=int, default=10)
    p.add_argument("--no-ann", dest="ann", action="store_false")
    p.add_argument("--ann-max", type=int, default=1_000_000, help="largest size given an ANN")
    p.add_argument("--ann-k", default="4", help="candidates per graph; a comma list sweeps")
    p.add_argument("--ann-ef", default="128", help="HNSW ef_search; a comma list sweeps")
    p.add_argument("--ann-m", type=int, default=16, help="HNSW M (links per node)")
    p.add_argument("--ann-efc", type=int, default=100, help="HNSW ef_construction")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="ANN build threads")
    p.add_argument("--quick", action="store_true", help="1k and 10k, d=384, 50 queries")
    p.add_argument("--compare-libs", type=int, metavar="N", default=0)
    args = p.parse_args(argv)
    args.ann_k = [int(x) for x in str(args.ann_k).split(",")]
    args.ann_ef = [int(x) for x in str(args.ann_ef).split(",")]
    args.sweep_rows = []
    if args.quick:
        args.sizes, args.dims, args.queries = "1000,10000", "384", 50
    load = os.getloadavg()[0]
    print(f"# retrieval benchmark — {os.cpu_count()} cores, load average {load:.1f}, "
          f"numpy {np.__version__}\n")  # fmt: skip
    if args.compare_libs:
        print_table(compare_libs(args.compare_libs, 384, args.queries, args.threads))
        return
    args.naive_per_node = 0.0
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        args.naive_per_node = 0.0
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(run_case(n, d, args))
            print(f"<!-- done n={n} d={d} -->", file=sys.stderr, flush=True)
    print_table(rows)
    if args.sweep_rows:
        print("\nANN settings on the same graphs (k candidates per graph, ef_search):\n")
        print_table(args.sweep_rows)


if __name__ == "__main__":
    main()
