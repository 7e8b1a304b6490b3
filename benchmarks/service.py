"""Recall and learn latency over HTTP, with SQLite and with PostgreSQL behind the service.

Starts ``deltamem serve``'s app in-process (uvicorn on 127.0.0.1, a background
thread), then from one client: ``--learns`` learns of distinct episodes (bank
growing from empty) and ``--recalls`` recalls, each timed end to end (request
sent → JSON parsed). Prints p50/p95/mean per call in milliseconds and the bank
size reached. The embedder is ``hashing:256`` by default so the figures are
the service + storage cost; ``--embedder minilm`` adds the model's time.

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

import httpx

from deltamem.embed.factory import make_embedder
from deltamem.server.app import create_app
from deltamem.server.background import running
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


def bench(storage: str, label: str, args: argparse.Namespace) -> dict:
    app = create_app(storage, embedder=make_embedder(args.embedder),
                     keys=KeyRing.from_keys({"bench-key": "bench"}),
                     config={"domain": "alfworld"})
    bank = "b" + uuid.uuid4().hex[:8]
    out: dict[str, list[float]] = {"learn": [], "recall": []}
    with running(app) as url, httpx.Client(
        base_url=f"{url}/v1/banks/{bank}", headers={"X-API-Key": "bench-key"}, timeout=60
    ) as http:
        for i in range(args.learns):
            body = {"episode": episode(i)}
            t = time.perf_counter()
            r = http.post("/learn", json=body)
            r.json()
            out["learn"].append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
        for i in range(args.recalls):
            body = {"task": episode(i * 7 + 1)["task"]}
            t = time.perf_counter()
            r = http.post("/recall", json=body)
            r.json()
            out["recall"].append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
        units = http.get("/stats").json()["units"]
    row = {"backend": label, "units": units}
    for op, xs in out.items():
        row[op] = {"p50": pct(xs, 50), "p95": pct(xs, 95), "mean": statistics.fmean(xs)}
    if label == "postgresql":
        from deltamem.store.postgres import drop_bank

        drop_bank(storage, bank=f"bench/{bank}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learns", type=int, default=300)
    ap.add_argument("--recalls", type=int, default=300)
    ap.add_argument("--embedder", default="hashing:256")
    ap.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL", ""))
    args = ap.parse_args()
    rows = [bench(tempfile.mkdtemp(prefix="deltamem-bench-"), "sqlite", args)]
    if args.pg_url:
        rows.append(bench(args.pg_url, "postgresql", args))
    else:
        print("(PostgreSQL skipped: pass --pg-url or set DELTAMEM_TEST_PG_URL)")
    print(f"embedder {args.embedder}, {args.learns} learns then {args.recalls} recalls, "
          "one client, latency in ms")
    print("| backend | bank units | learn p50 | learn p95 | recall p50 | recall p95 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['units']} | {r['learn']['p50']:.1f} | "
              f"{r['learn']['p95']:.1f} | {r['recall']['p50']:.1f} | {r['recall']['p95']:.1f} |")


if __name__ == "__main__":
    main()
