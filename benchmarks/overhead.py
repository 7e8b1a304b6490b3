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
are new (cold start: a root); the table counts the warm episodes (both trees
accepted) and the nodes written, so a run that did not do what it says shows.
The embedder's table is keyed by the texts DeltaMem embeds in the chosen
trigger modes (``--task-trigger`` / ``--env-trigger``, default: the domain's;
see :mod:`deltamem.core.triggers`), built with DeltaMem's own trigger function;
every episode's goal and scene keep a word of their own in every mode.

Besides the per-episode p50/p95, the table gives the CPU time the process used
per episode (all its threads; unlike wall time it leaves out waiting for the
disk and for a busy core, so on a loaded machine it is the steadier figure)
and splits out two fixed costs measured on the same bank: the commit of a
one-row transaction (the fsync under ``full``) and the refresh of hit counts
and consolidation flags of all nodes (what a reload does after another process
wrote; after its own learn a process re-reads only the nodes that learn
touched).

    python benchmarks/overhead.py            # 100, 10k, 100k nodes, 200 episodes each
    python benchmarks/overhead.py --quick    # 100 and 10k nodes, 50 episodes (~1 minute)
    python benchmarks/overhead.py --sizes 10000 --extractors llm --synchronous full
    python benchmarks/overhead.py --sizes 100 --episodes 8 --task-trigger goal --env-trigger scene
    python benchmarks/overhead.py --quick --single-thread-max 0   # every Eq. 6 product via
                                        # multi-threaded BLAS (the kernel before issue 5)

``--single-thread-max`` sets :data:`deltamem.core.tree.SINGLE_THREAD_MAX`, the
largest tree matrix scored on the calling thread (see :mod:`deltamem.core.tree`,
Threads); the table's ``1-thread max`` column shows the value used.

Growth (``--growth``): does a bank stay fast as it grows? Per size (``--sizes``) the
bank is built as above in this process, then opened by a fresh process, as a user
would, which runs the ``--episodes`` recall + learn cycles and reports: the learn rate
(learns per second of ``learn`` time, each learn handed the recall the episode acted on),
recall p50, the open time, and the process's resident memory over the bank's embedding
matrix (n × d float32): ``RSS ÷ matrix`` is the growth of the resident set from before
the open to after the episodes, ``peak ÷ matrix`` the growth of its high-water mark
(``VmHWM``), so what an open builds and throws away counts too. A flat learn rate and a
ratio near 1 are the goal. ``cycles/s`` counts whole recall + learn cycles (what building a
bank from a stream costs); ``--search exact,ann`` measures the exact scan and the HNSW
index (``deltamem[ann]``; its graph is built at the first recall, which ``cycles/s`` leaves out).

    python benchmarks/overhead.py --growth --sizes 1000,10000,100000 --synchronous normal
    python benchmarks/overhead.py --growth --synchronous normal --search exact,ann
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import deltamem.core.tree as tree_module
from deltamem import DeltaMem, DeltaMemConfig
from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.core.triggers import ENV_TRIGGERS, TASK_TRIGGERS, tree_texts
from deltamem.extract.llm import LLMExtractor
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import ScriptedLLM, TableEmbedder, make_episode
from deltamem.types import new_id

