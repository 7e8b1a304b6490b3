"""SIGKILL in the middle of writes: import, prune, learn (with consolidation), the service's learn,
the decocted memories' k-means consolidation.

For each operation × store, the operation runs once uninterrupted (the reference), then
``--kills`` times in a child process that is SIGKILLed after a random delay within the
reference's duration. After each kill the bank must open (DeltaMem's loader), pass the
storage's integrity check and the tree invariants (:func:`invariants`), and be the bank before
the operation or the bank after it, nothing in between (:func:`snapshot`; for learn: some
prefix of the episodes learned); then the operation is run again and the final bank must equal
the reference (node ids and wall-clock times aside: :func:`snapshot`).

Operations:

- ``import``: ``import_bank`` of a framed export into a new bank;
- ``prune``: ``DeltaMem.prune(["unused:8"])`` on a copy of a learned bank;
- ``learn``: learning a stream of episodes of which many repeat (``k_cons=3``: consolidations
  happen along the way); the re-run learns the whole stream again (learned ids are skipped);
- ``service-learn``: ``deltamem serve`` (a process) takes ``POST /learn`` of the same stream;
  the server is SIGKILLed, restarted, and the client sends the whole stream again;
- ``consolidate``: ``consolidate_bank`` (``deltamem decocted consolidate``) of a lessons bank of
  ``--episodes`` × ``--consolidate-scale`` entries into a new bank of ``--consolidate-size``;
  item banks are SQLite files, so this operation runs on ``sqlite`` only. The re-run runs it
  again unless the new bank is there. Each run is a process of its own (scikit-learn's OpenMP
  threads hang a forked child); every other kill is sent while the new bank is written (a
  random moment within the reference's writing time after the child says it has begun).
  "mid" counts kills that found the bank being written (its temporary file there, nothing at
  the new bank's name).

Stores: ``sqlite`` (a file) and ``postgres`` (``--pg-url`` or ``$DELTAMEM_TEST_PG_URL``).

    python benchmarks/kill_loop.py [--kills 30]
        [--ops import,prune,learn,service-learn,consolidate] [--stores sqlite,postgres]
        [--episodes 40] [--consolidate-scale 10] [--consolidate-size 8] [--seed 0]
        [--out kill-table.json]

Prints one Markdown row per operation × store; exits 1 when any bank failed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deltamem.embed import HashingEmbedder
from deltamem.memories.deltamem import DeltaMem
from deltamem.portable import import_bank
from deltamem.store.factory import open_store
from deltamem.testing import make_episode
from deltamem.types import Episode

DIM = 64
K_CONS = 3
PRUNE = ["unused:8"]
HEADER = ("| operation | store | kills | bank failed invariants | between before and after "
          "| killed before / mid / after | re-run equal to uninterrupted | op s |")

_STEPS = (
    ("go to countertop 1", "On the countertop 1, you see a apple 1, and a knife 1."),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
    ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open."),
    ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
)
_OBJ = ("apple", "egg", "mug", "tomato", "bread", "knife")


def episode(i: int) -> Episode:
    """Episode ``k{i}``: a pure function of ``i``; goals repeat so chains consolidate."""
    rng = random.Random(i)
    obj = _OBJ[i % len(_OBJ)]
    n = 3 + (i // len(_OBJ)) % 4
    acts = tuple((a.replace("apple", obj), o.replace("apple", obj)) for a, o in _STEPS[:n])
    return make_episode(f"put a clean {obj} in fridge", actions=acts,
                        success=rng.random() < 0.8, task_id=f"t{i % 6}", episode_id=f"k{i}")


def open_mem(loc: str, **kw: Any) -> DeltaMem:
    return DeltaMem.open(loc, embedder=HashingEmbedder(dim=DIM), domain="alfworld",
                         k_cons=K_CONS, **kw)


# -- what a bank is ---------------------------------------------------------------------------
def records(loc: str) -> list[dict[str, Any]]:
    store = open_store(loc, readonly=True)
    try:
        return list(store.iter_export())
    finally:
        store.close()


def snapshot(loc: str) -> str:
    """SHA-256 of the bank's records with node ids replaced by (tree, episode, origin, kind,
    label) keys, ``seq`` by its rank and wall-clock times left out: equal for two runs of the
    same operations. (On PostgreSQL a killed transaction still uses up the sequence numbers
    it drew, so ``seq`` may have gaps; the order is what the bank relies on.)"""
    recs = records(loc)
    nodes = [r for r in recs if r["type"] == "node"]
    rank = {q: i for i, q in enumerate(sorted(n["seq"] for n in nodes))}
    key = {n["id"]: [n["tree"], n["episode_id"], n["origin"], n["kind"], n["label"],
                     n["depth"]] for n in nodes}
    out: list[Any] = []
    for r in recs:
        r = dict(r)
        for t in ("created_at", "learned_at"):
            r.pop(t, None)
        if r["type"] == "node":
            r["seq"] = rank[r["seq"]]
        for f in ("id", "parent_id", "source_id", "node_id"):
            if f in r:
                r[f] = key.get(r[f], r[f] if r["type"] == "audit" else None)
        if r["type"] == "audit" and isinstance(r.get("record"), dict):
            r["record"] = {k: v for k, v in r["record"].items()
                           if k not in ("id", "parent_id", "source_id", "created_at")}
        out.append(r)
    body = sorted(json.dumps(r, sort_keys=True) for r in out if r["type"] != "learned")
    ledger = [r["episode_id"] for r in out if r["type"] == "learned"]
    return hashlib.sha256(json.dumps([body, ledger]).encode()).hexdigest()


def invariants(loc: str, *, pruned: bool = False) -> list[str]:
    """What is wrong with the bank (empty: nothing): it opens with DeltaMem's loader, the
    storage's integrity check passes, residuals hang under an earlier node of their tree one
    level deeper, roots are at depth 1, every consolidated node is the source of exactly one
    consolidated ROOT (and every such root's source is flagged), every node's episode is in
    the learned ledger. ``pruned``: a bank a forgetting policy removed nodes from (a
    consolidated node may have lost its distilled root, a distilled root its source)."""
    bad: list[str] = []
    try:
        mem = open_mem(loc, readonly=True)
        try:
            mem.stats()
            if not mem.store.integrity_ok():
                bad.append("integrity check fails")
        finally:
            mem.close()
    except Exception as e:
        return [f"does not open: {type(e).__name__}: {e}"]
    recs = records(loc)
    nodes = {r["id"]: r for r in recs if r["type"] == "node"}
    learned = {r["episode_id"] for r in recs if r["type"] == "learned"}
    for n in nodes.values():
        if n["kind"] == "ROOT" and n["depth"] != 1:
            bad.append(f"root {n['id']} at depth {n['depth']}")
        if n["kind"] == "RESIDUAL":
            p = nodes.get(n["parent_id"])
            if p is None or p["tree"] != n["tree"] or n["depth"] != p["depth"] + 1:
                bad.append(f"orphan or mis-deep residual {n['id']}")
        roots = [r for r in nodes.values() if r["origin"] == "consolidated"
                 and r["source_id"] == n["id"] and r["tree"] == n["tree"]]
        if n["consolidated"] and len(roots) != 1 and not (pruned and not roots):
            bad.append(f"consolidated node {n['id']} has {len(roots)} distilled roots")
        if n["origin"] == "consolidated":
            src = nodes.get(n["source_id"])
            if (src is None and not pruned) or (src is not None and not src["consolidated"]):
                bad.append(f"consolidated root {n['id']} whose source is not flagged")
        if n["episode_id"] not in learned:
            bad.append(f"node {n['id']} of episode {n['episode_id']} not in the ledger")
    return bad


# -- stores -----------------------------------------------------------------------------------
class Stores:
    def __init__(self, work: Path, pg_url: str | None) -> None:
        self.work, self.pg_url = work, pg_url

    def fresh(self, store: str, name: str) -> str:
        """A location for a new bank (nothing there)."""
        tag = f"{name}-{uuid.uuid4().hex[:8]}"
        if store == "sqlite":
            return str(self.work / f"{tag}.db")
        from deltamem.service.banks import BankSpace

        return BankSpace(str(self.pg_url)).location("kills", tag)

    def exists(self, loc: str) -> bool:
        """Whether there is a bank at ``loc`` (a killed first open may have left none)."""
        if not loc.startswith("postgres"):
            return Path(loc).exists()
        from deltamem.service.banks import BankSpace

        return BankSpace(str(self.pg_url)).exists(loc)

    def drop(self, loc: str) -> None:
        if loc.startswith("postgres"):
            from deltamem.store.postgres import drop_bank

            drop_bank(loc)
        else:
            for s in ("", "-wal", "-shm"):
                Path(loc + s).unlink(missing_ok=True)


# -- the kill loop ----------------------------------------------------------------------------
@dataclass
class Row:
    op: str
    store: str
    kills: int = 0
    failed: int = 0
    between: int = 0
    before: int = 0
    mid: int = 0
    after: int = 0
    equal: int = 0
    op_s: float = 0.0
    problems: list[str] = field(default_factory=list)


def kill_child(target: Callable[[], None], delay: float) -> None:
    """Fork; the child runs ``target`` after saying it is ready; SIGKILL it ``delay`` s later
    (or reap it if it finished first)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        code = 0
        try:
            os.write(w, b"r")
            target()
        except BaseException:
            code = 3
        os._exit(code)
    os.close(w)
    try:
        os.read(r, 1)
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    finally:
        os.close(r)


def run_library_op(op: str, store: str, kills: int, stores: Stores, rng: random.Random,
                   n_episodes: int, export: Path) -> Row:
    row = Row(op, store)
    stream = [episode(i) for i in range(n_episodes)]

    def prepare() -> str:
        loc = stores.fresh(store, op)
        if op == "prune":
            import_bank(export, loc)
        return loc

    def action(loc: str) -> Callable[[], None]:
        if op == "import":
            return lambda: import_bank(export, loc)
        if op == "prune":
            def prune() -> None:
                mem = open_mem(loc)
                try:
                    mem.prune(PRUNE)
                finally:
                    mem.close()
            return prune

        def learn() -> None:
            mem = open_mem(loc)
            try:
                for ep in stream:
                    mem.learn(ep)
            finally:
                mem.close()
        return learn

    def rerun(loc: str) -> None:
        if op == "import":
            store_ = open_store(loc)
            try:
                empty = not store_.load_nodes()
            finally:
                store_.close()
            if empty:
                import_bank(export, loc)
        else:
            action(loc)()

    ref = prepare()
    before_snap = snapshot(ref) if op == "prune" else None
    t = time.perf_counter()
    action(ref)()
    row.op_s = time.perf_counter() - t
    want = snapshot(ref)
    want_recs = records(ref)
    assert not invariants(ref, pruned=op == "prune"), invariants(ref, pruned=op == "prune")
    stores.drop(ref)
    for _ in range(kills):
        loc = prepare()
        kill_child(action(loc), rng.uniform(0.0, row.op_s * 1.2 + 0.05))
        row.kills += 1
        exists = stores.exists(loc)
        problems = invariants(loc, pruned=op == "prune") if exists else []
        if problems:
            row.failed += 1
            row.problems.append(f"{op}/{store}: {problems[:3]}")
        else:
            now = snapshot(loc) if exists else None
            if now == want:
                row.after += 1
            elif op == "learn" and now is not None:
                n = sum(r["type"] == "learned" for r in records(loc))
                row.before += n == 0
                row.mid += n > 0
            elif now is None or now == before_snap or (op == "import" and not [
                    r for r in records(loc) if r["type"] in ("node", "learned")]):
                row.before += 1
            else:
                row.between += 1
                row.problems.append(f"{op}/{store}: a bank between before and after")
        try:
            rerun(loc)
            if snapshot(loc) == want and not invariants(loc, pruned=op == "prune"):
                row.equal += 1
            else:
                row.problems.append(f"{op}/{store}: re-run differs from the uninterrupted run")
                dump = os.environ.get("KILL_LOOP_DUMP")
                if dump:
                    Path(dump).mkdir(parents=True, exist_ok=True)
                    for name, recs in (("want", want_recs), ("got", records(loc))):
                        Path(dump, f"{op}-{store}-{row.kills}-{name}.json").write_text(
                            json.dumps(recs, indent=0, sort_keys=True))
        except Exception as e:
            row.problems.append(f"{op}/{store}: re-run failed: {type(e).__name__}: {e}")
        stores.drop(loc)
    return row


def run_service_learn(store: str, kills: int, stores: Stores, rng: random.Random,
                      n_episodes: int) -> Row:
    import httpx

    from deltamem.server.replicas import start_replicas, stop_replicas, write_key_file

    row = Row("service-learn", store)
    work = stores.work / f"svc-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    keys = work / "keys.json"
    key = write_key_file(keys, "kills")
    bodies = []
    for i in range(n_episodes):
        d = episode(i).to_dict()
        d.pop("usage")
        d["task"].pop("meta")
        bodies.append({"episode": d})

    def storage() -> str:
        if store == "sqlite":
            s = work / f"st-{uuid.uuid4().hex[:6]}"
            s.mkdir()
            return str(s)
        return str(stores.pg_url)

    def location(st: str, bank: str) -> str:
        from deltamem.service.banks import BankSpace

        return BankSpace(st).location("kills", bank)

    def send_all(port: int, bank: str, stop: threading.Event | None = None) -> int:
        sent = 0
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                          headers={"Authorization": f"Bearer {key}"}) as http:
            for b in bodies:
                if stop is not None and stop.is_set():
                    break
                try:
                    r = http.post(f"/v1/banks/{bank}/learn", json=b)
                except httpx.TransportError:
                    break
                if r.status_code != 200:
                    raise RuntimeError(f"learn answered {r.status_code}: {r.text[:200]}")
                sent += 1
        return sent

    def serve(st: str) -> Any:
        return start_replicas(st, 1, keys=keys, embedder=f"hashing:{DIM}", log_dir=work)

    st = storage()
    bank = f"ref{uuid.uuid4().hex[:6]}"
    reps = serve(st)
    t = time.perf_counter()
    send_all(reps[0].port, bank)
    row.op_s = time.perf_counter() - t
    stop_replicas(reps)
    ref = location(st, bank)
    want = snapshot(ref)
    assert not invariants(ref), invariants(ref)
    for _ in range(kills):
        st = storage()
        bank = f"k{uuid.uuid4().hex[:6]}"
        reps = serve(st)
        stop = threading.Event()
        timer = threading.Timer(rng.uniform(0.0, row.op_s * 1.1),
                                lambda r=reps[0]: (r.process.send_signal(signal.SIGKILL)))
        timer.start()
        send_all(reps[0].port, bank, stop)
        timer.join()
        reps[0].process.wait()
        row.kills += 1
        loc = location(st, bank)
        exists = stores.exists(loc)
        problems = invariants(loc) if exists else []
        if problems:
            row.failed += 1
            row.problems.append(f"service-learn/{store}: {problems[:3]}")
        elif exists and snapshot(loc) == want:
            row.after += 1
        elif exists and any(r["type"] == "learned" for r in records(loc)):
            row.mid += 1
        else:
            row.before += 1
        reps = serve(st)
        try:
            send_all(reps[0].port, bank)
        finally:
            stop_replicas(reps)
        if snapshot(loc) == want and not invariants(loc):
            row.equal += 1
        else:
            row.problems.append(f"service-learn/{store}: re-run differs")
        stores.drop(loc)
    stores.drop(ref)
    return row


