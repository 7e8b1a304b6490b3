"""Step and reset latency of the household world (``HouseholdEnv``) over a fixed stream.

The stream: the walkthrough of the first ``--games`` task ids of ``seen`` and of ``unseen``
(seed 0; six ids cover the six task types), every game reset once per pass. Games are
generated first (not timed) into ``--cache-dir`` (default: a temporary directory), so the
figures are for a warm game cache. Each pass runs in a fresh Python process, so nothing
parsed in memory by an earlier pass is reused:

* ``first``: the first play of the games from this cache directory (whatever the engine
  writes beside a game on first play is written here);
* ``warm``: a new process playing the same stream again (the usual case: a run on games
  played before).

Prints median and p90 of ``reset`` and ``step`` (milliseconds) per pass, and the pass's
wall time. Requires ``textworld`` and ``alfworld`` (``pip install 'deltamem[envs]'``).

    python benchmarks/household_world.py                 # 6 games x seen/unseen, 2 passes
    python benchmarks/household_world.py --quick         # 1 game x seen/unseen, 2 passes
    python benchmarks/household_world.py --cache-dir ~/.cache/deltamem/household --repeat 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def stream(games: int) -> list[str]:
    """The fixed task ids: the first ``games`` ids of ``seen`` then of ``unseen`` (seed 0)."""
    from deltamem.envs.household import HouseholdEnv

    env = HouseholdEnv(n=games)
    return [t for split in ("seen", "unseen") for t in env.task_ids(split, 0)]


def prepare(cache_dir: Path, task_ids: list[str]) -> None:
    """Generate the games (untimed)."""
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=cache_dir) as env:
        for task_id in task_ids:
            env.locate(task_id)


def play(cache_dir: Path, task_ids: list[str], repeat: int) -> dict[str, list[float]]:
    """Reset and walk every game ``repeat`` times; seconds per reset and per step."""
    from deltamem.envs.household import HouseholdEnv

    resets: list[float] = []
    steps: list[float] = []
    wins = 0
    with HouseholdEnv(cache_dir=cache_dir) as env:
        for _ in range(repeat):
            for task_id in task_ids:
                start = time.perf_counter()
                env.reset(task_id)
                resets.append(time.perf_counter() - start)
                for command in env.solution() or []:
                    start = time.perf_counter()
                    t = env.step(command)
                    steps.append(time.perf_counter() - start)
                wins += int(t.success)
    return {"reset": resets, "step": steps, "wins": [wins]}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def child(args: argparse.Namespace) -> int:
    task_ids = json.loads(args.child)
    start = time.perf_counter()
    result = play(Path(args.cache_dir), task_ids, args.repeat)
    result["wall"] = [time.perf_counter() - start]
    print(json.dumps(result))
    return 0


def run_pass(cache_dir: Path, task_ids: list[str], repeat: int) -> dict[str, list[float]]:
    """One pass in a fresh interpreter (same ``sys.path`` / ``PYTHONPATH`` as this one)."""
    out = subprocess.run(
        [sys.executable, __file__, "--cache-dir", str(cache_dir), "--repeat", str(repeat),
         "--child", json.dumps(task_ids)],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=6, help="games per split (default 6)")
    parser.add_argument("--passes", type=int, default=2,
                        help="fresh-process passes over the stream (default 2: first, warm)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="times each pass plays the stream in its process (default 1)")
    parser.add_argument("--cache-dir", default=None,
                        help="game cache directory (default: a temporary one)")
    parser.add_argument("--quick", action="store_true", help="1 game per split")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return child(args)
    if args.quick:
        args.games = 1
    with tempfile.TemporaryDirectory(prefix="household-bench-") as tmp:
        cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else Path(tmp)
        task_ids = stream(args.games)
        prepare(cache_dir, task_ids)
        print(f"household world: {len(task_ids)} games (walkthroughs), repeat {args.repeat}, "
              f"cache {'given' if args.cache_dir else 'temporary'}")
        print()
        print("| pass | resets | reset p50 ms | reset p90 ms | steps | step p50 ms "
              "| step p90 ms | wins | wall s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for number in range(args.passes):
            result = run_pass(cache_dir, task_ids, args.repeat)
            name = "first" if number == 0 else "warm" if number == 1 else f"warm {number}"
            resets, steps = result["reset"], result["step"]
            print(f"| {name} | {len(resets)} | {1000 * statistics.median(resets):.1f} "
                  f"| {1000 * quantile(resets, 0.9):.1f} | {len(steps)} "
                  f"| {1000 * statistics.median(steps):.1f} | {1000 * quantile(steps, 0.9):.1f} "
                  f"| {int(result['wins'][0])}/{len(resets)} | {result['wall'][0]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
