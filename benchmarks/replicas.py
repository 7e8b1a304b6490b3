"""Service replicas on one PostgreSQL database: load, a SIGKILL mid-load, and the bank's audit.

For each replica count, starts that many ``deltamem serve`` processes on loopback against
one PostgreSQL database, sends ``--clients`` × ``--learns`` (recall, then learn without the
recall, so the service decides each write) spread over the replicas, goals drawn from twelve
texts, and audits the bank (``deltamem.server.replicas.audit``): ROOTs of one trigger written
twice, chains consolidated twice, episodes lost, and the trees against a one-process replay of
the same episodes in the order the database committed them. ``--kill`` adds, for every count
of two or more, a run in which replica 0 is SIGKILLed once half the requests are answered; its
clients retry on the next replica. Prints one row per run; exits 1 when an audit fails.

    python benchmarks/replicas.py [--replicas 1,2,4] [--clients 8] [--learns 200] [--kill]
        [--pg-url postgresql://…]   # default: $DELTAMEM_TEST_PG_URL
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid

from deltamem.server.replicas import audit, run_load, start_replicas, stop_replicas, write_key_file
from deltamem.service.banks import BankSpace
from deltamem.store.postgres import drop_bank

HEADER = ("| replicas | SIGKILL | requests | 5xx | failed attempts | unfinished | learned / sent "
          "| nodes task / env | duplicated ROOT triggers | duplicate consolidations "
          "| replay equal | wall s | requests/s |")


def one(url: str, n: int, kill: bool, args: argparse.Namespace, work: str) -> dict:
    tenant = "r" + uuid.uuid4().hex[:8]
    keys = os.path.join(work, f"keys-{tenant}.json")
    key = write_key_file(keys, tenant)
    replicas = start_replicas(url, n, keys=keys, embedder=args.embedder, log_dir=work)
    try:
        load = run_load(replicas, key=key, bank="shared", clients=args.clients,
                        learns=args.learns, seed=args.seed, kill=0 if kill else None,
                        deadline_s=args.deadline)
    finally:
        stop_replicas(replicas)
    loc = BankSpace(url).location(tenant, "shared")
    t = time.perf_counter()
    result = audit(loc, load.episodes, embedder=args.embedder)
    audit_s = time.perf_counter() - t
    if not args.keep:
        drop_bank(loc)
    return {"replicas": n, "kill": kill, "load": load, "audit": result, "audit_s": audit_s}


def row(r: dict) -> str:
    load, a = r["load"], r["audit"]
    dup = a.duplicate_roots
    return (f"| {r['replicas']} | {'replica 0 at 50 %' if r['kill'] else '-'} | {load.requests} | "
            f"{load.server_errors} | {load.retries} | {load.unfinished} | {a.learned} / {a.sent} | "
            f"{a.nodes['task']} / {a.nodes['env']} | {dup['task']} / {dup['env']} | "
            f"{a.duplicate_consolidations} | {'yes' if a.replay_equal else 'NO'} | "
            f"{load.wall_s:.1f} | {load.throughput:.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", default="1,2,4", help="replica counts, comma-separated")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--learns", type=int, default=200, help="learns (and recalls) per client")
    ap.add_argument("--kill", action="store_true",
                    help="also SIGKILL replica 0 mid-load (counts of 2 or more)")
    ap.add_argument("--embedder", default="hashing:256")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=900.0, help="seconds per load at most")
    ap.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL", ""))
    ap.add_argument("--keep", action="store_true", help="keep the banks (default: dropped)")
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if not args.pg_url:
        print("no PostgreSQL: pass --pg-url or set DELTAMEM_TEST_PG_URL "
              "(bash scripts/postgres-test-server.sh prints one)", file=sys.stderr)
        return 2
    counts = [int(x) for x in args.replicas.split(",") if x.strip()]
    runs = [(n, False) for n in counts] + [(n, True) for n in counts if args.kill and n >= 2]
    print(f"{args.clients} clients x {args.learns} (recall + learn), 12 goals, embedder "
          f"{args.embedder}, one bank on PostgreSQL\n")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    results = []
    with tempfile.TemporaryDirectory(prefix="deltamem-replicas-") as work:
        for n, kill in runs:
            r = one(args.pg_url, n, kill, args, work)
            results.append(r)
            print(row(r), flush=True)
    failed = [r for r in results if not r["audit"].ok or r["load"].server_errors
              or r["load"].unfinished]
    for r in results:
        if r["load"].failures:
            print(f"\n{r['replicas']} replicas{' (kill)' if r['kill'] else ''}: failed attempts "
                  f"by kind: {dict(r['load'].failures)}")
    for r in failed:
        print(f"\nFAILED ({r['replicas']} replicas, kill {r['kill']}): "
              f"{json.dumps(r['audit'].to_dict(), default=str)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{"replicas": r["replicas"], "kill": r["kill"],
                        "requests": r["load"].requests, "server_errors": r["load"].server_errors,
                        "failed_attempts": r["load"].retries,
                        "failures": dict(r["load"].failures), "wall_s": r["load"].wall_s,
                        "throughput": r["load"].throughput, "changes": dict(r["load"].changes),
                        "audit_s": r["audit_s"], **r["audit"].to_dict()} for r in results],
                      f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
