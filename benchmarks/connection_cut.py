"""A cut PostgreSQL connection: ``pg_terminate_backend`` of the bank's backend mid-learn and
mid-recall, and what the caller sees.

One DeltaMem bank on PostgreSQL learns a stream of episodes and recalls after each one; a
second thread terminates the bank's backend (``pg_terminate_backend``) every
``--every`` seconds on average (random), ``--cuts`` times. Every call's outcome is counted:
ok, or an error (its text, grouped). Afterwards the bank is checked: its invariants (see
``kill_loop.invariants``), and it must equal a bank that learned exactly the episodes the
ledger says were learned, in that order (nothing half-written). A call that fails is sent
again (as a caller told of an error would), so the bank must end equal to an uninterrupted run.

    python benchmarks/connection_cut.py [--cuts 40] [--episodes 60] [--every 0.15]
        [--pg-url postgresql://…]   # default: $DELTAMEM_TEST_PG_URL
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kill_loop import Stores, episode, invariants, open_mem, snapshot


def backend_pid(mem) -> int:
    return int(mem.store._exec("SELECT pg_backend_pid()").fetchone()[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cuts", type=int, default=40)
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--every", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pg-url", default=os.environ.get("DELTAMEM_TEST_PG_URL"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not args.pg_url:
        print("needs --pg-url or $DELTAMEM_TEST_PG_URL", file=sys.stderr)
        return 2
    import psycopg

    stores = Stores(Path("."), args.pg_url)
    stream = [episode(i) for i in range(args.episodes)]
    ref = stores.fresh("postgres", "cutref")
    mem = open_mem(ref)
    for ep in stream:
        mem.learn(ep)
    mem.close()
    want = snapshot(ref)
    stores.drop(ref)

    loc = stores.fresh("postgres", "cut")
    mem = open_mem(loc)
    rng = random.Random(args.seed)
    outcomes: Counter[str] = Counter()
    cuts = 0
    done = threading.Event()
    admin = psycopg.connect(args.pg_url.split("?")[0], autocommit=True)

    def cutter() -> None:
        nonlocal cuts
        while cuts < args.cuts and not done.is_set():
            time.sleep(rng.expovariate(1.0 / args.every))
            pid = pid_box[0]
            if pid:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                cuts += 1

    pid_box = [backend_pid(mem)]
    th = threading.Thread(target=cutter, daemon=True)
    th.start()
    failed: list[int] = []
    t0 = time.perf_counter()
    rounds = 0
    while cuts < args.cuts and time.perf_counter() - t0 < 600:
        rounds += 1
        for i, ep in enumerate(stream):
            for call in ("learn", "recall"):
                for _attempt in range(5):  # a caller told of an error sends the call again
                    try:
                        if call == "learn":
                            mem.learn(ep)
                        else:
                            mem.recall(ep.task)
                        outcomes[f"{call} ok" + (" (sent again)" if _attempt else "")] += 1
                        break
                    except Exception as e:
                        text = re.sub(r"\d+", "N", str(e))
                        text = re.sub(r"bank \S+", "bank B", text)[:150]
                        outcomes[f"{call} error: {type(e).__name__}: {text}"] += 1
                        if call == "learn":
                            failed.append(i)
                with_pid = None
                try:
                    with_pid = backend_pid(mem)
                except Exception:
                    outcomes["pid query error"] += 1
                pid_box[0] = with_pid or 0
            if cuts >= args.cuts:
                break
        if rounds >= 3:
            break
    done.set()
    th.join(timeout=5)
    mem.close()
    bad = invariants(loc)
    # nothing half-written: the bank equals a replay of what its ledger says was learned
    from kill_loop import records

    ledger = [r["episode_id"] for r in records(loc) if r["type"] == "learned"]
    replay = stores.fresh("postgres", "cutreplay")
    m2 = open_mem(replay)
    by_id = {ep.id: ep for ep in stream}
    for eid in ledger:
        m2.learn(by_id[eid])
    m2.close()
    replay_equal = snapshot(replay) == snapshot(loc)
    stores.drop(replay)
    # learning the stream again completes the bank
    mem = open_mem(loc)
    for ep in stream:
        mem.learn(ep)
    mem.close()
    final_equal = snapshot(loc) == want
    stores.drop(loc)
    admin.close()
    result = {"cuts": cuts, "outcomes": dict(outcomes), "invariant_failures": bad,
              "learned_after_cuts": len(ledger), "replay_of_ledger_equal": replay_equal,
              "final_equal_to_uninterrupted": final_equal}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0 if not bad and replay_equal and final_equal else 1


if __name__ == "__main__":
    sys.exit(main())
