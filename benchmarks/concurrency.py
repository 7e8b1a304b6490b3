"""Wall time of ``deltamem run --concurrency N`` against an API model, and that the games
come out the same (issue 50).

An OpenAI-compatible server on loopback (:class:`deltamem.llm.fault_server.FaultServer`)
answers every call after ``--delay`` seconds with a scripted, deterministic policy
(:func:`~deltamem.llm.fault_server.hashed_answer`: a choice among the offered actions picked
by a hash of the request, so an answer never depends on the order calls arrive in). Each
N plays the same frozen run through the real runner: a bank is built once from the
environment's demonstrations of ``--train-games`` training games (an online run with the
``expert`` agent: no LLM call, structural extractor), then each N plays ``--games`` games of
``--split`` from a copy of it, frozen (``init_bank``, ``frozen``), with the constrained
ReAct agent and ``guide = prior``, ``--concurrency N``; the wall time is that run's alone.
Every run is compared with N = 1 game for game (task, outcome, reward, steps, recalled nodes, the
trajectory's actions). ``--storm`` adds a run at the largest N whose server answers a
block of requests in the middle with HTTP 429 + Retry-After: it must lose no episode and
give the same games.

    python benchmarks/concurrency.py --games 60 --delay 0.5 --ns 1,4,16 --storm \\
        --out runs/concurrency
    python benchmarks/concurrency.py --smoke     # 4 games, no delay, N = 1, 2

Prints a table and writes ``results.json`` under ``--out`` (a temporary folder by default).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VOLATILE = ("wall_s", "episode_id", "usage")


def env_options(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The household world generates each game on first use into ``cache_dir``; without
    one every environment (each worker's) would generate it again in a folder of its own."""
    return {"cache_dir": str(out / "games")} if args.env == "household" else {}


def build(args: argparse.Namespace, out: Path) -> Path:
    """The bank every N starts from: demonstrations of the training games."""
    from deltamem.bench import RunConfig, run

    run_dir = out / "build"
    shutil.rmtree(run_dir, ignore_errors=True)
    run(RunConfig(run_dir=run_dir, env=args.env, env_options=env_options(args, out),
                  split="train", episodes=args.train_games,
                  agent="expert", memory="deltamem", embedder=args.embedder,
                  extractor="structural", llm="scripted", max_steps=args.max_steps),
        progress=False)
    return run_dir / "bank.db"


def config(run_dir: Path, n: int, args: argparse.Namespace, url: str, bank: Path) -> Any:
    from deltamem.bench import RunConfig

    return RunConfig(
        run_dir=run_dir, env=args.env, env_options=env_options(args, run_dir.parent),
        split=args.split, episodes=args.games, frozen=True,
        init_bank=bank, memory="deltamem", embedder=args.embedder, extractor="structural",
        constrained=True, guide="prior", max_steps=args.max_steps,
        llm="openai:scripted-policy", concurrency=n,
        llm_options={"base_url": url, "backoff": 0.05, "max_retries": 3, "timeout": 30},
    )


def games(run_dir: Path) -> list[dict[str, Any]]:
    """The frozen phase's records and actions, random ids masked, timings dropped."""
    from deltamem.bench import read_episodes

    recs = [{k: v for k, v in r.items() if k not in VOLATILE}
            for r in read_episodes(run_dir / "episodes.jsonl")]
    trajs = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    actions = {t["index"]: [s[0] for s in t["steps"]] for t in trajs}
    for r in recs:
        r["actions"] = actions[r["index"]]
    return json.loads(re.sub(r"\b[0-9a-f]{32}\b", "<id>", json.dumps(recs)))


