"""A bank's skills as SKILL.md folders and back: does the imported bank recall the same
procedures? (issue 50)

Builds a household bank from ``--train-games`` demonstrations (an online run of the
``expert`` agent, structural extractor; or takes ``--bank``), writes its Task-Tree's
successful chains as SKILL.md folders (:func:`deltamem.skills.export_skills`), reads them
into an empty bank (:func:`deltamem.skills.import_skills`) and, for every task of the
household splits, compares the procedure each bank recalls (the steps the matched chain
composes to, Eq. 7; ``None`` when nothing is recalled).

    python benchmarks/skills_roundtrip.py --out runs/skills
    python benchmarks/skills_roundtrip.py --smoke
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path


def build(out: Path, games: int) -> Path:
    from deltamem.bench import RunConfig, run

    run_dir = out / "build"
    shutil.rmtree(run_dir, ignore_errors=True)
    run(RunConfig(run_dir=run_dir, env="household", split="train", episodes=games,
                  agent="expert", memory="deltamem", embedder="hashing",
                  extractor="structural", llm="scripted",
                  env_options={"cache_dir": str(out / "games")}), progress=False)
    return run_dir / "bank.db"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bank", type=Path, default=None, help="an existing bank (hashing-256)")
    p.add_argument("--train-games", type=int, default=40)
    p.add_argument("--tasks", type=int, default=60, help="tasks per split compared")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.train_games, args.tasks = 3, 2
    from deltamem.embed import HashingEmbedder
    from deltamem.envs.registry import make_env
    from deltamem.extract.residual import chain_steps
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.skills import export_skills, import_skills

    out = args.out or Path(tempfile.mkdtemp(prefix="deltamem-skills-"))
    out.mkdir(parents=True, exist_ok=True)
    src = args.bank or build(out, args.train_games)
    for stale in (out / "skills", out / "imported.db"):
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(
            missing_ok=True)
    n = export_skills(src, out / "skills")
    r = import_skills(out / "skills", out / "imported.db", embedder=HashingEmbedder())
    print(f"{n} skills written to {out / 'skills'}; imported {r.skills} skills and "
          f"{r.failures} known failures into {out / 'imported.db'}")
    banks = [DeltaMem.open(b, embedder=HashingEmbedder(), readonly=True)
             for b in (src, out / "imported.db")]
    env = make_env("household", cache_dir=str(out / "games"))
    same = differ = recalled = 0
    try:
        for split in ("train", "seen", "unseen"):
            for tid in env.task_ids(split, 0)[: args.tasks]:
                task = env.reset(tid)
                steps = []
                for mem in banks:
                    best = mem.match(task)["task"]
                    steps.append(chain_steps([x.entry() for x in mem.chain(best.node_id)])
                                 if best.accepted else None)
                same += steps[0] == steps[1]
                differ += steps[0] != steps[1]
                recalled += steps[0] is not None
                if steps[0] != steps[1]:
                    print(f"  differs: {tid}: {steps[0]} / {steps[1]}")
    finally:
        for mem in banks:
            mem.close()
        env.close()
    print(f"tasks compared: {same + differ}; a procedure recalled by the source bank: "
          f"{recalled}; same procedure recalled by both banks: {same}; different: {differ}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
