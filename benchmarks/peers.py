"""Recall and learn latency of deltamem and its peers on the same vectors, in one process.

Per size n (``--sizes``), n random unit vectors of width ``--dim`` are drawn once and
given to every system; then each system in turn is filled with them, answers
``--queries`` top-1 queries (half small perturbations of a stored vector, half fresh
draws) and learns ``--learns`` new vectors. Embedding and LLM time are excluded
everywhere: every system is handed the precomputed vectors (an embedder that looks the
text up in a table), and where a learn path calls an LLM it gets an instant scripted
answer. The table gives per system and size the recall and learn p50 in ms, each as a
ratio to the numpy floor of the same size, and the share of queries whose top-1 is the
floor's (a check that each system searched what it was given).

Rows (what exactly is measured):

* ``numpy M @ q`` and ``numpy 1-thread``: the floor, ``M @ q`` + ``argmax`` on a
  float32 matrix, once with numpy's ``M @ q`` (OpenBLAS spreads it over its thread
  pool) and once with one dot per row on the calling thread (``np.vecdot``); the ratios
  divide by the faster of the two (on busy cores the thread pool can cost more than the
  product). Learn writes one row into a preallocated matrix. No system can scan faster.
* ``deltamem recall/learn``: the library's own path, :meth:`deltamem.DeltaMem.recall`
  and :meth:`~deltamem.DeltaMem.learn`, on a SQLite bank file whose Task-Tree holds the
  n vectors as roots (the Env-Tree off, so one tree of n nodes is scanned, as each
  peer scans one collection): query text → table embedder → Eq. 6 scan → chain
  rendering; learn = write decision (a cold start: a new root), structural extraction
  (no LLM), one SQLite transaction with the default durability (an fsync per learn),
  tree update. The learn is handed the recall the agent acted on.
* ``deltamem tree scan``: the bare :meth:`deltamem.core.tree.ResidualTree.match`
  (Eq. 6 on the tree's matrix, tie rule) and ``ResidualTree.add``; no storage.
* ``faiss flat``: ``faiss.IndexFlatIP`` (``faiss-cpu``), ``search(q, 1)`` and
  ``add``.
* ``mem0 · faiss`` and ``mem0 · qdrant (in-memory)``: mem0's vector-store layer
  (``mem0.vector_stores.faiss.FAISS`` with cosine distance and a folder in the
  temporary directory; ``mem0.vector_stores.qdrant.Qdrant`` on a local
  ``QdrantClient(":memory:")``), driven through those classes' own ``insert`` and
  ``search`` with the payload mem0's ``Memory`` writes (text, hash, timestamps,
  user id) and the ``user_id`` filter its searches always carry, top-1. Why this layer:
  ``Memory.add`` calls an LLM to extract facts and decide ADD/UPDATE, and
  ``Memory.search`` adds query lemmatisation, entity boosts and BM25 (the latter needs
  a model downloaded at run time); every memory mem0 stores or finds goes through this
  vector-store layer, so it is the part comparable with a tree scan. (``Memory.search``
  asks the store for at least 60 candidates; here the store is asked for 1, which
  favours mem0.) mem0's FAISS store writes its whole index and JSON docstore to disk
  at every ``insert``: that is its learn cost.
* ``reasoning-bank retrieve/ingest``: ``ReasoningBank.retrieve(task, k=1)`` (embed →
  ``SQLiteVecStore.search`` → confidence ranking → use counts written back) and
  ``ReasoningBank.ingest_trajectory(..., outcome="success")`` with an instant LLM that
  returns one memory item (distillation prompt, parse, embed, merge decision: a
  3-neighbour search, then insert), on its default store ``SQLiteVecStore``
  (``sqlite-vec``: a brute-force ``vec_distance_cosine`` scan in SQL). Its in-memory
  store is a pure-Python loop (seconds per query at 100k) and is not measured.
* ``reasoning-bank store``: the bare ``SQLiteVecStore.search(q, k=1)`` and ``add``.

A peer that is not installed prints a "skipped: not installed" row; the peers are the
``deltamem[peers]`` extra (``pip install 'deltamem[peers]'``: faiss-cpu, mem0ai,
qdrant-client, reasoning-bank). Installing it adds packages without changing any of
deltamem's own dependencies; reasoning-bank requires sentence-transformers and so
torch: install the CPU build of torch first (as ``scripts/setup.sh all`` does) or pip
fetches the CUDA one. mem0's telemetry is switched off (``MEM0_TELEMETRY=False``)
before it is imported.

Building a 100k store takes from seconds (numpy, faiss) to minutes (sqlite-vec,
qdrant's local mode insert point by point through their own ``add`` / ``upsert`` in
batches); stores are filled with their own bulk calls where they have one and, for
reasoning-bank, with SQLite's ``synchronous=OFF`` during the fill only (each row then
opens a copy of the filled file with the store's defaults, so the second
reasoning-bank row's build time is the copy).

    python benchmarks/peers.py                                  # 1k, 10k, 100k, d 384
    python benchmarks/peers.py --sizes 1000,10000 --queries 50 --learns 10
    python benchmarks/peers.py --systems "deltamem recall/learn,faiss flat"   # + the floors
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")  # before anything imports mem0

import numpy as np
from overhead import tag, unit  # the sibling script (this folder is on sys.path)

from deltamem import DeltaMem, DeltaMemConfig, Episode, Step, Task
from deltamem.core.payload import Payload
from deltamem.core.tree import Node, ResidualTree
from deltamem.embed.base import normalize_rows

PEERS_EXTRA = "pip install 'deltamem[peers]'"


# -- data ------------------------------------------------------------------------------------


@dataclass
class Data:
    """The vectors every system gets: ``stored`` (n rows), ``queries``, ``new`` (to learn)."""

    stored: np.ndarray
    queries: np.ndarray
    new: np.ndarray

    @property
    def n(self) -> int:
        return len(self.stored)


def make_data(n: int, dim: int, n_queries: int, n_learns: int, seed: int = 0) -> Data:
    rng = np.random.default_rng(seed)
    stored = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 65536):  # in chunks: no float64 copy of the whole matrix
        hi = min(n, lo + 65536)
        stored[lo:hi] = unit(rng.standard_normal((hi - lo, dim), dtype=np.float32))
    queries = unit(rng.standard_normal((n_queries, dim), dtype=np.float32))
    near = rng.integers(0, n, n_queries)
    half = np.arange(n_queries) % 2 == 0  # half: a stored vector, slightly perturbed
    queries[half] = unit(stored[near[half]] + 0.3 * queries[half] / np.sqrt(dim))
    new = unit(rng.standard_normal((n_learns, dim), dtype=np.float32))
    return Data(stored, queries, new)


# -- the systems -----------------------------------------------------------------------------


class NotInstalled(Exception):
    """A peer's package is missing: its row says so."""