def one(n: int, args: argparse.Namespace, out: Path, storm: bool, bank: Path,
        name: str | None = None) -> dict[str, Any]:
    from deltamem.bench import read_episodes, run
    from deltamem.llm.fault_server import FaultServer, hashed_answer

    start, length = args.storm_at, args.storm_len

    def plan(i: int) -> str:
        return "429" if storm and start <= i < start + length else "ok"

    run_dir = out / (name or (f"n{n}-storm" if storm else f"n{n}"))
    shutil.rmtree(run_dir, ignore_errors=True)
    with FaultServer(plan, answer=hashed_answer, delay=args.delay,
                     retry_after=args.retry_after) as server:
        cfg = config(run_dir, n, args, server.url, bank)
        t0 = time.perf_counter()
        run(cfg, progress=False)
        wall = time.perf_counter() - t0
        requests, limited = server.count(), server.count("429")
    recs = read_episodes(run_dir / "episodes.jsonl")
    frozen_wall = sum(float(r["wall_s"]) for r in recs)
    retries = sum(int(c.get("retries", 0)) for r in recs for c in r["usage"].values())
    calls = sum(int(c["calls"]) for r in recs for c in r["usage"].values())
    return {"n": n, "storm": storm, "wall_s": round(wall, 2), "games": len(recs),
            "successes": sum(bool(r["success"]) for r in recs), "calls": calls,
            "requests": requests, "served_429": limited, "retries": retries,
            "episode_seconds": round(frozen_wall, 1), "run_dir": str(run_dir)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="household")
    p.add_argument("--split", default="seen")
    p.add_argument("--games", type=int, default=60)
    p.add_argument("--train-games", type=int, default=40)
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--delay", type=float, default=0.5, help="seconds per LLM answer")
    p.add_argument("--ns", default="1,4,16")
    p.add_argument("--embedder", default="hashing")
    p.add_argument("--storm", action="store_true", help="add a 429 storm run at the largest N")
    p.add_argument("--storm-at", type=int, default=40, help="first rate-limited request")
    p.add_argument("--storm-len", type=int, default=60, help="rate-limited requests in a row")
    p.add_argument("--retry-after", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.games, args.train_games, args.max_steps, args.delay = 4, 3, 4, 0.0
        args.ns, args.storm_at, args.storm_len, args.retry_after = "1,2", 5, 4, 0.01
    out = args.out or Path(tempfile.mkdtemp(prefix="deltamem-concurrency-"))
    out.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.ns.split(",")]
    rows, reference = [], None
    print(f"{args.games} games of {args.env} ({args.split}), {args.delay:g} s per LLM answer, "
          f"at most {args.max_steps} steps")
    t0 = time.perf_counter()
    bank = build(args, out)
    print(f"bank built from {args.train_games} demonstrations in "
          f"{time.perf_counter() - t0:.0f} s (not in the times below)")
    t0 = time.perf_counter()
    one(max(ns), argparse.Namespace(**{**vars(args), "delay": 0.0}), out, False, bank, "warmup")
    print(f"warm-up (every game generated once into the shared game cache, no delay, "
          f"untimed): "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'N':>3} {'storm':>5} {'wall s':>8} {'speed-up':>8} {'wins':>5} {'calls':>6} "
          f"{'429s':>5} {'retries':>7}  same games as N=1")
    runs = [(n, False) for n in ns] + ([(max(ns), True)] if args.storm else [])
    for n, storm in runs:
        row = one(n, args, out, storm, bank)
        got = games(Path(row["run_dir"]))
        if reference is None:
            reference = got
        row["same_as_n1"] = got == reference
        row["speedup"] = round(rows[0]["wall_s"] / row["wall_s"], 2) if rows else 1.0
        rows.append(row)
        print(f"{n:>3} {'yes' if storm else 'no':>5} {row['wall_s']:>8.1f} "
              f"{row['speedup']:>8.2f} {row['successes']:>2}/{row['games']:<2} "
              f"{row['calls']:>6} {row['served_429']:>5} {row['retries']:>7}  "
              f"{'yes' if row['same_as_n1'] else 'NO'}", flush=True)
    (out / "results.json").write_text(json.dumps({"args": {k: str(v) for k, v in
                                                            vars(args).items()},
                                                   "rows": rows}, indent=2) + "\n")
    print(f"results: {out / 'results.json'}")
    return 0 if all(r["same_as_n1"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