# -- the decocted memories' consolidation (item banks, SQLite) --------------------------------
CONSOLIDATING = ".consolidating"  # the suffix consolidate_bank builds a new bank under


def item_records(loc: str) -> list[dict[str, Any]]:
    from deltamem.store.items import ItemStore

    store = ItemStore(loc, readonly=True)
    try:
        return list(store.iter_export())
    finally:
        store.close()


def item_snapshot(loc: str) -> str:
    """SHA-256 of an item bank's records, the time it was made left out."""
    recs = [{k: v for k, v in r.items() if not (r["type"] == "meta" and k == "created_at")}
            for r in item_records(loc)]
    return hashlib.sha256(json.dumps(recs, sort_keys=True).encode()).hexdigest()


def item_invariants(loc: str, size: int) -> list[str]:
    """What is wrong with a consolidated bank (empty: nothing): it opens as a lessons bank,
    passes SQLite's integrity check, records its system and embedder, holds exactly ``size``
    lessons, and every companion item belongs to a kept lesson."""
    from deltamem.memories.decocted.lessons import LessonMemory
    from deltamem.store.items import ItemStore

    try:
        st = ItemStore(loc, readonly=True)
        try:
            ok = st.integrity_ok()
            meta = st.meta()
        finally:
            st.close()
        mem = LessonMemory.open(loc, embedder=HashingEmbedder(dim=DIM), mode="deterministic")
        mem.close()
    except Exception as e:
        return [f"does not open: {type(e).__name__}: {e}"]
    bad = [] if ok else ["integrity check fails"]
    bad += [f"meta has no {k}" for k in ("system", "embedder_name") if k not in meta]
    items = [r for r in item_records(loc) if r["type"] == "item"]
    lessons = {r["id"] for r in items if r["kind"] == "lesson"}
    if len(lessons) != size:
        bad.append(f"{len(lessons)} lessons, not {size}")
    bad += [f"companion {r['id']} of no kept lesson" for r in items
            if r["kind"] != "lesson" and r["key"] not in lessons]
    return bad


