"""Recall and learn over HTTP, with SQLite and with PostgreSQL behind the service, beside
the same calls in process.

Per backend, first in process (:class:`deltamem.DeltaMem` opened on a fresh bank of that
backend, the service's embedder and settings): ``--learns`` learns of distinct episodes
(the bank growing from empty), then ``--recalls`` recalls. Then over HTTP (``deltamem
serve`` on 127.0.0.1 in its own process, or with ``--server thread`` its app with uvicorn in
a background thread of this process; one client, each call timed end to end: request sent →
JSON parsed) on another fresh bank: the same learns
(learn-only), the same recalls (recall-only), then ``--recalls`` mixed rounds (a recall,
then the learn of a new episode handed that recall, as an agent's loop does). Prints per
row p50 and p99 in ms, calls per second (calls ÷ the wall time of the phase) and the p50 ÷
the in-process p50 of the same operation and backend; and the bank size reached. The
embedder is ``hashing:256`` by default so the figures are the service + storage cost;
``--embedder minilm`` adds the model's time. With ``--server thread`` client and server
share one interpreter and its GIL: on a busy machine each hand-over between the client's,
the event loop's and the worker's threads can wait a switch interval (5 ms), which the
separate process does not.

    python benchmarks/service.py [--learns 300] [--recalls 300] [--embedder hashing:256]
        [--pg-url postgresql://…]   # default: $DELTAMEM_TEST_PG_URL; PostgreSQL skipped if unset
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from deltamem.embed.factory import make_embedder
from deltamem.server.app import create_app
from deltamem.server.background import running
from deltamem.server.replicas import start_replicas, stop_replicas, write_key_file
from deltamem.service.keys import KeyRing
from deltamem.testing import make_episode

VERBS = ["put", "heat", "cool", "clean", "examine", "slice", "take", "open"]
OBJECTS = ["apple", "mug", "book", "egg", "knife", "potato", "cellphone", "vase", "candle"]
PLACES = ["fridge", "sinkbasin", "desk", "sofa", "shelf", "cabinet", "microwave"]
ROOMS = ["kitchen", "bedroom", "living room", "bathroom", "office"]


def episode(i: int) -> dict:
    goal = (f"{VERBS[i % len(VERBS)]} the {OBJECTS[(i // 3) % len(OBJECTS)]} "
            f"in the {PLACES[(i // 7) % len(PLACES)]}")  # fmt: skip
    scene = f"{ROOMS[i % len(ROOMS)]} with a {PLACES[i % len(PLACES)]} 1 and a countertop 1"
    actions = [
        (f"go to countertop {1 + i % 3}", f"On the countertop you see a {OBJECTS[i % 9]} 1."),
        (f"take {OBJECTS[i % 9]} 1", f"You pick up the {OBJECTS[i % 9]} 1."),
        (f"go to {PLACES[i % 7]} 1", f"You arrive at {PLACES[i % 7]} 1."),
    ]
    d = make_episode(goal, scene=scene, actions=actions, success=i % 4 != 3,
                     episode_id=f"bench-{i}").to_dict()
    d.pop("usage")
    d["task"].pop("meta")
    return d


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


def summary(xs: list[float], wall: float) -> dict[str, float]:
    return {"p50": pct(xs, 50), "p99": pct(xs, 99), "rate": len(xs) / wall, "n": len(xs)}


def timed(calls: list[Callable[[], Any]]) -> dict[str, float]:
    """Each call's latency in ms and the phase's calls per second."""
    xs: list[float] = []
    t0 = time.perf_counter()
    for call in calls:
        t = time.perf_counter()
        call()
        xs.append((time.perf_counter() - t) * 1000)
    return summary(xs, time.perf_counter() - t0)


def location(storage: str, label: str, name: str) -> str:
    if label == "postgresql":
        sep = "&" if "?" in storage else "?"
        return f"{storage}{sep}bank=bench/{name}"
    return os.path.join(storage, f"{name}.db")


def in_process(storage: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    from deltamem import DeltaMem, Episode, Task

    loc = location(storage, label, "inproc" + uuid.uuid4().hex[:8])
    mem = DeltaMem.open(loc, embedder=make_embedder(args.embedder), domain="alfworld")
    eps = [Episode.from_dict(episode(i)) for i in range(args.learns)]
    tasks = [Task.from_dict(episode(i * 7 + 1)["task"]) for i in range(args.recalls)]
    try:
        learn = timed([lambda e=e: mem.learn(e) for e in eps])
        recall = timed([lambda t=t: mem.recall(t) for t in tasks])
        units = mem.stats()["units"]
    finally:
        mem.close()
        if label == "postgresql":
            from deltamem.store.postgres import drop_bank

            drop_bank(loc)
    return {"learn": learn, "recall": recall, "units": units}


@contextmanager
def serving(storage: str, args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The service's base URL and an API key of tenant ``bench``: a ``deltamem serve``
    process (``--server process``) or the app in a thread of this process (``thread``)."""
    if args.server == "thread":
        app = create_app(storage, embedder=make_embedder(args.embedder),
                         keys=KeyRing.from_keys({"bench-key": "bench"}),
                         config={"domain": "alfworld"})
        with running(app) as url:
            yield url, "bench-key"
        return
    with tempfile.TemporaryDirectory(prefix="deltamem-bench-keys-") as work:
        keys = os.path.join(work, "keys.json")
        key = write_key_file(keys, "bench")
        replicas = start_replicas(storage, 1, keys=keys, embedder=args.embedder,
                                  log_dir=work)
        try:
            yield replicas[0].url, key
        finally:
            stop_replicas(replicas)


