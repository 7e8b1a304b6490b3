"""Information gain of recalled vs random context (decocted experience §4, Prop. 4.1).

Opens the bank of a finished lesson-memory run (``lessons``, ``lessons-raw``,
``lessons-kmeans``, ``concept-tree``) read-only through the run's own settings,
takes ``--tasks`` tasks of the run's environment and split (the run's seed
order, after the ones the run played, so the bank has not learned from them),
and for each estimates by Monte Carlo with the local model

    Ĥ(Y|x), Ĥ(Y|x, recalled context), Ĥ(Y|x, random context of the same size)

and prints Î = Ĥ(Y|x) − Ĥ(Y|x,c) per task and on average (nats), plus the share
of tasks where the recalled context gains more than the random one. See
:mod:`deltamem.analysis.infogain` for the estimator.

    python benchmarks/infogain.py runs/cmp/lessons --tasks 10 --samples 8 --max-tokens 48

Cost on 2 cores: 3 × samples × max-tokens generated tokens per task (one thread:
~40 tokens/s with SmolLM2-135M), i.e. ~30 s per task with the defaults.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from deltamem.analysis.infogain import compare_contexts
from deltamem.bench.config import RunConfig
from deltamem.bench.rundir import BANK_FILE
from deltamem.embed.factory import make_embedder
from deltamem.envs.registry import make_env
from deltamem.llm.local import LocalLLM
from deltamem.memories import make_memory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a finished run of a lesson memory")
    ap.add_argument("--tasks", type=int, default=10, help="tasks to estimate on")
    ap.add_argument("--samples", type=int, default=8, help="Monte-Carlo samples per estimate")
    ap.add_argument("--max-tokens", type=int, default=48, help="token cap per sample")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--offset", type=int, default=None,
                    help="skip this many tasks of the run's stream (default: the episodes the "
                         "run played, so the tasks are ones the bank did not learn from)")
    ap.add_argument("--json", type=Path, help="also write the per-task rows here")
    args = ap.parse_args(argv)
    if args.samples < 2:
        ap.error("--samples must be at least 2 (an entropy estimate needs two samples)")

    cfg = RunConfig.from_json_file(args.run_dir / "config.json")
    bank = args.run_dir / BANK_FILE
    if not bank.exists():
        print(f"{bank} does not exist: is {args.run_dir} a run of a lesson memory?",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        # a private copy: recall never writes, but a copy makes that certain
        copy = Path(tmp) / BANK_FILE
        shutil.copy(bank, copy)
        for suffix in ("-wal", "-shm"):
            side = bank.with_name(bank.name + suffix)
            if side.exists():
                shutil.copy(side, copy.with_name(copy.name + suffix))
        env = make_env(cfg.env, **cfg.env_options)
        try:
            domain = cfg.domain or env.domain  # as the runner picks it
            stream = env.task_ids(cfg.split, cfg.seed)
            offset = args.offset if args.offset is not None else _played(args.run_dir)
            ids = stream[offset : offset + args.tasks]
            if not ids:
                print(f"the {cfg.split} stream has {len(stream)} tasks; none left after "
                      f"{offset}: pass --offset", file=sys.stderr)
                return 2
            tasks = [env.reset(i) for i in ids]
        finally:
            env.close()
        embedder = make_embedder(cfg.embedder) if cfg.embedder else None
        memory = make_memory(cfg.memory, bank=str(copy), embedder=embedder, llm=None,
                             extractor=cfg.extractor, domain=domain,
                             options=dict(cfg.memory_options))
        if not hasattr(memory, "entries"):
            print(f"memory {cfg.memory!r} is not a lesson memory", file=sys.stderr)
            memory.close()
            return 2
        sampler = LocalLLM(**({"n_threads": args.threads} if args.threads else {}))
        t0 = time.perf_counter()
        report = compare_contexts(sampler, memory, tasks, n=args.samples,
                                  max_tokens=args.max_tokens, seed=args.seed)
        wall = time.perf_counter() - t0
        entries = len(memory.entries())
        memory.close()

    print(f"# information gain — {cfg.memory} (run {args.run_dir}, {entries} entries), "
          f"{len(report.rows)} tasks from position {offset} of the stream, "
          f"{args.samples} samples × "
          f"≤{args.max_tokens} tokens, {wall:.0f} s\n")
    print("| task | entries | Ĥ(Y|x) | Ĥ(Y|x,recalled) | Ĥ(Y|x,random) | Î recalled | Î random |")
    print("|---|---|---|---|---|---|---|")
    for r in report.rows:
        print(f"| {r.task_id} | {r.recalled_entries} | {r.base.mean:.2f} | {r.recalled.mean:.2f} "
              f"| {r.random.mean:.2f} | {r.gain_recalled:+.2f} | {r.gain_random:+.2f} |")
    print(f"\nmean Î recalled {report.mean_gain_recalled:+.3f} nats, random "
          f"{report.mean_gain_random:+.3f}; recalled > random on "
          f"{report.recalled_wins:.0%} of tasks")
    if args.json:
        args.json.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return 0


def _played(run_dir: Path) -> int:
    """Episodes the run played (lines of its episodes.jsonl)."""
    path = run_dir / "episodes.jsonl"
    if not path.exists():
        return 0
    with path.open(encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


if __name__ == "__main__":
    raise SystemExit(main())