DIM = 384
DOMAIN = "alfworld"


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def build_bank(path: Path, n: int, rng: np.random.Generator,
               config: DeltaMemConfig) -> dict[str, list[Node]]:
    """Insert ``n`` nodes into a new bank at ``path`` in one transaction; returns them by tree.
    The bank records ``config`` (resolved: its trigger modes are the ones the episodes'
    texts are embedded in) as DeltaMem would."""
    centres = unit(rng.standard_normal((max(1, n // 40), DIM), dtype=np.float32))
    emb = unit(
        centres[rng.integers(0, len(centres), n)]
        + rng.standard_normal((n, DIM), dtype=np.float32) * np.float32(0.6 / np.sqrt(DIM))
    )
    store = SQLiteStore(path)
    per_open = ("synchronous", "max_recall_tokens")  # never stored with a bank
    store.init_meta(f"table-{DIM}", DIM,
                    {k: v for k, v in config.model_dump().items() if k not in per_open})
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


def tag(i: int) -> str:
    """A letters-only word unique to ``i`` ("qa", "qb", ..., "qba", ...): it survives every
    trigger reduction (numbers are dropped by all of them, entity words by ``abstract``)."""
    out = ""
    while True:
        i, r = divmod(i, 26)
        out = chr(ord("a") + r) + out
        if i == 0:
            return "q" + out


def episodes_and_table(
    nodes: dict[str, list[Node]], count: int, rng: np.random.Generator, config: DeltaMemConfig
) -> tuple[list, dict[str, np.ndarray]]:
    """``count`` episodes (half warm, half cold) and the embedding of every text they use.

    The table is keyed by the texts DeltaMem embeds for each task in ``config``'s trigger
    modes (:func:`deltamem.core.triggers.tree_texts`, what :meth:`DeltaMem.queries`
    returns), so the benchmark runs in any mode. The goals and scenes carry a word of
    their own that every mode keeps, so no two episodes share a text (a shared text
    would get one vector and turn cold starts warm).
    """
    table: dict[str, np.ndarray] = {}
    eps = []
    assert config.task_trigger and config.env_trigger, "pass a resolved config"
    for i in range(count):
        w = tag(i)
        goal = f"put a {w} cup in drawer {i % 5 + 1}"
        scene = (f"You are in the middle of room {w}. Looking quickly around you, you see "
                 f"a {w} shelf 1, a cabinet {i % 3 + 1} and a drawer 1.")
        steps = 3 + i % 4
        actions = [(f"go to place {j} of {i}", f"You arrive at place {j}.") for j in range(steps)]
        ep = make_episode(goal, scene=scene, actions=actions, success=True,
                          episode_id=f"bench-ep-{i}", task_id=f"bench-task-{i}")
        texts = tree_texts(ep.task, config.task_trigger, config.env_trigger)
        if texts["task"] in table or texts["env"] in table:
            raise RuntimeError(f"episode {i}: trigger text shared with an earlier episode: "
                               f"{texts}")
        if i % 2 == 0 and nodes["task"] and nodes["env"]:
            # warm: repeat stored triggers (SUCCESS nodes, so the match is accepted)
            ok_task = [nd for nd in nodes["task"] if nd.label == "SUCCESS"]
            ok_env = [nd for nd in nodes["env"] if nd.label == "SUCCESS"]
            table[texts["task"]] = ok_task[int(rng.integers(0, len(ok_task)))].embedding
            table[texts["env"]] = ok_env[int(rng.integers(0, len(ok_env)))].embedding
        else:
            table[texts["task"]] = unit(rng.standard_normal(DIM, dtype=np.float32))
            table[texts["env"]] = unit(rng.standard_normal(DIM, dtype=np.float32))
        eps.append(ep)
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
    n: int,
    extractor_name: str,
    episodes: int,
    seed: int,
    synchronous: str = "full",
    task_trigger: str | None = None,
    env_trigger: str | None = None,
) -> dict[str, str]:
    """One row: a bank of ``n`` nodes, ``episodes`` recall + learn cycles on it.

    ``task_trigger`` / ``env_trigger``: the trigger modes (``None``: DeltaMem's default
    for the domain and this embedder, :meth:`DeltaMemConfig.resolved`)."""
    rng = np.random.default_rng(seed)
    config = DeltaMemConfig(
        domain=DOMAIN, task_trigger=task_trigger, env_trigger=env_trigger  # type: ignore[arg-type]
    ).resolved(f"table-{DIM}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bank.db"
        t0 = time.perf_counter()
        nodes = build_bank(path, n, rng, config)
        build_s = time.perf_counter() - t0
        eps, table = episodes_and_table(nodes, episodes, rng, config)
        embedder = TableEmbedder(table)
        assert embedder.name == f"table-{DIM}"
        extractor = LLMExtractor(_instant_llm()) if extractor_name == "llm" else None
        t0 = time.perf_counter()
        mem = DeltaMem.open(
            path,
            embedder=embedder,
            extractor=extractor,
            domain=DOMAIN,
            synchronous=synchronous,
            task_trigger=config.task_trigger,
            env_trigger=config.env_trigger,
        )
        open_s = time.perf_counter() - t0
        rec_t, learn_t, tot_t, cpu_t = [], [], [], []
        warm = written = 0
        for ep in eps:
            c0 = time.process_time()
            t0 = time.perf_counter()
            r = mem.recall(ep.task)
            t1 = time.perf_counter()
            changes = mem.learn(ep, r)
            t2 = time.perf_counter()
            warm += all(r.details[t]["accepted"] for t in ("task", "env"))
            written += sum(c.kind == "written" for c in changes)
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
        "triggers": f"{config.task_trigger}, {config.env_trigger}",
        "1-thread max": f"{tree_module.SINGLE_THREAD_MAX:,.0f}",
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
        "warm episodes": str(warm),
        "nodes written": str(written),
    }


def memory_mib() -> tuple[float, float]:
    """(resident set, its high-water mark) of this process in MiB (Linux /proc)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


def growth_row(n: int, episodes: int, seed: int, synchronous: str,
               search: str = "exact") -> dict[str, str]:
    """One row of the growth table: build the bank here, measure it in a fresh process."""
    rng = np.random.default_rng(seed)
    config = DeltaMemConfig(domain=DOMAIN).resolved(f"table-{DIM}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bank.db"
        nodes = build_bank(path, n, rng, config)
        eps, table = episodes_and_table(nodes, episodes, rng, config)
        del nodes
        job = Path(tmp) / "episodes.pickle"
        job.write_bytes(pickle.dumps((eps, table)))
        p = subprocess.run(
            [sys.executable, __file__, "--growth-child", str(path), str(job), synchronous,
             str(tree_module.SINGLE_THREAD_MAX), search],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if p.returncode:
            raise RuntimeError(f"growth child for n={n} failed:\n{p.stderr[-3000:]}")
        got = json.loads(p.stdout.strip().splitlines()[-1])
    matrix_mib = got["nodes"] * DIM * 4 / 2**20
    return {
        "nodes": f"{n:,}",
        "synchronous": synchronous,
        "search": search,
        "learns/s": f"{got['learns'] / got['learn_s']:.0f}",
        "cycles/s": f"{got['learns'] / (got['learn_s'] + got['recall_s']):.0f}",
        "learn p50 ms": f"{got['learn_p50'] * 1e3:.2f}",
        "recall p50 ms": f"{got['recall_p50'] * 1e3:.2f}",
        "open s": f"{got['open_s']:.2f}",
        "matrix MiB": f"{matrix_mib:.1f}",
        "RSS ÷ matrix": f"{got['rss_mib'] / matrix_mib:.2f}",
        "peak ÷ matrix": f"{got['peak_mib'] / matrix_mib:.2f}",
        "warm episodes": str(got["warm"]),
        "nodes written": str(got["written"]),
    }


def growth_child(path: str, job: str, synchronous: str, single_thread_max: float,
                 search: str = "exact") -> None:
    """The measuring process of :func:`growth_row`: prints one JSON line."""
    tree_module.SINGLE_THREAD_MAX = single_thread_max
    eps, table = pickle.loads(Path(job).read_bytes())
    embedder = TableEmbedder(table)
    # the first recall + learn imports what the library loads lazily: not the bank's cost
    warmup = DeltaMem.open(":memory:", embedder=embedder, domain=DOMAIN)
    warmup.learn(eps[0], warmup.recall(eps[0].task))
    warmup.close()
    rss0, hwm0 = memory_mib()
    t0 = time.perf_counter()
    mem = DeltaMem.open(path, embedder=embedder, domain=DOMAIN, synchronous=synchronous,
                        search=search)
    open_s = time.perf_counter() - t0
    rec_t, learn_t = [], []
    warm = written = 0
    for ep in eps:
        t0 = time.perf_counter()
        r = mem.recall(ep.task)
        t1 = time.perf_counter()
        changes = mem.learn(ep, r)
        learn_t.append(time.perf_counter() - t1)
        rec_t.append(t1 - t0)
        warm += all(r.details[t]["accepted"] for t in ("task", "env"))
        written += sum(c.kind == "written" for c in changes)
    rss1, hwm1 = memory_mib()
    nodes = sum(mem.stats()["nodes"].values())
    mem.close()
    print(json.dumps({
        "nodes": nodes, "learns": len(learn_t), "learn_s": sum(learn_t),
        "learn_p50": statistics.median(learn_t), "recall_p50": statistics.median(rec_t),
        "recall_s": sum(rec_t[1:]) * len(rec_t) / max(1, len(rec_t) - 1),
        "open_s": open_s, "rss_mib": rss1 - rss0, "peak_mib": hwm1 - hwm0,
        "warm": warm, "written": written,
    }))  # fmt: skip


def print_rows(rows: list[dict[str, str]]) -> None:
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        print("| " + " | ".join(r[c] for c in cols) + " |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,10000,100000")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--extractors", default="structural,llm")
    p.add_argument("--synchronous", default="full,normal", help="durability modes to run")
    p.add_argument(
        "--single-thread-max",
        type=float,
        default=tree_module.SINGLE_THREAD_MAX,
        help="largest matrix (elements) scored on one thread; 0: always BLAS threads "
             "(default: no limit)",
    )
    p.add_argument("--task-trigger", choices=["default", *TASK_TRIGGERS], default="default",
                   help="Task-Tree trigger mode (default: DeltaMem's for the domain)")
    p.add_argument("--env-trigger", choices=["default", *ENV_TRIGGERS], default="default",
                   help="Env-Tree trigger mode (default: DeltaMem's for the domain)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="100 and 10k nodes, 50 episodes")
    p.add_argument("--growth", action="store_true",
                   help="the growth table: learn rate, recall p50 and resident memory over "
                        "the embedding matrix per size (a fresh process per size)")
    p.add_argument("--search", default="exact",
                   help="--growth: comma-separated tree search modes to measure (exact, ann)")
    p.add_argument("--growth-child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.growth_child:
        path, job, sync, stm, search = args.growth_child
        growth_child(path, job, sync, float(stm), search)
        return
    if args.quick:
        args.sizes, args.episodes = "100,10000", 50
    tree_module.SINGLE_THREAD_MAX = args.single_thread_max
    print(f"# overhead benchmark — {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    rows = []
    if args.growth:
        for n in (int(x) for x in args.sizes.split(",")):
            for sync in args.synchronous.split(","):
                for search in args.search.split(","):
                    rows.append(growth_row(n, args.episodes, args.seed, sync, search))
                    print(f"<!-- done n={n} {sync} {search} -->", file=sys.stderr, flush=True)
        print_rows(rows)
        return
    for n in (int(x) for x in args.sizes.split(",")):
        for ex in args.extractors.split(","):
            for sync in args.synchronous.split(","):
                rows.append(measure(
                    n, ex, args.episodes, args.seed, sync,
                    None if args.task_trigger == "default" else args.task_trigger,
                    None if args.env_trigger == "default" else args.env_trigger,
                ))  # fmt: skip
                print(f"<!-- done n={n} {ex} {sync} -->", file=sys.stderr, flush=True)
    print_rows(rows)


if __name__ == "__main__":
    main()
