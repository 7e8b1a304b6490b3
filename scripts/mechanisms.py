"""What DeltaMem's own mechanisms had to say in each evaluation episode of a run.

    python scripts/mechanisms.py RUN_DIR [RUN_DIR ...] [--phase frozen]

For each run (any memory; DeltaMem's trees give most of the columns) and evaluation phase,
over the episodes that kept ``trajectories.jsonl``:

* ``task chain`` / ``env chain``: mean number of nodes in the recalled root-to-match chains
  (1 = a root alone, so no residual delta reached the agent);
* ``warnings``: episodes whose recall held a FAILURE node or warning (what the failure
  penalty ε ranks below successes);
* ``knows object``: episodes where the recall named a place where an object of the goal's
  kind was seen (Env-Tree knowledge lines, or a recalled trajectory's observations) -- the
  only way the Env-Tree can act on the household search;
* ``variants``: episodes where the recalled procedure did the object's pick-up step in more
  than one place (a chain's deltas: the search tries those places first);
* ``found where told``: of the episodes where the object was picked up, those where it was
  picked up at a kind of place the recall named (knowledge or variants);
* success and mean search steps (steps before the goal's object was picked up) split by
  ``knows object``.

It reads the run directory only (no model, no environment) and re-reads each recall with
the agent's own guide (:class:`deltamem.agents.guide.Guide`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from deltamem.agents.guide import Guide, abstract_action
from deltamem.analysis.trajectories import search_steps
from deltamem.bench import read_episodes
from deltamem.bench.results import read_trajectories

VERBS = ("go", "take", "put", "move", "open", "close", "heat", "cool", "clean", "use",
         "examine", "look", "toggle", "slice")


def episode_facts(rec: dict[str, Any], traj: dict[str, Any]) -> dict[str, Any]:
    """The mechanism columns of one episode."""
    details = (rec.get("recall") or {}).get("details") or {}
    items = (rec.get("recall") or {}).get("items") or []
    guide = Guide(traj["recall"], traj["goal"])
    known = guide.known_places()
    steps = guide.steps(VERBS)
    obj = guide.goal_object
    takes = [k for k, s in enumerate(steps) if s.split()[:1] == ["take"] and obj
             and obj in s.split()]
    variants: frozenset[str] = frozenset()
    if takes:
        variants = guide.alternative_places(steps, takes[0])
    actions = [s[0] for s in traj["steps"] if s[2]]
    n = search_steps(traj["goal"], actions)
    where = None
    if n is not None:
        parts = abstract_action(actions[n]).split(" from ", 1)
        where = parts[1] if len(parts) == 2 else None
    chain = {t: len((details.get(t) or {}).get("chain") or []) for t in ("task", "env")}
    return {
        "success": bool(rec["success"]),
        "task_chain": chain["task"] if "task" in details else None,
        "env_chain": chain["env"] if "env" in details else None,
        "warnings": any(i.get("role") == "warning" for i in items),
        "knows": bool(known),
        "variants": len(variants) > 0,
        "search": n,
        "found_where_told": None if where is None else where in (known | variants),
    }


def _mean(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.1f}" if xs else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--phase", default=None,
                    help="only this phase (default: every evaluation phase)")
    args = ap.parse_args(argv)
    print("| run | phase | episodes | task chain | env chain | warnings | knows object | "
          "variants | found where told | success: knows / not | search steps: knows / not |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in args.runs:
        recs = read_episodes(d / "episodes.jsonl")
        trajs = read_trajectories(d)
        phases = sorted({r["phase"] for r in recs if r["phase"] != "build"})
        for ph in phases:
            if args.phase and ph != args.phase:
                continue
            facts = [episode_facts(r, trajs[r["index"]]) for r in recs
                     if r["phase"] == ph and r["index"] in trajs]
            if not facts:
                continue
            tc = [f["task_chain"] for f in facts if f["task_chain"]]
            ec = [f["env_chain"] for f in facts if f["env_chain"]]
            knows = [f for f in facts if f["knows"]]
            not_ = [f for f in facts if not f["knows"]]
            told = [f["found_where_told"] for f in facts if f["found_where_told"] is not None]

            def rate(group: list[dict[str, Any]]) -> str:
                return f"{100 * sum(f['success'] for f in group) / len(group):.0f} %" \
                    if group else "-"

            print(f"| {d.name} | {ph} | {len(facts)} | {_mean(tc)} | {_mean(ec)} | "
                  f"{sum(f['warnings'] for f in facts)} | {len(knows)} | "
                  f"{sum(f['variants'] for f in facts)} | {sum(told)}/{len(told)} | "
                  f"{rate(knows)} / {rate(not_)} | "
                  f"{_mean([f['search'] for f in knows if f['search'] is not None])} / "
                  f"{_mean([f['search'] for f in not_ if f['search'] is not None])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