def consolidate_child(source: str, out: str, size: int) -> None:
    """The consolidation as its own process (``--consolidate-child``): scikit-learn's k-means
    uses OpenMP threads, and a process forked from one that has run them hangs in its next
    k-means, so these children are started afresh, not forked. Writes ``r`` on stdout when
    ready (imported, one small k-means run), runs ``consolidate_bank`` (writing ``w`` when it
    opens a bank other than ``source``: the new bank is being written from then on), then
    writes a JSON line: the run's seconds and the window in which it wrote the new bank."""
    from deltamem.memories.decocted.kmeans import consolidate, consolidate_bank
    from deltamem.store.items import ItemStore

    consolidate(random_matrix(40, 8), 4)
    opened: list[float] = []
    init = ItemStore.__init__

    def timed(self: ItemStore, path: Any, **kw: Any) -> None:
        if str(path) != source and not opened:
            opened.append(time.perf_counter())
            sys.stdout.write("w")  # the parent may be waiting for it to aim a kill
            sys.stdout.flush()
        init(self, path, **kw)

    ItemStore.__init__ = timed  # type: ignore[method-assign]
    sys.stdout.write("r")
    sys.stdout.flush()
    t = time.perf_counter()
    consolidate_bank(source, out, embedder=HashingEmbedder(dim=DIM), size=size)
    took = time.perf_counter() - t
    sys.stdout.write(json.dumps({"op_s": took, "window": [opened[0] - t, took]}) + "\n")
    sys.stdout.flush()


