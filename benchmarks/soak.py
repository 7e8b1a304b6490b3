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
response or a learn not accounted for.

    python benchmarks/soak.py [--minutes 60] [--replicas 2] [--clients 4] [--every 10]
        [--storage postgresql://…]   # default: $DELTAMEM_TEST_PG_URL, else a temporary folder
        [--out soak-dir]
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

    threads = [threading.Thread(target=client, args=(c,), daemon=True)
               for c in range(args.clients)]
    for th in threads:
        th.start()
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
            })
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
    loc = BankSpace(storage).location(tenant, bank)
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
    (out / "soak.json").write_text(json.dumps({"total": total, "samples": samples}, indent=1))
    plot(samples, out / "soak.png", total)
    print(json.dumps(total, indent=1))
    return 1 if errors or missing else 0


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
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for i in range(len(samples[0]["rss_mb"])):
        a.plot(t, [s["rss_mb"][i] for s in samples], label=f"replica {i}")
    a.set_ylabel("RSS (MB)")
    a.set_ylim(bottom=0)
    if "learned" in samples[0]:
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
    b.set_xlabel("minutes")
    b.set_ylim(bottom=0)
    b.legend()
    fig.suptitle(f"soak: {total['replicas']} replica(s) on {total['storage']}, "
                 f"{total['clients']} clients, {total['requests']} requests, "
                 f"{total['errors']} errors")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
