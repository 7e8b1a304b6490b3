"""How long the agent's guide takes to advise on ScienceWorld's long action lists.

A ScienceWorld decision offers 500-3,000 admissible actions, and the guide
(:mod:`deltamem.agents.guide`) compares each with the steps of every recalled procedure
at every decision. For each task family given, the recalled procedure is the gold path of
one ``train`` variation (what a bank built from demonstrations holds, instance numbers
dropped) and the episode a ``seen`` variation played as the model-free agent plays it: at
each step the guide is asked for advice with that state's admissible actions and the
first advised action is taken (the first admissible one when nothing is advised). Where the
recalled variation's objects or places are not this one's, the guide searches and
back-tracks, which is where its comparisons add up.

Timed is ``Guide.advise`` alone, per decision, two ways in the same run:

* ``cached``: as the agent runs it (the pure comparisons are cached across decisions and
  whether a recalled thing is absent is kept while the offers stay);
* ``cold``: every cache emptied before each decision, so nothing carries over from the
  last one (the cost of a decision before the caches, commit c95eda6, is higher still:
  the caches also serve repeats within one decision).

Both must give the same advice at every step (checked; the script exits 1 otherwise).
The last column digests the advice of the whole episode, so that runs of two versions of
the guide can be compared (``PYTHONPATH=<other checkout>/src python benchmarks/guide.py``:
a guide without caches times both columns alike).

Usage::

    python benchmarks/guide.py [--tasks boil,melt,power-component] [--steps 30]

Needs ScienceWorld (``pip install 'deltamem[envs]'``) and Java 17.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time

from deltamem.agents.guide import Guide, abstract_action, part_names, realises
from deltamem.envs.scienceworld import ScienceWorldEnv


def clear_caches(guide: Guide | None = None) -> None:
    """Empty the module's caches and, given a guide, its per-decision answers."""
    for f in (abstract_action, part_names, realises):
        getattr(f, "cache_clear", lambda: None)()  # a guide without caches: nothing to clear
    if guide is not None:
        guide._absent_for = None


def digest(advice: list[str]) -> str:
    return hashlib.sha1("\n".join(advice).encode()).hexdigest()[:10]


def play(env: ScienceWorldEnv, task_id: str, recall: str, steps: int,
         cold: bool) -> tuple[list[float], list[str], int]:
    task = env.reset(task_id)
    guide = Guide(recall, task.goal)
    taken: list[str] = []
    offered: set[str] = set()
    times, advice = [], []
    largest = 0
    for _ in range(steps):
        admissible = env.admissible_actions()
        largest = max(largest, len(admissible))
        offered.update(admissible)
        if cold:
            clear_caches(guide)
        t = time.perf_counter()
        a = guide.advise(admissible, taken, offered)
        times.append(time.perf_counter() - t)
        advice.append(repr(a))
        action = a.actions[0] if a.actions else admissible[0]
        if env.step(action).done:
            break
        taken.append(action)
    return times, advice, largest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default="boil,melt,power-component",
                   help="comma-separated ScienceWorld task families")
    p.add_argument("--steps", type=int, default=30, help="decisions timed per family")
    args = p.parse_args(argv)
    env = ScienceWorldEnv(tasks=args.tasks)
    print("| family | decisions | admissible (most) | cold ms p50 | cached ms p50 "
          "| cold ÷ cached | same advice | advice digest |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    try:
        for family in args.tasks.split(","):
            train = env.task_ids("train")
            seen = env.task_ids("seen")
            source = next(t for t in train if t.startswith(f"{family}:"))
            target = next(t for t in seen if t.startswith(f"{family}:"))
            recalled = env.gold_actions(source)
            recall = "Procedure:\n" + "\n".join(
                f"{i}. {abstract_action(a)}" for i, a in enumerate(recalled, 1))
            cold, advice_cold, largest = play(env, target, recall, args.steps, True)
            clear_caches()
            warm, advice_warm, _ = play(env, target, recall, args.steps, False)
            same = advice_cold == advice_warm
            ok &= same
            c, w = statistics.median(cold) * 1e3, statistics.median(warm) * 1e3
            print(f"| {family} | {len(warm)} | {largest} | {c:.1f} | {w:.1f} | "
                  f"{c / w:.1f}x | {'yes' if same else 'NO'} | "
                  f"{digest(advice_warm)} |")
    finally:
        env.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
