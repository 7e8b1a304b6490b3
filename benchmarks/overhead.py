"""Per-episode memory overhead of DeltaMem (recall + learn) at 100, 10k and 100k nodes.

LLM and embedding time are excluded: the embedder is a precomputed table
(:class:`deltamem.testing.TableEmbedder`, a dict lookup) and the extractor is
either the structural one (no LLM) or the LLM extractor on an instant
:class:`~deltamem.testing.ScriptedLLM`. What remains is the memory's own
work: Eq. 6 scans of both trees, chain rendering, the write decision,
extraction glue, one SQLite transaction and the incremental update of the
trees.

Durability: each size is run with ``synchronous=full`` (the default: an fsync
of the WAL per learn, survives power loss) and ``synchronous=normal`` (no fsync
per commit: survives a killed process, not a power loss; see
:mod:`deltamem.store.sqlite`), so the table shows what the fsync costs.

Each bank is a file in a temporary folder, filled by inserting n nodes
(half Task-Tree, half Env-Tree; 30 % residuals under a random earlier node,
25 % FAILURE; unit vectors in n/40 clusters, d = 384) directly through the
store in one transaction. Then ``--episodes`` episodes are run: half repeat
the trigger of a stored node (warm start: residual write + success hit), half
are new (cold start: a root). Besides the per-episode p50/p95, the table
gives the CPU time the process used per episode (all its threads; unlike
wall time it leaves out waiting for the disk and for a busy core, so on a
loaded machine it is the steadier figure) and splits out two fixed costs
measured on the same bank: the commit of a one-row transaction (the fsync
under ``full``) and the refresh of hit counts and consolidation flags of all
nodes (what a reload does after another process wrote; after its own learn a
process re-reads only the nodes that learn touched).

    python benchmarks/overhead.py            # 100, 10k, 100k nodes, 200 episodes each
    python benchmarks/overhead.py --quick    # 100 and 10k nodes, 50 episodes (~1 minute)
    python benchmarks/overhead.py --sizes 10000 --extractors llm --synchronous full
    python benchmarks/overhead.py --quick --single-thread-max 0   # every Eq. 6 product via
                                        # multi-threaded BLAS (the kernel before issue 5)

``--single-thread-max`` sets :data:`deltamem.core.tree.SINGLE_THREAD_MAX`, the
largest tree matrix scored on the calling thread (see :mod:`deltamem.core.tree`,
Threads); the table's ``1-thread max`` column shows the value used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import deltamem.core.tree as tree_module
from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.extract.llm import LLMExtractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import ScriptedLLM, TableEmbedder, make_episode
from deltamem.types import new_id

DIM = 384
DOMAIN = "alfworld"


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def build_bank(path: Path, n: int, rng: np.random.Generator) -> dict[str, list[Node]]:
    """Insert ``n`` nodes into a new bank at ``path`` in one transaction; returns them by tree."""
    centres = unit(rng.standard_normal((max(1, n // 40), DIM), dtype=np.float32))
    emb = unit(
        centres[rng.integers(0, len(centres), n)]
        + rng.standard_normal((n, DIM), dtype=np.float32) * np.float32(0.6 / np.sqrt(DIM))
    )
    store = SQLiteStore(path)
    cfg = {"domain": DOMAIN}
    store.init_meta(f"table-{DIM}", DIM, cfg)
    nodes: dict[str, list[Node]] = {"task": [], "env": []}
    payload = Payload("when the goal mentions an object", "1. go to the place\n2. take it", "")
    with store.transaction():
        for i in range(n):
            tree = "task" if i % 2 == 0 else "env"
            same = nodes[tree]
            parent = None
            if same and rng.random() < 0.3:
                cand = same[int(rng.integers(0, len(same)))]
                if cand.depth < 5:
                    parent = cand
            node = Node(
                id=new_id(),
                tree=tree,  # type: ignore[arg-type]
                kind="ROOT" if parent is None else "RESIDUAL",
                label="FAILURE" if rng.random() < 0.25 else "SUCCESS",
                parent=None if parent is None else parent.id,
                depth=1 if parent is None else parent.depth + 1,
                trigger=f"stored trigger {i}",
                embedding=emb[i],
                payload=payload,
                episode_id=f"seed-{i}",
                created_at=time.time(),
            )
            same.append(store.insert_node(node))
    store.close()
    return nodes


def episodes_and_table(
    nodes: dict[str, list[Node]], count: int, rng: np.random.Generator
) -> tuple[list, dict[str, np.ndarray]]:
    """``count`` episodes (half warm, half cold) and the embedding of every text they use."""
    table: dict[str, np.ndarray] = {}
    eps = []
    for i in range(count):
        goal, scene = f"benchmark goal {i}", f"You are in benchmark room {i}."
        if i % 2 == 0 and nodes["task"] and nodes["env"]:
            # warm: repeat stored triggers (SUCCESS nodes, so the match is accepted)
            ok_task = [nd for nd in nodes["task"] if nd.label == "SUCCESS"]
            ok_env = [nd for nd in nodes["env"] if nd.label == "SUCCESS"]
            table[goal] = ok_task[int(rng.integers(0, len(ok_task)))].embedding
            table[scene] = ok_env[int(rng.integers(0, len(ok_env)))].embedding
        else:
            table[goal] = unit(rng.standard_normal(DIM, dtype=np.float32))
            table[scene] = unit(rng.standard_normal(DIM, dtype=np.float32))
        steps = 3 + i % 4
        actions = [(f"go to place {j} of {i}", f"You arrive at place {j}.") for j in range(steps)]
        eps.append(
            make_episode(goal, scene=scene, actions=actions, success=True,
                         episode_id=f"bench-ep-{i}", task_id=f"bench-task-{i}")
        )  # fmt: skip
    return eps, table


def _instant_llm() -> ScriptedLLM:
    def respond(messages, purpose, choices):  # type: ignore[no-untyped-def]
        return {
            "activation_condition": "when the goal mentions an object",
            "execution_procedure": "1. go to the place\n2. take it",
            "termination_condition": "the object is placed",
        }

    return ScriptedLLM(responder=respond)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def measure(
    n: int, extractor_name: str, episodes: int, seed: int, synchronous: str = "full"
) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bank.db"
        t0 = time.perf_counter()
        nodes = build_bank(path, n, rng)
        build_s = time.perf_counter() - t0
        eps, table = episodes_and_table(nodes, episodes, rng)
        embedder = TableEmbedder(table)
        extractor = LLMExtractor(_instant_llm()) if extractor_name == "llm" else None
        t0 = time.perf_counter()
        mem = DeltaMem.open(
            path, embedder=embedder, extractor=extractor, domain=DOMAIN, synchronous=synchronous
        )
        open_s = time.perf_counter() - t0
        rec_t, learn_t, tot_t, cpu_t = [], [], [], []
        for ep in eps:
            c0 = time.process_time()
            t0 = time.perf_counter()
            r = mem.recall(ep.task)
            t1 = time.perf_counter()
            mem.learn(ep, r)
            t2 = time.perf_counter()
            cpu_t.append(time.process_time() - c0)
            rec_t.append(t1 - t0)
            learn_t.append(t2 - t1)
            tot_t.append(t2 - t0)
        store = mem.store
        commit_t, refresh_t = [], []
        for i in range(20):
            t0 = time.perf_counter()
            store.mark_learned(f"probe-{i}")  # one-row transaction: BEGIN IMMEDIATE … COMMIT
            commit_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            store.node_states()
            refresh_t.append(time.perf_counter() - t0)
        mem.close()

    def ms(x: float) -> str:
        return f"{x * 1e3:.2f}"

    return {
        "nodes": f"{n:,}",
        "extractor": extractor_name,
        "synchronous": synchronous,
        "1-thread max": f"{tree_module.SINGLE_THREAD_MAX:,}",
        "episode p50 ms": ms(statistics.median(tot_t)),
        "episode p95 ms": ms(pct(tot_t, 0.95)),
        "episode CPU p50 ms": ms(statistics.median(cpu_t)),
        "recall p50 ms": ms(statistics.median(rec_t)),
        "learn p50 ms": ms(statistics.median(learn_t)),
        "1-row commit p50 ms": ms(statistics.median(commit_t)),
        "state refresh p50 ms": ms(statistics.median(refresh_t)),
        "bank build s": f"{build_s:.1f}",
        "open s": f"{open_s:.2f}",
        "episodes": str(len(eps)),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,10000,100000")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--extractors", default="structural,llm")
    p.add_argument("--synchronous", default="full,normal", help="durability modes to run")
    p.add_argument(
        "--single-thread-max",
        type=int,
        default=tree_module.SINGLE_THREAD_MAX,
        help="largest matrix (elements) scored on one thread; 0: always BLAS threads",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="100 and 10k nodes, 50 episodes")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.episodes = "100,10000", 50
    tree_module.SINGLE_THREAD_MAX = args.single_thread_max
    print(f"# overhead benchmark — {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for ex in args.extractors.split(","):
            for sync in args.synchronous.split(","):
                rows.append(measure(n, ex, args.episodes, args.seed, sync))
                print(f"<!-- done n={n} {ex} {sync} -->", file=sys.stderr, flush=True)
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        print("| " + " | ".join(r[c] for c in cols) + " |")


if __name__ == "__main__":
    main()
