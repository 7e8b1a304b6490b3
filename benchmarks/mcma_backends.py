"""MCMA's trained copilot (§3.3) on this machine: transformers vs GGUF on llama.cpp.

The memory asks its copilot for one structured memory per episode (§3.4); this script
times exactly that call on each backend of :func:`deltamem.training.copilot.load_copilot`:

* ``transformers``: base (+ SFT merge) with the DPO adapter merged, free greedy
  generation; the answer is validated afterwards;
* ``gguf``: the same weights exported once by :func:`~deltamem.training.gguf_export.export_gguf`
  and run by the local llama.cpp backend, the answer schema enforced by grammar.

The prompts are the real ones: the compact copilot prompt
(:func:`~deltamem.memories.mcma.copilot.copilot_prompt`, ``compact=True``, α = 0.5) on
the recorded household episodes of ``tests/memories/mcma/fixtures/household.jsonl`` (or
``--episodes``; cycled to ``--n``), the system message of training, the schema
``answer_schema(1)``. An answer passes when it parses and validates against that schema
and the nesting bound (one call, no repair; answers cut at ``--max-tokens`` are also
counted apart). Each backend
runs in its own process, one after the other (peak RSS is that process's); the load
average before and after each is printed with the figures, since a shared machine slows
whichever backend it runs beside.

    python benchmarks/mcma_backends.py --run runs/mcma-copilot-h40 --role success --n 5
    python benchmarks/mcma_backends.py --n 3      # no trained run: a fake LoRA adapter
    python benchmarks/mcma_backends.py --run runs/r19/copilot-hh --backends gguf \
        --episodes tests/memories/mcma/fixtures/babyai.jsonl  # transfer: BabyAI episodes

Without ``--run`` the copilot is a stand-in (``random_adapter_run``: seeded random LoRA
on q/k/v/o of the top 2 layers, ``--fake-std``), so its timings are a trained copilot's
but its answers are the near-base model's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIXTURE = (Path(__file__).resolve().parents[1] / "tests" / "memories" / "mcma" / "fixtures"
           / "household.jsonl")
BACKENDS = ("transformers", "gguf")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM`` (Linux; ``ru_maxrss`` would also count the
    parent's memory at the fork), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _messages(role: str, n: int, episodes: Path = FIXTURE) -> list[list[dict[str, str]]]:
    from deltamem.memories.mcma.copilot import copilot_prompt
    from deltamem.memories.mcma.preprocess import preprocess
    from deltamem.training.copilot import SYSTEM
    from deltamem.types import Episode

    eps = [Episode.from_dict(json.loads(x)) for x in episodes.read_text().splitlines() if x]
    same = [e for e in eps if e.success == (role == "success")] or eps
    out = []
    for i in range(n):
        ep = same[i % len(same)]
        prompt = copilot_prompt(role, ep, preprocess(ep), 0.5, 1, compact=True)  # type: ignore[arg-type]
        out.append([{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}])
    return out


def worker(a: argparse.Namespace) -> dict[str, Any]:
    """One backend in this process: load, then ``--n`` copilot answers."""
    from deltamem.errors import ExtractionError
    from deltamem.llm.structured import parse_json
    from deltamem.memories.mcma.copilot import parse_answer
    from deltamem.memories.mcma.structures import answer_schema
    from deltamem.training.copilot import load_copilot

    msgs = _messages(a.role, a.n, Path(a.episodes))
    schema = answer_schema(1)
    load_before = _load()
    t0 = time.perf_counter()
    llm = load_copilot(a.run, a.role, threads=a.threads, backend=a.worker)
    if a.worker == "gguf":
        llm.chat_tokens(msgs[0])  # type: ignore[attr-defined]  # llama.cpp loads lazily
    load_s = time.perf_counter() - t0
    times, tokens, valid, errors = [], [], 0, []
    for m in msgs:
        t = time.perf_counter()
        c = llm.complete(m, purpose="abstract", schema=schema, max_tokens=a.max_tokens)
        times.append(time.perf_counter() - t)
        tokens.append(c.completion_tokens)
        try:
            parse_answer(parse_json(f"mcma_{a.role}", c.text, schema))
            valid += 1
        except (ExtractionError, ValueError) as e:
            errors.append(str(e)[:120])
    return {"backend": a.worker, "load_s": load_s, "times": times, "tokens": tokens,
            "valid": valid, "errors": errors,
            "rss_mb": _peak_rss_mb(), "cut": sum(n >= a.max_tokens for n in tokens),
            "load_before": load_before, "load_after": _load()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", help="a copilot training run directory (default: a fake adapter)")
    p.add_argument("--role", default="success", choices=("success", "failure"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--n", type=int, default=5, help="copilot answers per backend")
    p.add_argument("--max-tokens", type=int, default=512,
                   help="completion cap (MCMA's default max_tokens is 900)")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--fake-std", type=float, default=0.05,
                   help="std of the fake adapter's B matrices (without --run)")
    p.add_argument("--episodes", default=str(FIXTURE),
                   help="recorded episodes (JSONL) the copilot abstracts; another domain's "
                        "episodes measure copilot transfer (Eq. 10), e.g. "
                        "tests/memories/mcma/fixtures/babyai.jsonl")
    p.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a)))
        return 0

    from deltamem.training.copilot import random_adapter_run
    from deltamem.training.gguf_export import export_gguf

    tmp = None
    if a.run is None:
        tmp = tempfile.TemporaryDirectory(prefix="mcma-backends-")
        a.run = tmp.name
        random_adapter_run(a.run, a.role, layers=2, seed=0, std=a.fake_std)
        what = f"fake copilot (random LoRA, top 2 layers, std {a.fake_std})"
    else:
        what = f"{a.run} ({a.role})"
    backends = [b for b in a.backends.split(",") if b]
    export_s = None
    if "gguf" in backends:  # exported here, so the gguf worker's RSS is llama.cpp's only
        t = time.perf_counter()
        path = export_gguf(a.run, a.role)
        export_s = time.perf_counter() - t
        print(f"GGUF: {path} ({path.stat().st_size / 2**20:.0f} MiB), export {export_s:.1f} s")
    rows = []
    for b in backends:
        cmd = [sys.executable, __file__, "--worker", b, "--run", a.run, "--role", a.role,
               "--threads", str(a.threads), "--n", str(a.n), "--max-tokens", str(a.max_tokens),
               "--episodes", a.episodes]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(f"{b}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    print(f"\nMCMA copilot inference: {what}; {a.n} prompts from {Path(a.episodes).name} "
          "(compact, α 0.5), "
          f"max_tokens {a.max_tokens}, {a.threads} threads, {os.cpu_count()} cores\n")
    print("| backend | load (s) | s / answer (mean, max) | tokens / answer | tokens/s "
          "| schema-valid | cut at max_tokens | peak RSS (MB) | load avg before → after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tps = sum(r["tokens"]) / sum(r["times"]) if sum(r["times"]) else 0.0
        load = f"{r['load_s']:.1f}" + (f" (+ export {export_s:.1f})"
                                       if r["backend"] == "gguf" and export_s else "")
        print(f"| {r['backend']} | {load} | {statistics.mean(r['times']):.1f}, "
              f"{max(r['times']):.1f} | {statistics.mean(r['tokens']):.0f} | {tps:.1f} "
              f"| {r['valid']}/{len(r['times'])} | {r['cut']} | {r['rss_mb']:.0f} "
              f"| {r['load_before']} → {r['load_after']} |")
    for r in rows:
        for e in r["errors"]:
            print(f"- {r['backend']} rejected: {e}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