def random_matrix(n: int, d: int) -> Any:
    import numpy as np

    return np.random.default_rng(0).normal(size=(n, d))


def run_consolidate(kills: int, stores: Stores, rng: random.Random, n_entries: int,
                    size: int) -> Row:
    import subprocess

    from deltamem.memories.decocted.lessons import LessonMemory

    row = Row("consolidate", "sqlite")
    source = str(stores.work / "lessons.db")
    mem = LessonMemory.open(source, embedder=HashingEmbedder(dim=DIM), mode="deterministic")
    try:
        for i in range(n_entries):
            mem.learn(episode(i))
    finally:
        mem.close()

    def child(loc: str) -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, __file__, "--consolidate-child", source, loc,
                              str(size)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert p.stdout is not None
        if p.stdout.read(1) != "r":
            p.wait()
            raise RuntimeError(f"the consolidation child did not start (exit {p.returncode})")
        return p

    def temp(loc: str) -> Path:
        return Path(loc + CONSOLIDATING)

    ref = stores.fresh("sqlite", "consolidate")
    p = child(ref)
    out, _ = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(f"the uninterrupted consolidation failed (exit {p.returncode})")
    timing = json.loads(out.lstrip("w"))
    row.op_s = float(timing["op_s"])
    w0, w1 = timing["window"]
    print(f"  consolidate: run {row.op_s:.2f} s, bank written {w0:.2f}-{w1:.2f} s", file=sys.stderr)
    want = item_snapshot(ref)
    assert not item_invariants(ref, size), item_invariants(ref, size)
    stores.drop(ref)
    for k in range(kills):
        loc = stores.fresh("sqlite", "consolidate")
        # every other kill lands while the new bank is written: at a random moment within
        # the reference's writing time after the child says it began; the others anywhere
        p = child(loc)
        if k % 2:
            assert p.stdout is not None
            p.stdout.read(1)
            time.sleep(rng.uniform(0.0, w1 - w0))
        else:
            time.sleep(rng.uniform(0.0, row.op_s * 1.2 + 0.05))
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGKILL)
        p.communicate()
        row.kills += 1
        if Path(loc).exists():
            problems = item_invariants(loc, size)
            if problems:
                row.failed += 1
                row.problems.append(f"consolidate/sqlite: {problems[:3]}")
            elif item_snapshot(loc) == want:
                row.after += 1
            else:
                row.between += 1
                row.problems.append("consolidate/sqlite: a bank between before and after")
        elif temp(loc).exists():
            row.mid += 1
        else:
            row.before += 1
        try:
            if not Path(loc).exists():
                p = child(loc)
                p.communicate()
                if temp(loc).exists():
                    row.problems.append("consolidate/sqlite: the re-run left its temporary file")
            if item_snapshot(loc) == want and not item_invariants(loc, size):
                row.equal += 1
            else:
                row.problems.append("consolidate/sqlite: re-run differs from the uninterrupted "
                                    "run")
        except Exception as e:
            row.problems.append(f"consolidate/sqlite: re-run failed: {type(e).__name__}: {e}")
        stores.drop(loc)
        stores.drop(str(temp(loc)))
    return row