@dataclass
class System:
    """One row's system on one size: ``recall(i)`` answers ``data.queries[i]`` with the row
    index of its top-1, ``learn(j)`` stores ``data.new[j]``. What a call needs besides the
    system's own work (a task object, a text, a list copy of the vector) is made in the
    build, before anything is timed."""

    recall: Callable[[int], int]
    learn: Callable[[int], None]
    close: Callable[[], None] = lambda: None
    note: str = ""


@dataclass
class Spec:
    """A row: its builder, the distributions it needs (versions printed), the modules
    imported before its build is timed, and what a learn makes durable."""

    name: str
    build: Callable[[Data, Path], System]
    packages: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    durable: str = "none (in memory)"


def _require(module: str, package: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise NotInstalled(f"skipped: {package} not installed ({PEERS_EXTRA})") from e


def _floor(data: Data, product: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> System:
    m = np.zeros((data.n + len(data.new), data.stored.shape[1]), dtype=np.float32)
    m[: data.n] = data.stored
    size = [data.n]
    qs, new = data.queries, data.new

    def recall(i: int) -> int:
        return int(np.argmax(product(m[: size[0]], qs[i])))

    def learn(j: int) -> None:
        m[size[0]] = new[j]
        size[0] += 1

    return System(recall, learn)


def numpy_blas(data: Data, tmp: Path) -> System:
    return _floor(data, np.matmul)


def numpy_one_thread(data: Data, tmp: Path) -> System:
    vecdot = getattr(np, "vecdot", None)  # numpy >= 2: one BLAS dot per row, no thread pool
    return _floor(data, vecdot or (lambda m, q: np.einsum("ij,j->i", m, q)))


_PAYLOAD = Payload("when the task is a benchmark query", "1. look it up", "")


def _node(i: int, vec: np.ndarray) -> Node:
    return Node(id=f"n{i}", tree="task", kind="ROOT", label="SUCCESS", parent=None, depth=1,
                trigger=f"stored {tag(i)}", embedding=vec, payload=_PAYLOAD,
                episode_id=f"seed-{i}", created_at=0.0, seq=i + 1)  # fmt: skip


def deltamem_tree(data: Data, tmp: Path) -> System:
    cfg = DeltaMemConfig().resolved()
    tree = ResidualTree("task", data.stored.shape[1], (_node(i, v) for i, v in
                                                       enumerate(data.stored)))
    qs, tau, eps = data.queries, cfg.tau("task"), cfg.epsilon
    nodes = [_node(data.n + j, v) for j, v in enumerate(data.new)]

    def recall(i: int) -> int:
        return int(str(tree.match(qs[i], tau, eps).node_id)[1:])

    def learn(j: int) -> None:
        tree.add(nodes[j])

    return System(recall, learn)


class VectorEmbedder:
    """A deltamem embedder that returns the vector registered for a text (no model).

    ``table`` maps a text to its vector as a (1, d) row, normalised when registered
    (:meth:`register`), so a lookup of one text costs no arithmetic: embedding time is
    excluded here as for every peer (each is handed its vectors ready)."""

    def __init__(self, dim: int) -> None:
        self.name, self.dim = f"peers-{dim}", dim
        self.table: dict[str, np.ndarray] = {}

    def register(self, text: str, vec: np.ndarray) -> None:
        self.table[text] = normalize_rows(np.asarray(vec, dtype=np.float32).reshape(1, -1))

    def embed_queries(self, texts: Any) -> np.ndarray:
        if len(texts) == 1:
            return self.table[texts[0]]
        return np.concatenate([self.table[t] for t in texts])

    embed_passages = embed_queries


def deltamem_library(data: Data, tmp: Path) -> System:
    dim = data.stored.shape[1]
    path = tmp / "deltamem.db"
    emb = VectorEmbedder(dim)
    options = {"domain": "generic", "use_env_tree": False}
    # fill the bank through its store in one transaction, then open it as a user would
    mem = DeltaMem.open(path, embedder=emb, **options)
    with mem.store.transaction():
        for i, v in enumerate(data.stored):
            mem.store.insert_node(_node(i, v))
    mem.close()
    mem = DeltaMem.open(path, embedder=emb, **options)

    def tasks(kind: str, vecs: np.ndarray) -> list[Task]:
        """One task per vector; the embedder maps the text DeltaMem embeds for it (its own
        trigger function, :meth:`DeltaMem.queries`) to the vector."""
        out = []
        for i, v in enumerate(vecs):
            t = Task(id=f"{kind}-{i}", goal=f"find the {tag(i)} {kind} item", domain="generic")
            text = mem.queries(t)["task"]
            assert text not in emb.table, f"two tasks embed the same text {text!r}"
            emb.register(text, v)
            out.append(t)
        return out

    queries, learns = tasks("query", data.queries), tasks("learn", data.new)
    episodes = [Episode(t, (Step("look it up", "Found it.", done=True),), success=True,
                        reward=1.0) for t in learns]  # fmt: skip

    def recall(i: int) -> int:
        node_id = str(mem.recall(queries[i]).details["task"]["node_id"])
        return int(node_id[1:]) if node_id[1:].isdigit() else -1

    def learn(j: int) -> None:
        r = mem.recall(learns[j])  # the recall the agent acted on: not part of the learn
        t0 = time.perf_counter()
        mem.learn(episodes[j], r)
        learn.last = time.perf_counter() - t0  # type: ignore[attr-defined]

    return System(recall, learn, mem.close,
                  note=f"search={mem.config.search}, synchronous={mem.config.synchronous}")


def faiss_flat(data: Data, tmp: Path) -> System:
    faiss = _require("faiss", "faiss-cpu")
    index = faiss.IndexFlatIP(data.stored.shape[1])
    index.add(data.stored)
    qs, new = data.queries, data.new

    def recall(i: int) -> int:
        _, ids = index.search(qs[i : i + 1], 1)
        return int(ids[0, 0])

    def learn(j: int) -> None:
        index.add(new[j : j + 1])

    return System(recall, learn)


def _mem0_payload(i: int) -> dict[str, Any]:
    text = f"the {tag(i)} memory"
    now = datetime.now(UTC).isoformat()
    return {"data": text, "hash": hashlib.md5(text.encode()).hexdigest(), "user_id": "bench",
            "created_at": now, "updated_at": now, "role": "user"}  # fmt: skip


@dataclass
class _Mem0Inputs:
    """What mem0's ``Memory`` hands its vector store, made before timing: vectors as lists
    (its embedders return lists), UUID ids and payloads; ``row`` maps an id to its row."""

    queries: list[list[float]]
    new: list[list[float]]
    new_ids: list[str]
    new_payloads: list[dict[str, Any]]
    stored_ids: list[str]
    row: dict[str, int]

    @classmethod
    def of(cls, data: Data) -> _Mem0Inputs:
        ids = [str(uuid.uuid4()) for _ in range(data.n + len(data.new))]
        return cls(data.queries.tolist(), data.new.tolist(), ids[data.n :],
                   [_mem0_payload(data.n + j) for j in range(len(data.new))], ids[: data.n],
                   {x: i for i, x in enumerate(ids)})  # fmt: skip


def _mem0_system(store: Any, inp: _Mem0Inputs, **kw: Any) -> System:
    user = {"user_id": "bench"}  # Memory.search always filters by the user (or agent, run)

    def recall(i: int) -> int:
        hits = store.search(query="", vectors=inp.queries[i], top_k=1, filters=user)
        return inp.row[str(hits[0].id)] if hits else -1

    def learn(j: int) -> None:
        store.insert(vectors=[inp.new[j]], payloads=[inp.new_payloads[j]], ids=[inp.new_ids[j]])

    return System(recall, learn, **kw)


def mem0_faiss(data: Data, tmp: Path) -> System:
    _require("faiss", "faiss-cpu")
    vs = _require("mem0.vector_stores.faiss", "mem0ai")
    store = vs.FAISS(collection_name="peers", path=str(tmp / "mem0-faiss"),
                     distance_strategy="cosine", embedding_model_dims=data.stored.shape[1])
    inp = _Mem0Inputs.of(data)
    store.insert(vectors=data.stored, payloads=[_mem0_payload(i) for i in range(data.n)],
                 ids=inp.stored_ids)
    return _mem0_system(store, inp, note="writes index + JSON docstore per insert")


def mem0_qdrant(data: Data, tmp: Path) -> System:
    qc = _require("qdrant_client", "qdrant-client")
    vs = _require("mem0.vector_stores.qdrant", "mem0ai")
    store = vs.Qdrant(collection_name="peers", embedding_model_dims=data.stored.shape[1],
                      client=qc.QdrantClient(":memory:"))
    inp = _Mem0Inputs.of(data)
    for lo in range(0, data.n, 2000):
        hi = min(data.n, lo + 2000)
        store.insert(vectors=data.stored[lo:hi].tolist(), ids=inp.stored_ids[lo:hi],
                     payloads=[_mem0_payload(i) for i in range(lo, hi)])
    return _mem0_system(store, inp, close=store.client.close)


class _ListEmbedder:
    """reasoning-bank's embedder protocol over a text → vector table."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self.table: dict[str, list[float]] = {}

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]


def _rb_item(rb: Any, i: int, vec: np.ndarray) -> Any:
    return rb.MemoryItem(id=f"mem_{i}", title=f"lesson {tag(i)}", description="a benchmark item",
                         content="1. look it up", source="success", task_signature=f"task {i}",
                         embedding=vec.tolist())  # fmt: skip


def _extension_sqlite() -> tuple[Any, str]:
    """An ``sqlite3`` module that can load extensions (sqlite-vec needs it), and a note.

    Python builds without ``--enable-loadable-sqlite-extensions`` (pyenv's default, for
    one) have no ``Connection.enable_load_extension``; reasoning-bank's
    ``SQLiteVecStore`` then fails at its first line. ``pysqlite3-binary`` (in the
    extra) is the same DB-API module over its own SQLite build with extensions on.
    """
    import sqlite3

    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        return sqlite3, ""
    try:
        import pysqlite3.dbapi2 as pysqlite  # type: ignore[import-not-found]
    except ImportError as e:
        raise NotInstalled(
            "skipped: this Python's sqlite3 cannot load extensions (sqlite-vec) and "
            f"pysqlite3-binary is not installed ({PEERS_EXTRA})"
        ) from e
    return pysqlite, (f"SQLite {pysqlite.sqlite_version} of pysqlite3 (this Python's sqlite3 "
                      "cannot load extensions)")


def _rb_store(data: Data, tmp: Path) -> tuple[Any, Any, str]:
    rb = _require("reasoning_bank", "reasoning-bank")
    try:
        import reasoning_bank.stores.sqlite_vec as rb_sqlite
        import sqlite_vec  # noqa: F401
    except ImportError as e:
        raise NotInstalled(f"skipped: sqlite-vec not installed ({PEERS_EXTRA})") from e
    module, note = _extension_sqlite()
    rb_sqlite.sqlite3 = module  # the store's own code, on an SQLite that loads sqlite-vec
    dim = data.stored.shape[1]
    key = (id(data), data.n, dim)
    if key not in _RB_FILLED:  # filled once per data set; each row gets a copy of the file
        for old in _RB_FILLED.values():  # one data set at a time
            shutil.rmtree(old.parent, ignore_errors=True)
        _RB_FILLED.clear()
        folder = Path(tempfile.mkdtemp(prefix="peers-rb-"))
        store = rb_sqlite.SQLiteVecStore(folder / "reasoning-bank.db", dim=dim)
        conn = store._conn  # the fill only: no fsync per add (the store's default after)
        conn.execute("PRAGMA synchronous=OFF")
        for i, v in enumerate(data.stored):
            store.add(_rb_item(rb, i, v))
        store.close()
        _RB_FILLED[key] = folder / "reasoning-bank.db"
    shutil.copy(_RB_FILLED[key], tmp / "reasoning-bank.db")
    return rb, rb_sqlite.SQLiteVecStore(tmp / "reasoning-bank.db", dim=dim), note


_RB_FILLED: dict[tuple[int, int, int], Path] = {}
"""The filled reasoning-bank store of the current data set (both of its rows copy it)."""


def reasoning_bank_store(data: Data, tmp: Path) -> System:
    rb, store, note = _rb_store(data, tmp)
    queries = data.queries.tolist()
    items = [_rb_item(rb, data.n + j, v) for j, v in enumerate(data.new)]

    def recall(i: int) -> int:
        hits = store.search(queries[i], k=1)
        return int(hits[0][0].id[4:]) if hits else -1

    def learn(j: int) -> None:
        store.add(items[j])

    return System(recall, learn, close=store.close, note=note)


def reasoning_bank_full(data: Data, tmp: Path) -> System:
    rb, store, note = _rb_store(data, tmp)
    embedder = _ListEmbedder(data.stored.shape[1])
    current = [0]  # the learn in progress: the instant LLM distils its item

    def lesson(j: int) -> dict[str, str]:
        return {"title": f"lesson {tag(data.n + j)}", "description": "a benchmark item",
                "content": "1. look it up"}

    answers = [json.dumps([lesson(j)]) for j in range(len(data.new))]
    for j, v in enumerate(data.new):  # the text ReasoningBank embeds: MemoryItem.signature_text
        embedder.table["\n".join(lesson(j).values())] = v.tolist()
    texts = [f"query {tag(i)}" for i in range(len(data.queries))]
    for text, q in zip(texts, data.queries.tolist(), strict=True):
        embedder.table[text] = q
    trajectories = [[{"role": "user", "content": f"task {j}"},
                     {"role": "assistant", "content": "done"}] for j in range(len(data.new))]

    async def instant_llm(prompt: str, *, system: str | None = None) -> str:
        return answers[current[0]]

    bank = rb.ReasoningBank(llm=instant_llm, store=store, embedder=embedder)
    loop = asyncio.new_event_loop()

    def recall(i: int) -> int:
        found = loop.run_until_complete(bank.retrieve(texts[i], k=1))
        return int(found[0].id[4:]) if found and found[0].id[4:].isdigit() else -1

    def learn(j: int) -> None:
        current[0] = j
        loop.run_until_complete(bank.ingest_trajectory(trajectories[j], f"task {j}",
                                                       outcome="success"))

    def close() -> None:
        loop.close()
        store.close()

    return System(recall, learn, close, note=note)


_RB = ("reasoning-bank", "sqlite-vec", "pysqlite3-binary")
_RB_MODULES = ("reasoning_bank", "sqlite_vec")
FLOORS = ("numpy M @ q", "numpy 1-thread")
SPECS = [
    Spec(FLOORS[0], numpy_blas),
    Spec(FLOORS[1], numpy_one_thread),
    Spec("deltamem recall/learn", deltamem_library, durable="SQLite, fsync per learn"),
    Spec("deltamem tree scan", deltamem_tree),
    Spec("faiss flat", faiss_flat, ("faiss-cpu",), ("faiss",)),
    Spec("mem0 · faiss", mem0_faiss, ("mem0ai", "faiss-cpu"),
         ("faiss", "mem0.vector_stores.faiss"), durable="files rewritten, no fsync"),
    Spec("mem0 · qdrant (in-memory)", mem0_qdrant, ("mem0ai", "qdrant-client"),
         ("qdrant_client", "mem0.vector_stores.qdrant")),
    Spec("reasoning-bank retrieve/ingest", reasoning_bank_full, _RB, _RB_MODULES,
         durable="SQLite, fsync per write"),
    Spec("reasoning-bank store", reasoning_bank_store, _RB, _RB_MODULES,
         durable="SQLite, fsync per write"),
]


# -- measuring -------------------------------------------------------------------------------


def _timed(fn: Callable[[int], Any], count: int, budget: float,
           self_timed: bool = False) -> tuple[list[float], list[Any]]:
    """Call ``fn(0)``, ``fn(1)``, ... up to ``count``; stop after ``budget`` seconds (at
    least 5 calls). ``self_timed``: ``fn`` leaves its own time in ``fn.last``."""
    times: list[float] = []
    outs: list[Any] = []
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        outs.append(fn(i))
        dt = time.perf_counter() - t0
        times.append(getattr(fn, "last", dt) if self_timed else dt)
        if len(times) >= 5 and time.perf_counter() - start > budget:
            break
    return times, outs


def measure(spec: Spec, data: Data, floor_top: list[int], budget: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        try:
            for module in spec.modules:  # imported before the build is timed
                _require(module, spec.packages[0])
            t0 = time.perf_counter()
            system = spec.build(data, Path(tmp))
        except NotInstalled as e:
            return {"skipped": str(e)}
        build_s = time.perf_counter() - t0
        try:
            system.recall(0)  # warm-up, not timed
            rec, tops = _timed(system.recall, len(data.queries), budget)
            # a learn that must first recall (deltamem) times its own learn call
            learn, _ = _timed(system.learn, len(data.new), budget, self_timed=True)
        finally:
            system.close()
    same = sum(a == b for a, b in zip(tops, floor_top, strict=False)) if floor_top else len(tops)
    return {"recall": statistics.median(rec), "learn": statistics.median(learn),
            "tops": tops, "same": same / len(tops), "build": build_s, "note": system.note,
            "calls": f"{len(rec)} / {len(learn)}"}


def version(packages: tuple[str, ...]) -> str:
    out = []
    for p in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out.append(f"{p} {importlib.metadata.version(p)}")
    return ", ".join(out)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def ms(x: float) -> str:
    x *= 1e3
    return f"{x:.4f}" if x < 0.01 else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="stored vectors, comma list")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--queries", type=int, default=100, help="timed recalls per system and size")
    p.add_argument("--learns", type=int, default=20, help="timed learns per system and size")
    p.add_argument("--budget", type=float, default=30.0,
                   help="seconds per system, size and operation: a slower row stops early "
                        "(at least 5 calls; the row shows how many ran)")
    p.add_argument("--systems", default="",
                   help="comma list of row names (default: all; the floors always run)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    wanted = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = set(wanted) - {s.name for s in SPECS}
    if unknown:
        p.error(f"unknown system(s) {sorted(unknown)}; known: {[s.name for s in SPECS]}")
    specs = [s for s in SPECS if not wanted or s.name in wanted or s.name in FLOORS]
    print(f"# peers benchmark — {os.cpu_count()} cores, python {sys.version.split()[0]}, "
          f"numpy {np.__version__}, d {a.dim}, up to {a.queries} recalls (top-1) and "
          f"{a.learns} learns per row, {a.budget:g} s budget each")
    print(f"machine before: {uptime()}")
    peers = sorted({p for s in specs for p in s.packages})
    print(f"peers: {version(tuple(peers)) or 'none installed'}")
    print("floor: the faster p50 of the two numpy rows (M @ q on BLAS threads, or one dot "
          "per row on this thread) + argmax; learn floor: one row written into a "
          "preallocated matrix\n", flush=True)
    cols = ["system", "n", "recall p50 ms", "recall ÷ floor", "learn p50 ms", "learn ÷ floor",
            "top-1 = floor", "recalls / learns", "build s", "durability", "note"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|", flush=True)
    for n in (int(x) for x in a.sizes.split(",")):
        data = make_data(n, a.dim, a.queries, a.learns, a.seed)
        results: list[tuple[Spec, dict[str, Any]]] = []
        tops: list[int] = []
        for spec in specs:
            r = measure(spec, data, tops, a.budget)
            tops = tops or r["tops"]
            results.append((spec, r))
            gc.collect()
            print(f"<!-- done n={n} {spec.name} -->", file=sys.stderr, flush=True)
        floors = [r for spec, r in results if spec.name in FLOORS]
        f_rec = min(r["recall"] for r in floors)
        f_learn = min(r["learn"] for r in floors)
        for spec, r in results:
            if "skipped" in r:
                print(f"| {spec.name} | {n:,} | {r['skipped']} |" + " |" * (len(cols) - 3))
                continue
            print(f"| {spec.name} | {n:,} | {ms(r['recall'])} | {r['recall'] / f_rec:.2f} "
                  f"| {ms(r['learn'])} | {r['learn'] / f_learn:.0f} | {r['same']:.2f} "
                  f"| {r['calls']} | {r['build']:.1f} | {spec.durable} | {r['note']} |")
        sys.stdout.flush()
        del data, results
        gc.collect()
    for old in _RB_FILLED.values():
        shutil.rmtree(old.parent, ignore_errors=True)
    print(f"\nmachine after: {uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
