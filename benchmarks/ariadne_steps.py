"""What a step of the Ariadne agent costs the local model: prompt tokens sent, prompt tokens
evaluated (past the prefix the KV cache already holds), generated tokens and seconds.

Each step makes a planning call and a decision call (``deltamem.agents.ariadne``). The
bundled SmolLM2-135M evaluates only the tokens after the longest prefix it holds, so what a
step costs depends on how much of the decision's prompt repeats the planner's. The script
plays TextWorld games through ``deltamem.bench.run`` (the real runner, memory AriGraph by
default) on one thread and counts, at the engine, the tokens it decodes. It measures the
agent it imports: point ``PYTHONPATH`` at another checkout's ``src`` to measure that
version's prompts on the same games (a before/after of a prompt change).

    python benchmarks/ariadne_steps.py --env textworld:cleaning --split seen --games 3 \\
        --max-steps 6
    python benchmarks/ariadne_steps.py --smoke            # one game, two steps

Needs the bundled model and TextWorld (``bash scripts/setup.sh``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def count_decoded() -> dict[str, int]:
    """Wrap the prebuilt engine's cache feed so that every decoded token is counted."""
    from deltamem.llm import llama_prebuilt

    counts = {"decoded": 0}
    feed = llama_prebuilt.PrebuiltEngine._feed

    def counting(self: Any, tokens: Any) -> None:
        tokens = list(tokens)
        same, limit = 0, min(len(self._cached), len(tokens) - 1)
        while same < limit and self._cached[same] == tokens[same]:
            same += 1
        counts["decoded"] += len(tokens) - same
        feed(self, tokens)

    llama_prebuilt.PrebuiltEngine._feed = counting  # type: ignore[method-assign]
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="textworld:cleaning")
    ap.add_argument("--split", default="seen", help="a development split (default: seen)")
    ap.add_argument("--games", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--memory", default="arigraph")
    ap.add_argument("--cache-dir", default=None, help="TextWorld game cache (default: the "
                    "adapter's)")
    ap.add_argument("--smoke", action="store_true", help="one game, two steps")
    args = ap.parse_args(argv)
    if args.smoke:
        args.games, args.max_steps = 1, 2

    from deltamem.bench import RunConfig, read_episodes, run

    counts = count_decoded()
    with tempfile.TemporaryDirectory() as tmp:
        env_options: dict[str, Any] = {"n_games": args.games}
        if args.cache_dir:
            env_options["cache_dir"] = args.cache_dir
        cfg = RunConfig(run_dir=Path(tmp) / "run", env=args.env, split=args.split,
                        episodes=args.games, memory=args.memory, llm="local",
                        embedder="minilm", constrained=True, max_steps=args.max_steps,
                        repeat_limit=2, env_options=env_options,
                        memory_options={"history": 2, "plan_steps": 2},
                        llm_options={"n_threads": 1})
        t0 = time.perf_counter()
        run(cfg, progress=False)
        wall = time.perf_counter() - t0
        recs = read_episodes(Path(tmp) / "run" / "episodes.jsonl")
    steps = sum(r["steps"] for r in recs) or 1
    usage = [v for r in recs for v in r["usage"].values() if isinstance(v, dict)]
    sent = sum(int(v.get("prompt_tokens", 0)) for v in usage)
    generated = sum(int(v.get("completion_tokens", 0)) for v in usage)
    calls = sum(int(v.get("calls", 0)) for v in usage)
    evaluated = counts["decoded"] - generated  # each generated token is decoded once
    print(f"{args.env} ({args.split}), memory {args.memory}, {len(recs)} games, "
          f"{steps} steps, {calls} model calls, one thread")
    print("| prompt tokens sent / step | evaluated / step | generated / step | s / step "
          "| outcomes (reward) |")
    # s / step: the whole run's wall time (model load and game generation included)
    print("|---|---|---|---|---|")
    print(f"| {sent / steps:.0f} | {evaluated / steps:.0f} | {generated / steps:.0f} | "
          f"{wall / steps:.2f} | {json.dumps([r['reward'] for r in recs])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