def bench(storage: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    bank = "b" + uuid.uuid4().hex[:8]
    with serving(storage, args) as (url, key), httpx.Client(
        base_url=f"{url}/v1/banks/{bank}", headers={"X-API-Key": key}, timeout=60
    ) as http:

        def post(path: str, body: dict[str, Any]) -> Any:
            r = http.post(path, json=body)
            out = r.json()
            r.raise_for_status()
            return out

        learn = timed([lambda i=i: post("/learn", {"episode": episode(i)})
                       for i in range(args.learns)])
        tasks = [episode(i * 7 + 1)["task"] for i in range(args.recalls)]
        recall = timed([lambda t=t: post("/recall", {"task": t}) for t in tasks])
        mixed_x: list[float] = []
        t0 = time.perf_counter()
        for i in range(args.recalls):
            ep = episode(args.learns + i)
            t = time.perf_counter()
            got = post("/recall", {"task": ep["task"]})
            mixed_x.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            post("/learn", {"episode": ep, "recall": got})
            mixed_x.append((time.perf_counter() - t) * 1000)
        mixed = summary(mixed_x, time.perf_counter() - t0)
        units = http.get("/stats").json()["units"]
    if label == "postgresql":
        from deltamem.store.postgres import drop_bank

        drop_bank(storage, bank=f"bench/{bank}")
    return {"backend": label, "units": units, "learn": learn, "recall": recall,
            "mixed": mixed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learns", type=int, default=300)
    ap.add_argument("--recalls", type=int, default=300)
    ap.add_argument("--embedder", default="hashing:256")
    ap.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL", ""))
    ap.add_argument("--server", choices=["process", "thread"], default="process",
                    help="a `deltamem serve` process (default) or the app in a thread here")
    args = ap.parse_args()
    backends = [(tempfile.mkdtemp(prefix="deltamem-bench-"), "sqlite")]
    if args.pg_url:
        backends.append((args.pg_url, "postgresql"))
    else:
        print("(PostgreSQL skipped: pass --pg-url or set DELTAMEM_TEST_PG_URL)")
    rows = []
    for storage, label in backends:
        rows.append((label, in_process(storage, label, args), bench(storage, label, args)))
    print(f"embedder {args.embedder}, {args.learns} learns then {args.recalls} recalls, "
          f"then {args.recalls} × (recall + learn) over HTTP; one client; server in a "
          f"{args.server}; latency in ms; "
          f"{os.getloadavg()[0]:.1f} load at the end")
    print("| backend | where | operation | bank units | p50 | p99 | calls/s | p50 ÷ in process |")
    print("|---|---|---|---|---|---|---|---|")
    for label, inproc, http_row in rows:
        for op in ("learn", "recall"):
            r = inproc[op]
            print(f"| {label} | in process | {op} | {inproc['units']} | "
                  f"{r['p50']:.2f} | {r['p99']:.2f} | {r['rate']:.0f} | 1 |")
        for op in ("learn", "recall", "mixed"):
            r = http_row[op]
            base = inproc[op]["p50"] if op != "mixed" else (
                (inproc["learn"]["p50"] + inproc["recall"]["p50"]) / 2)
            print(f"| {label} | HTTP | {op} | {http_row['units']} | {r['p50']:.2f} | "
                  f"{r['p99']:.2f} | {r['rate']:.0f} | {r['p50'] / base:.1f} |")


if __name__ == "__main__":
    main()
