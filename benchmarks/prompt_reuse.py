"""Prompt tokens the local model evaluates per step, with the history trimmed one step at a
time (the old rule) against trimmed in blocks (``deltamem.agents.prompts.history_start``).

The bundled SmolLM2-135M keeps its KV cache between calls and evaluates only the tokens
after the longest prefix it has seen. Trimming the history by one step at every step
moves that prefix's end to just after the task line, so once the history is full every
step re-reads it whole; trimming in blocks keeps the prefix until the next block is
dropped. Both rules play the same household games with the same agent (constrained
choice, guide ``prior``, the main job's settings) and print, per rule: model calls,
prompt tokens per call, tokens evaluated per call (prompt tokens past the prefix shared
with the previous call), seconds per call and per step, and the games' outcomes side by
side (the prompts differ once the history is full, so choices may differ).

    python benchmarks/prompt_reuse.py --games 6 --history-chars 6000 --listed 50,0
    python benchmarks/prompt_reuse.py --games 20 --listed 0 --cue-at end,start
    python benchmarks/prompt_reuse.py --smoke          # two short games, small budget

``--cue-at end,start`` compares where the prompt asks for the answer instead (after the
history, or before the task: :mod:`deltamem.agents.prompts`), ``--flash-attn auto,off``
the attention kernel; both play every game with each setting in turn.

Needs the bundled model (``bash scripts/setup.sh main``). ``--bank`` plays with a
DeltaMem bank (e.g. ``runs/demo/deltamem/bank-frozen.db``) instead of no memory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from deltamem.agents import ReActAgent
from deltamem.agents import prompts as agent_prompts
from deltamem.envs.household import HouseholdEnv
from deltamem.llm.local import LocalLLM
from deltamem.types import Recall


def front_start(steps: Any, max_chars: int) -> int:
    """The old rule: the newest steps that fit in ``max_chars`` (at least the last one)."""
    used, start = 0, len(steps)
    for i in range(len(steps) - 1, -1, -1):
        cost = len(agent_prompts.render_step(steps[i])) + 1
        if start < len(steps) and used + cost > max_chars:
            break
        used += cost
        start = i
    return start


class CountingLLM(LocalLLM):
    """The bundled model, recording per choice: prompt tokens, tokens past the prefix shared
    with the previous call, seconds."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.calls: list[tuple[int, int, float]] = []
        self._prev: list[int] = []

    def _choose(self, messages, choices, temperature, purpose):  # type: ignore[override]
        tokens = self.chat_tokens(messages)
        same = 0
        for a, b in zip(self._prev, tokens, strict=False):
            if a != b:
                break
            same += 1
        t0 = time.perf_counter()
        out = super()._choose(messages, choices, temperature, purpose)
        self.calls.append((len(tokens), len(tokens) - same, time.perf_counter() - t0))
        self._prev = tokens
        return out


def open_bank(args: argparse.Namespace) -> Any:
    """The ``--bank`` DeltaMem bank, read-only, or ``None`` (no memory)."""
    if not args.bank:
        return None
    from deltamem.embed import make_embedder
    from deltamem.memories.deltamem import DeltaMem

    return DeltaMem.open(args.bank, embedder=make_embedder("minilm"), readonly=True)


def main_job_agent(llm: LocalLLM, args: argparse.Namespace, listed: int,
                   cue_at: str = "start") -> ReActAgent:
    """The main job's agent: constrained choice with the ``prior`` guide."""
    return ReActAgent(llm, domain="alfworld", constrained=True, guide="prior",
                      history_chars=args.history_chars, max_steps=args.max_steps,
                      max_listed_actions=listed, cue_at=cue_at)  # type: ignore[arg-type]


