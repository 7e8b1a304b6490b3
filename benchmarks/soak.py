"""A soak: the service under steady mixed load on loopback, memory and latency sampled.

Starts ``--replicas`` ``deltamem serve`` processes on one storage (a PostgreSQL URL: the
replicas share the database; or a folder for one SQLite replica) and runs ``--clients`` client
threads for ``--minutes`` (bounded: at most ``--max-requests`` requests in all). Each client
loops over recall (60 %), learn (30 %, every episode id new) and stats (10 %), round-robin over
the replicas. Every ``--every`` seconds it samples each replica's resident memory
(``/proc/PID/status`` VmRSS) and the interval's latency percentiles. At the end every learn
answered 200 must be in the bank's ledger ("every learn accounted for").

The bank grows all along (every learn is a new episode, and a replica holds its trees in
memory), so RSS is expected to grow with it: a leak is growth beyond the bank's. Each sample
records the episodes learned so far, and the totals' ``growth`` gives, over the run's second
half, each replica's RSS slope (MB/min), the bank's (episodes/min) and their ratio (MB per 1k
episodes), the same ratio over the whole run, and the latency of the first and last fifth.

Writes ``soak.json`` (samples, totals) and ``soak.png`` (RSS per replica with the episodes
learned, and p50/p99 over time) into ``--out``; prints a summary. Exits 1 on any error
response or a learn not accounted for. Each sample also records the machine's 1-minute load
average (``os.getloadavg``, so a latency bump can be told from load) and, in the bounded mode
below, the bank's node count.

Bounded mode (``--bank-cap N``): a growing bank cannot show "RSS flat, p99 stable", since
recall scans every node and a replica holds every node in memory. With a cap, the bank is
first filled with ``N`` episodes over the service's learn route (not timed, not sampled); then
the same request mix runs, every learn still a new episode, while the benchmark itself prunes
the bank every ``--prune-every`` seconds with the library's forgetting policy ``unused:N``
(:meth:`deltamem.memories.deltamem.DeltaMem.prune`, what ``deltamem prune`` calls; the
replicas see the removal and load the bank afresh). A node survives while one of the last
``N`` learns used it, so the bank holds about the nodes of its last ``N`` episodes: stationary.
The totals' ``steady`` gives each replica's RSS slope (MB/min, whole run and second half), the
p50/p99 of the first and last fifth, the p99's regression slope (ms/min), the node count's
range, and the prunes (count, nodes removed, seconds each).

    python benchmarks/soak.py [--minutes 60] [--replicas 2] [--clients 4] [--every 10]
        [--storage postgresql://…]   # default: $DELTAMEM_TEST_PG_URL, else a temporary folder
        [--out soak-dir]
        [--bank-cap N] [--prune-every 60]   # bounded mode: a bank of about N episodes
    python benchmarks/soak.py --replot soak-dir [--storage …]
        # recompute growth and the plot of a finished run; samples without their episode count
        # (runs before it was recorded) get it from the ledger's learned_at times
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from deltamem.server.replicas import (
    episode_body,
    start_replicas,
    stop_replicas,
    write_key_file,
)
from deltamem.service.banks import BankSpace
from deltamem.store.factory import open_store


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--max-requests", type=int, default=1_000_000)
    ap.add_argument("--storage", default=os.environ.get("DELTAMEM_TEST_PG_URL"))
    ap.add_argument("--out", default="soak-out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bank-cap", type=int, default=0, metavar="N",
                    help="Bounded mode: fill the bank with N episodes first, then prune it "
                    "with the policy unused:N every --prune-every seconds (0: unbounded).")
    ap.add_argument("--prune-every", type=float, default=60.0, metavar="SECONDS")
    ap.add_argument("--replot", default=None, metavar="DIR",
                    help="Recompute the growth figures and the plot of the run in DIR.")
    args = ap.parse_args()
    if args.replot:
        return replot(Path(args.replot), args.storage)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    storage = args.storage or tempfile.mkdtemp(prefix="deltamem-soak-")
    if not storage.startswith("postgres") and args.replicas > 1:
        print("SQLite storage: one replica", file=sys.stderr)
        args.replicas = 1
    tenant = "soak" + uuid.uuid4().hex[:6]
    key = write_key_file(out / "keys.json", tenant)
    reps = start_replicas(storage, args.replicas, keys=out / "keys.json", log_dir=out)
    bank = "soak"
    lock = threading.Lock()
    lat: list[tuple[float, str, float, int]] = []  # (answered at, kind, seconds, status)
    learned_ok: list[str] = []
    errors: list[str] = []
    stop = threading.Event()
    sent = [0]
    loc = BankSpace(storage).location(tenant, bank)
    prefill_s = prefill(reps, key, bank, args.bank_cap, args.clients, args.seed,
                        learned_ok, errors, lock) if args.bank_cap > 0 else 0.0
    counter = open_store(loc, readonly=True) if args.bank_cap > 0 else None
    prunes: list[dict[str, Any]] = []
    t0 = time.monotonic()
    end = t0 + args.minutes * 60

    def client(c: int) -> None:
        rng = random.Random(args.seed * 1000 + c)
        i = 0
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
            while not stop.is_set() and time.monotonic() < end:
                with lock:
                    if sent[0] >= args.max_requests:
                        return
                    sent[0] += 1
                r = reps[(c + i) % len(reps)]
                u = rng.random()
                body = episode_body(c, i, rng)
                t = time.monotonic()
                try:
                    if u < 0.6:
                        kind = "recall"
                        resp = http.post(f"{r.url}/v1/banks/{bank}/recall",
                                         json={"task": body["task"]})
                        ok = resp.status_code in (200, 404)  # 404 until the first learn
                    elif u < 0.9:
                        kind = "learn"
                        resp = http.post(f"{r.url}/v1/banks/{bank}/learn",
                                         json={"episode": body})
                        ok = resp.status_code == 200
                        if ok:
                            with lock:
                                learned_ok.append(body["id"])
                    else:
                        kind = "stats"
                        resp = http.get(f"{r.url}/v1/banks/{bank}/stats")
                        ok = resp.status_code in (200, 404)
                    status = resp.status_code
                except httpx.HTTPError as e:
                    kind, ok, status = "error", False, 0
                    resp = None
                    with lock:
                        errors.append(f"{type(e).__name__}: {e}")
                dt = time.monotonic() - t
                with lock:
                    lat.append((t + dt - t0, kind, dt, status))
                    if not ok and resp is not None:
                        errors.append(f"{kind} {status}: {resp.text[:200]}")
                i += 1

    def pruner() -> None:
        from deltamem.memories.deltamem import DeltaMem

        mem = DeltaMem.open(loc, embedder=None)
        try:
            while not stop.wait(args.prune_every) and time.monotonic() < end:
                t = time.monotonic()
                try:
                    removed = mem.prune([f"unused:{args.bank_cap}"])
                except Exception as e:  # counted as an error of the run
                    with lock:
                        errors.append(f"prune {type(e).__name__}: {e}")
                    continue
                with lock:
                    prunes.append({"t_s": round(t - t0, 1), "removed": len(removed),
                                   "seconds": round(time.monotonic() - t, 3)})
        finally:
            mem.close()

    threads = [threading.Thread(target=client, args=(c,), daemon=True)
               for c in range(args.clients)]
    for th in threads:
        th.start()
    if args.bank_cap > 0:
        threading.Thread(target=pruner, daemon=True).start()
    samples: list[dict[str, Any]] = []
    last = 0.0
    try:
        while any(th.is_alive() for th in threads):
            time.sleep(min(args.every, max(0.1, end - time.monotonic())))
            now = time.monotonic() - t0
            with lock:
                window = [x for x in lat if last <= x[0] < now]
            ds = np.array([x[2] for x in window]) if window else np.array([np.nan])
            samples.append({
                "t_s": round(now, 1),
                "rss_mb": [round(rss_mb(r.process.pid), 1) for r in reps],
                "requests": len(window),
                "learned": len(learned_ok),
                "p50_ms": round(float(np.nanpercentile(ds, 50)) * 1000, 2),
                "p99_ms": round(float(np.nanpercentile(ds, 99)) * 1000, 2),
                "load1": round(os.getloadavg()[0], 2),
            })
            if counter is not None:
                samples[-1]["nodes"] = sum(counter.node_counts().values())
            last = now
            if not window:  # the clients are done
                samples.pop()
                continue
            print(json.dumps(samples[-1]), flush=True)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=60)
        stop_replicas(reps)
        if counter is not None:
            counter.close()
    store = open_store(loc, readonly=True)
    try:
        ledger = {r["episode_id"] for r in store.iter_export() if r["type"] == "learned"}
    finally:
        store.close()
    missing = [e for e in learned_ok if e not in ledger]
    kinds = {k: sum(1 for x in lat if x[1] == k) for k in ("recall", "learn", "stats")}
    rss0 = samples[0]["rss_mb"] if samples else []
    rss1 = samples[-1]["rss_mb"] if samples else []
    total = {
        "minutes": args.minutes, "replicas": args.replicas, "clients": args.clients,
        "storage": "postgres" if storage.startswith("postgres") else "sqlite",
        "requests": len(lat), "by_kind": kinds, "errors": len(errors),
        "first_errors": errors[:5], "learns_answered_200": len(learned_ok),
        "learns_in_ledger": len(ledger), "learns_not_accounted_for": len(missing),
        "rss_first_mb": rss0, "rss_last_mb": rss1,
        "p99_ms_first_last": [samples[0]["p99_ms"], samples[-1]["p99_ms"]] if samples else [],
        "growth": growth(samples),
    }
    if args.bank_cap > 0:
        total["bank_cap"] = args.bank_cap
        total["prefill_seconds"] = round(prefill_s, 1)
        total["steady"] = steady(samples, prunes, args.prune_every, args.every)
    (out / "soak.json").write_text(json.dumps({"total": total, "samples": samples}, indent=1))
    plot(samples, out / "soak.png", total)
    print(json.dumps(total, indent=1))
    return 1 if errors or missing else 0


def prefill(reps: list[Any], key: str, bank: str, n: int, clients: int, seed: int,
            learned_ok: list[str], errors: list[str], lock: threading.Lock) -> float:
    """Learn ``n`` episodes (ids ``p…``, apart from the run's) over the replicas, ``clients``
    threads; every learn answered 200 joins ``learned_ok``. Returns the seconds it took."""
    t = time.monotonic()
    todo = iter(range(n))

    def one(c: int) -> None:
        rng = random.Random(seed * 1000 + 500 + c)
        with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                body = episode_body(c, i, rng)
                body["id"] = f"p{i}"
                r = reps[i % len(reps)]
                try:
                    resp = http.post(f"{r.url}/v1/banks/{bank}/learn", json={"episode": body})
                except httpx.HTTPError as e:
                    with lock:
                        errors.append(f"prefill {type(e).__name__}: {e}")
                    continue
                with lock:
                    if resp.status_code == 200:
                        learned_ok.append(body["id"])
                    else:
                        errors.append(f"prefill learn {resp.status_code}: {resp.text[:200]}")

    threads = [threading.Thread(target=one, args=(c,)) for c in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(json.dumps({"prefilled": n, "seconds": round(time.monotonic() - t, 1)}), flush=True)
    return time.monotonic() - t


def steady(samples: list[dict[str, Any]], prunes: list[dict[str, Any]],
           prune_every: float, every: float) -> dict[str, Any]:
    """The bounded run at its steady size (see the module's docstring). A last sample over
    less than half an interval (the clients' final answers) is left out."""
    if len(samples) >= 2 and samples[-1]["t_s"] - samples[-2]["t_s"] < every / 2:
        samples = samples[:-1]
    pruned = {
        "prune_every_s": prune_every,
        "prunes": len(prunes),
        "nodes_pruned": sum(p["removed"] for p in prunes),
        "prune_seconds_median_max": ([round(float(np.median([p["seconds"] for p in prunes])), 3),
                                      max(p["seconds"] for p in prunes)] if prunes else []),
    }
    if len(samples) < 4:
        return pruned
    n = len(samples[0]["rss_mb"])
    half = samples[len(samples) // 2:]
    fifth = max(1, len(samples) // 5)

    def rss_slope(ss: list[dict[str, Any]]) -> list[float]:
        return [round(_slope([s["t_s"] / 60 for s in ss], [s["rss_mb"][i] for s in ss]), 4)
                for i in range(n)]

    def med(ss: list[dict[str, Any]], k: str) -> float:
        return round(float(np.median([s[k] for s in ss])), 2)

    nodes = [s["nodes"] for s in samples if "nodes" in s]
    return {
        "rss_mb_per_min_whole_run": rss_slope(samples),
        "rss_mb_per_min_second_half": rss_slope(half),
        "rss_mb_first_last_fifth": [[round(float(np.median([s["rss_mb"][i] for s in part])), 1)
                                     for i in range(n)]
                                    for part in (samples[:fifth], samples[-fifth:])],
        "median_p50_ms_first_last_fifth": [med(samples[:fifth], "p50_ms"),
                                           med(samples[-fifth:], "p50_ms")],
        "median_p99_ms_first_last_fifth": [med(samples[:fifth], "p99_ms"),
                                           med(samples[-fifth:], "p99_ms")],
        "p99_ms_per_min": round(_slope([s["t_s"] / 60 for s in samples],
                                       [s["p99_ms"] for s in samples]), 3),
        "load1_first_last_fifth": [med(samples[:fifth], "load1"),
                                   med(samples[-fifth:], "load1")],
        "requests_per_sample_first_last_fifth": [med(samples[:fifth], "requests"),
                                                 med(samples[-fifth:], "requests")],
        "nodes_first_last_min_max": ([nodes[0], nodes[-1], min(nodes), max(nodes)]
                                     if nodes else []),
        **pruned,
    }


def _slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of y over x (nan for fewer than 2 distinct x)."""
    if len(set(x)) < 2:
        return float("nan")
    return float(np.polyfit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), 1)[0])


def growth(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """RSS against the bank's growth (see the module's docstring)."""
    if len(samples) < 4 or "learned" not in samples[0]:
        return {}
    n = len(samples[0]["rss_mb"])
    half = samples[len(samples) // 2:]
    fifth = max(1, len(samples) // 5)

    def per_replica(ss: list[dict[str, Any]], x: str) -> list[float]:
        xs = [s["t_s"] / 60 if x == "min" else s["learned"] / 1000 for s in ss]
        return [round(_slope(xs, [s["rss_mb"][i] for s in ss]), 3) for i in range(n)]

    def lat(ss: list[dict[str, Any]], k: str) -> float:
        return round(float(np.median([s[k] for s in ss])), 1)

    return {
        "second_half_from_min": round(half[0]["t_s"] / 60, 1),
        "rss_mb_per_min_second_half": per_replica(half, "min"),
        "episodes_per_min_second_half": round(
            _slope([s["t_s"] / 60 for s in half], [s["learned"] for s in half]), 1),
        "rss_mb_per_1k_episodes_second_half": per_replica(half, "k"),
        "rss_mb_per_1k_episodes_whole_run": per_replica(samples, "k"),
        "episodes_first_last": [samples[0]["learned"], samples[-1]["learned"]],
        "median_p50_ms_first_last_fifth": [lat(samples[:fifth], "p50_ms"),
                                           lat(samples[-fifth:], "p50_ms")],
        "median_p99_ms_first_last_fifth": [lat(samples[:fifth], "p99_ms"),
                                           lat(samples[-fifth:], "p99_ms")],
        "requests_per_sample_first_last_fifth": [lat(samples[:fifth], "requests"),
                                                 lat(samples[-fifth:], "requests")],
    }


def replot(out: Path, storage: str | None) -> int:
    """Recompute ``growth`` and the plot of the finished run in ``out``. Samples without an
    episode count take it from the bank's ledger (``learned_at`` times; the run's start is
    taken as its first learn, a fraction of a second after it began)."""
    data = json.loads((out / "soak.json").read_text())
    samples, total = data["samples"], data["total"]
    if samples and "learned" not in samples[0]:
        if not storage:
            print("--storage is needed to read the ledger", file=sys.stderr)
            return 2
        keys = json.loads((out / "keys.json").read_text())["keys"]
        store = open_store(BankSpace(storage).location(keys[0]["tenant"], "soak"),
                           readonly=True)
        try:
            times = sorted(float(r["learned_at"]) for r in store.iter_export()
                           if r["type"] == "learned")
        finally:
            store.close()
        t0 = times[0]
        at = np.asarray(times) - t0
        for s in samples:
            s["learned"] = int(np.searchsorted(at, s["t_s"], side="right"))
        total["learned_from_ledger_times"] = True
    total["growth"] = growth(samples)
    if total.get("steady"):  # a bounded run: the prunes are not in the samples, keep them
        old = total["steady"]
        total["steady"] = {**steady(samples, [], old["prune_every_s"],
                                    samples[1]["t_s"] - samples[0]["t_s"]),
                           **{k: v for k, v in old.items() if k.startswith("prune")}}
    (out / "soak.json").write_text(json.dumps({"total": total, "samples": samples}, indent=1))
    plot(samples, out / "soak.png", total)
    print(json.dumps(total, indent=1))
    return 0


def plot(samples: list[dict[str, Any]], path: Path, total: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not samples:
        return
    t = [s["t_s"] / 60 for s in samples]
    has_load = "load1" in samples[0]
    fig, axes = plt.subplots(3 if has_load else 2, 1, figsize=(8, 8 if has_load else 6),
                             sharex=True)
    a, b = axes[0], axes[1]
    for i in range(len(samples[0]["rss_mb"])):
        a.plot(t, [s["rss_mb"][i] for s in samples], label=f"replica {i}")
    a.set_ylabel("RSS (MB)")
    a.set_ylim(bottom=0)
    if "nodes" in samples[0]:
        e = a.twinx()
        e.plot(t, [s["nodes"] for s in samples], color="grey", linestyle="--",
               label="nodes in the bank")
        e.set_ylabel("nodes")
        e.set_ylim(bottom=0)
        e.legend(loc="lower right")
    elif "learned" in samples[0]:
        e = a.twinx()
        e.plot(t, [s["learned"] for s in samples], color="grey", linestyle="--",
               label="episodes learned")
        e.set_ylabel("episodes learned")
        e.set_ylim(bottom=0)
        e.legend(loc="lower right")
    a.legend(loc="upper left")
    b.plot(t, [s["p50_ms"] for s in samples], label="p50")
    b.plot(t, [s["p99_ms"] for s in samples], label="p99")
    b.set_ylabel("latency (ms)")
    b.set_ylim(bottom=0)
    b.legend()
    if has_load:
        axes[2].plot(t, [s.get("load1", float("nan")) for s in samples], color="black")
        axes[2].set_ylabel("load average (1 min)")
        axes[2].set_ylim(bottom=0)
    axes[-1].set_xlabel("minutes")
    cap = f", bank cap {total['bank_cap']} episodes" if total.get("bank_cap") else ""
    fig.suptitle(f"soak: {total['replicas']} replica(s) on {total['storage']}{cap}, "
                 f"{total['clients']} clients, {total['requests']} requests, "
                 f"{total['errors']} errors")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