def main() -> int:
    if sys.argv[1:2] == ["--consolidate-child"]:
        consolidate_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--ops", default="import,prune,learn,service-learn,consolidate")
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--episodes", type=int, default=40)
    ap.add_argument("--consolidate-scale", type=int, default=10,
                    help="The consolidated lessons bank has --episodes × this many entries.")
    ap.add_argument("--consolidate-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL"))
    ap.add_argument("--out", default=None, help="Also write the rows as JSON here.")
    args = ap.parse_args()
    stores_wanted = [s for s in args.stores.split(",") if s]
    if "postgres" in stores_wanted and not args.pg_url:
        print("no PostgreSQL URL (--pg-url / $DELTAMEM_TEST_PG_URL): postgres left out",
              file=sys.stderr)
        stores_wanted.remove("postgres")
    work = Path(tempfile.mkdtemp(prefix="deltamem-kills-"))
    stores = Stores(work, args.pg_url)
    rng = random.Random(args.seed)
    # the bank that import and prune start from: the stream learned once, exported
    base = str(work / "base.db")
    mem = open_mem(base)
    for i in range(args.episodes):
        mem.learn(episode(i))
    mem.close()
    export = work / "base.jsonl"
    from deltamem.portable import export_bank

    export_bank(base, export)
    rows: list[Row] = []
    print(HEADER)
    print("|---" * 8 + "|")
    for op in [o for o in args.ops.split(",") if o]:
        for store in stores_wanted:
            if op == "consolidate":
                if store != "sqlite":
                    continue  # item banks are SQLite files
                row = run_consolidate(args.kills, stores, rng,
                                      args.episodes * args.consolidate_scale,
                                      args.consolidate_size)
            elif op == "service-learn":
                row = run_service_learn(store, args.kills, stores, rng, args.episodes)
            else:
                row = run_library_op(op, store, args.kills, stores, rng, args.episodes, export)
            rows.append(row)
            print(f"| {row.op} | {row.store} | {row.kills} | {row.failed} | {row.between} | "
                  f"{row.before} / {row.mid} / {row.after} | {row.equal} / {row.kills} | "
                  f"{row.op_s:.2f} |", flush=True)
            for p in row.problems[:5]:
                print(f"  problem: {p}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps([asdict(r) for r in rows], indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if any(r.failed or r.between or r.equal != r.kills for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