def play(rule: str, listed: int, args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    agent_prompts.history_start = (  # type: ignore[assignment]
        front_start if rule == "front" else ORIGINAL)
    llm = CountingLLM(n_ctx=4096, n_threads=args.threads)
    agent = main_job_agent(llm, args, listed)
    memory = open_bank(args)
    outcomes, steps, t0 = [], 0, time.perf_counter()
    with HouseholdEnv(cache_dir=cache) as env:
        for task_id in env.task_ids(args.split, seed=args.seed)[: args.games]:
            task = env.reset(task_id)
            recall = memory.recall(task) if memory is not None else Recall()
            ep = agent.play(env, task, recall)
            outcomes.append((task_id, ep.success, len(ep.steps)))
            steps += len(ep.steps)
    wall = time.perf_counter() - t0
    agent_prompts.history_start = ORIGINAL  # type: ignore[assignment]
    return {"calls": llm.calls, "outcomes": outcomes, "steps": steps, "wall": wall}


ORIGINAL = agent_prompts.history_start

FLASH = {"auto": None, "on": True, "off": False}


SETTINGS = {
    # option: (its values, the table's first column, the title, model options, agent options)
    "cue_at": (agent_prompts.CUE_PLACES, "answer cue", "Answer cue",
               lambda v: {}, lambda v: {"cue_at": v}),
    "flash_attn": (tuple(FLASH), "flash attention", "Attention kernel",
                   lambda v: {"flash_attn": FLASH[v]}, lambda v: {}),
}
"""The comparisons played game by game instead of the trimming rules (``--cue-at``,
``--flash-attn``); the first listed when both are given."""


def play_settings(option: str, values: list[str], args: argparse.Namespace,
                  cache: Path) -> dict[str, Any]:
    """Every game played once per value of ``option``, the values taking turns per game
    (each with its own model, so each keeps its own KV cache)."""
    _, _, _, llm_options, agent_options = SETTINGS[option]
    llms = {v: CountingLLM(n_ctx=4096, n_threads=args.threads, **llm_options(v))
            for v in values}
    listed = int(args.listed.split(",")[0])
    agents = {v: main_job_agent(llm, args, listed, **agent_options(v))
              for v, llm in llms.items()}
    return take_turns(llms, agents, args, cache)


def take_turns(llms: dict[str, CountingLLM], agents: dict[str, ReActAgent],
               args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    """Each game played by every agent in turn; per agent: seconds of its first and later
    calls, tokens evaluated per call, steps, wall seconds, and each game's actions."""
    settings = list(agents)
    memory = open_bank(args)
    out = {f: {"first": [], "later": [], "evaluated": [], "steps": 0, "wall": 0.0, "games": []}
           for f in settings}
    with HouseholdEnv(cache_dir=cache) as env:
        for task_id in env.task_ids(args.split, seed=args.seed)[: args.games]:
            for f in settings:
                task = env.reset(task_id)
                recall = memory.recall(task) if memory is not None else Recall()
                n0, t0 = len(llms[f].calls), time.perf_counter()
                ep = agents[f].play(env, task, recall)
                r = out[f]
                r["wall"] += time.perf_counter() - t0
                calls = llms[f].calls[n0:]
                r["first"] += [c[2] for c in calls[:1]]
                r["later"] += [c[2] for c in calls[1:]]
                r["evaluated"] += [c[1] for c in calls[1:]]
                r["steps"] += len(ep.steps)
                r["games"].append((task_id, ep.success, [s.action for s in ep.steps]))
    return out


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f}" if xs else "-"


def print_turns(settings: list[str], out: dict[str, Any], what: str) -> None:
    print(f"| {what} | model calls | s / first call of a game (median) | "
          "evaluated tokens / later call (median, p90) | "
          "s / later call (median) | s / step | games won | games with every choice as "
          f"`{settings[0]}` |")
    print("|---|---|---|---|---|---|---|---|")
    base = out[settings[0]]["games"]
    for f in settings:
        r = out[f]
        same = sum(a[2] == b[2] for a, b in zip(base, r["games"], strict=True))
        won = sum(1 for g in r["games"] if g[1])
        ev = sorted(r["evaluated"])
        evaluated = (f"{statistics.median(ev):.0f}, {ev[min(len(ev) - 1, int(0.9 * len(ev)))]}"
                     if ev else "-")
        print(f"| {f} | {len(r['first']) + len(r['later'])} | {_med(r['first'])} | "
              f"{evaluated} | {_med(r['later'])} | {r['wall'] / max(1, r['steps']):.3f} | "
              f"{won}/{len(r['games'])} | {same}/{len(base)} |")
    for f in settings[1:]:
        for a, b in zip(base, out[f]["games"], strict=True):
            if a[2] != b[2]:
                first = next((i for i, (x, y) in enumerate(zip(a[2], b[2], strict=False))
                              if x != y), min(len(a[2]), len(b[2])))
                print(f"- {a[0]}: `{f}` first chooses otherwise at step {first + 1} "
                      f"({'won' if a[1] else 'lost'} in {len(a[2])} steps as `{settings[0]}`, "
                      f"{'won' if b[1] else 'lost'} in {len(b[2])} as `{f}`)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--games", type=int, default=6)
    ap.add_argument("--split", default="unseen")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--history-chars", type=int, default=6000)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bank", help="a DeltaMem bank to recall from (default: no memory)")
    ap.add_argument("--cache-dir", help="household game cache (default: a temporary one)")
    ap.add_argument("--listed", default="50",
                    help="comma-separated max_listed_actions values to compare (0: the "
                         "admissible actions are not listed in the prompt)")
    ap.add_argument("--flash-attn", default="",
                    help="comma-separated llama.cpp attention settings to compare instead of "
                         "the trimming rules: auto, on, off (first listed: the reference)")
    ap.add_argument("--cue-at", default="",
                    help="comma-separated answer-cue positions to compare instead of the "
                         "trimming rules: start, end (first listed: the reference)")
    ap.add_argument("--smoke", action="store_true", help="two 6-step games, 600 characters")
    args = ap.parse_args(argv)
    if args.smoke:
        args.games, args.max_steps, args.history_chars = 2, 6, 600
    for option, (allowed, what, title, _, _) in SETTINGS.items():
        if not getattr(args, option):
            continue
        values = [v.strip() for v in getattr(args, option).split(",")]
        if bad := [v for v in values if v not in allowed]:
            ap.error(f"--{option.replace('_', '-')} takes {', '.join(allowed)}; "
                     f"not {', '.join(bad)}")
        with tempfile.TemporaryDirectory() as tmp:
            out = play_settings(option, values, args, Path(args.cache_dir or tmp))
        print(f"# {title}: {args.games} household {args.split} games (seed "
              f"{args.seed}), history {args.history_chars} chars, {args.threads} thread(s), "
              f"{'bank ' + args.bank if args.bank else 'no memory'}\n")
        print_turns(values, out, what)
        return 0
    listed = [int(x) for x in args.listed.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache_dir or tmp)
        results = {(rule, n): play(rule, n, args, cache)
                   for n in listed for rule in ("front", "block")}
    print(f"# Prompt reuse: {args.games} household {args.split} games (seed {args.seed}), "
          f"history {args.history_chars} chars, {args.threads} thread(s), "
          f"{'bank ' + args.bank if args.bank else 'no memory'}\n")
    print("| history trimmed | actions listed (max) | model calls | prompt tokens / call | "
          "evaluated tokens / call (median, p90) | s / call (median) | s / step | games won |")
    print("|---|---|---|---|---|---|---|---|")
    for (rule, n), r in results.items():
        calls = r["calls"]
        if not calls:
            print(f"| {rule} | {n} | 0 | - | - | - | - | - |")
            continue
        ev = sorted(c[1] for c in calls)
        p90 = ev[min(len(ev) - 1, int(0.9 * len(ev)))]
        won = sum(1 for _, s, _ in r["outcomes"] if s)
        print(f"| {'one step at a time' if rule == 'front' else 'in blocks'} | {n} | "
              f"{len(calls)} | "
              f"{statistics.mean(c[0] for c in calls):.0f} | "
              f"{statistics.median(ev):.0f}, {p90} | "
              f"{statistics.median(c[2] for c in calls):.2f} | "
              f"{r['wall'] / max(1, r['steps']):.2f} | {won}/{len(r['outcomes'])} |")
    base = results[("front", listed[0])]["outcomes"]
    for key, r in results.items():
        if key == ("front", listed[0]):
            continue
        differ = [a[0] for a, b in zip(base, r["outcomes"], strict=True) if a[1] != b[1]]
        print(f"\nGames whose outcome differs from one-step trimming with {listed[0]} listed, "
              f"for {key[0]} trimming with {key[1]} listed: {len(differ)} of {len(base)}"
              + (f" ({', '.join(differ)})" if differ else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
