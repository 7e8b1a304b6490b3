"""MCMA copilot pipeline: collect trajectories, build preference pairs, train (SFT + DPO).

    # 1. trajectories (noisy expert demonstrations) + candidates + replays -> pairs.jsonl
    python benchmarks/mcma_copilot.py pairs --env babyai --n 60 --run runs/mcma-copilot
    # 2. SFT then DPO of the success (and failure) copilot on CPU, niced
    nice -n 10 python benchmarks/mcma_copilot.py train --run runs/mcma-copilot --role success

Every stage is resumable (re-run the same command). ``--player follower`` replays with
the scripted proxy task model (:class:`deltamem.memories.mcma.replay.FollowerPlayer`);
``--player react --model local`` replays with a ReAct agent on an LLM (the paper's
protocol; slow on CPU). Running ``pairs`` for two environments into one ``--run`` builds
the data of a *mix* copilot (§4.6). Prints progress and the figures; outputs stay in
``--run``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from deltamem.agents.expert import ExpertAgent
from deltamem.envs.registry import make_env
from deltamem.errors import DeltaMemError
from deltamem.memories.mcma.replay import (
    FollowerPlayer,
    agent_player,
    candidate_trajectories,
    replay,
)
from deltamem.memories.mcma.utility import PairDataset, build_pairs
from deltamem.training.copilot import TrainConfig, train_copilot
from deltamem.types import Episode


def _env_options(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in pairs:
        k, _, v = kv.partition("=")
        out[k] = int(v) if v.isdigit() else v
    return out


def collect(run: Path, env_name: str, n: int, seed: int, noises: list[float],
            options: dict[str, object]) -> list[Episode]:
    """Noisy expert demonstrations of the train split (resumable: ``episodes.jsonl``)."""
    path = run / "episodes.jsonl"
    everything = [Episode.from_dict(json.loads(x)) for x in path.read_text().splitlines()
                  if x.strip()] if path.exists() else []
    # a run may mix environments (a "mix" copilot): keep this environment's episodes
    have = [e for e in everything if e.id.startswith(f"{env_name}/")]
    done = {e.task.id for e in have}
    env = make_env(env_name, **options)
    try:
        ids = env.task_ids("train", seed=seed)[:n]
        with path.open("a", encoding="utf-8") as f:
            for k, tid in enumerate(ids):
                if tid in done:
                    continue
                task = env.reset(tid)
                noise = noises[k % len(noises)]
                ep = ExpertAgent(noise=noise, seed=seed).play(env, task)
                ep = Episode(ep.task, ep.steps, ep.success, ep.reward, ep.max_steps,
                             id=f"{env_name}/{tid}@{noise:g}")
                f.write(json.dumps(ep.to_dict()) + "\n")
                f.flush()
                have.append(ep)
                print(f"[collect] {tid} noise={noise:g} success={ep.success} "
                      f"steps={len(ep.steps)}", flush=True)
    finally:
        env.close()
    return have


def cmd_pairs(a: argparse.Namespace) -> None:
    run = Path(a.run)
    run.mkdir(parents=True, exist_ok=True)
    (run / "pairs_config.json").write_text(json.dumps(vars(a), indent=1))
    opts = _env_options(a.env_opt)
    episodes = collect(run, a.env, a.n, a.seed, [float(x) for x in a.noise.split(",")], opts)
    rows = candidate_trajectories(episodes)
    by_key = {e.id: e.task.id for e in episodes}
    env = make_env(a.env, **opts)
    if a.player == "follower":
        player = FollowerPlayer(seed=a.seed)
    else:
        from deltamem.agents.react import ReActAgent
        from deltamem.llm.factory import make_llm

        player = agent_player(ReActAgent(make_llm(a.model), domain=episodes[0].task.domain,
                                         constrained=True))
    t0 = time.time()
    try:
        n = build_pairs(PairDataset(run / "pairs.jsonl"), rows,
                        lambda key, text: replay(env, by_key[key], text, player),
                        top_k=a.top_k, progress=lambda s: print(f"[pairs] {s}", flush=True))
    finally:
        env.close()
    ds = PairDataset(run / "pairs.jsonl")
    print(f"[pairs] wrote {n} pairs in {time.time() - t0:.0f}s; data set: "
          f"{len(ds.pairs('success'))} success, {len(ds.pairs('failure'))} failure pairs "
          f"from {len(ds.done())} trajectories ({run / 'pairs.jsonl'})")


def cmd_train(a: argparse.Namespace) -> None:
    cfg = TrainConfig(seed=a.seed, sft_steps=a.sft_steps, dpo_steps=a.dpo_steps,
                      max_length=a.max_length, eval_every=a.eval_every, beta=a.beta,
                      dpo_lr=a.dpo_lr, threads=a.threads, batch_size=a.batch_size,
                      max_heldout=a.max_heldout, lora_layers=a.lora_layers or None,
                      eval_before=not a.no_eval_before)
    t0 = time.time()
    m = train_copilot(a.run, a.role, cfg, base=a.base)
    b, f = m["heldout_before"], m["heldout_after"]
    print(f"[train] {a.role}: held-out DPO loss {b['eval_loss']:.4f} -> {f['eval_loss']:.4f}, "
          f"preference accuracy {b.get('eval_rewards/accuracies', float('nan')):.3f} -> "
          f"{f.get('eval_rewards/accuracies', float('nan')):.3f}; "
          f"{time.time() - t0:.0f}s wall; curves: {Path(a.run) / a.role / 'curves.png'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("pairs", help="collect trajectories and build preference pairs")
    q.add_argument("--env", default="babyai")
    q.add_argument("--n", type=int, default=60, help="trajectories")
    q.add_argument("-e", "--env-opt", action="append", default=[],
                   help="environment option key=value (e.g. tasks_per_level=15)")
    q.add_argument("--run", default="runs/mcma-copilot")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--noise", default="0.1,0.5", help="demonstration noise levels, cycled")
    q.add_argument("--top-k", type=int, default=3)
    q.add_argument("--player", choices=["follower", "react"], default="follower")
    q.add_argument("--model", default="local", help="task model of --player react")
    t = sub.add_parser("train", help="SFT then DPO of one copilot")
    t.add_argument("--run", default="runs/mcma-copilot")
    t.add_argument("--role", choices=["success", "failure"], default="success")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--sft-steps", type=int, default=20)
    t.add_argument("--dpo-steps", type=int, default=30)
    t.add_argument("--max-length", type=int, default=1024)
    t.add_argument("--eval-every", type=int, default=10)
    t.add_argument("--beta", type=float, default=0.1)
    t.add_argument("--dpo-lr", type=float, default=5e-5)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--batch-size", type=int, default=2)
    t.add_argument("--max-heldout", type=int, default=24, help="held-out pairs evaluated")
    t.add_argument("--lora-layers", type=int, default=6, help="adapt the top N layers (0: all)")
    t.add_argument("--base", default=None,
                   help="a causal-LM folder to train instead of the bundled SmolLM2 (with the "
                        "same tokenizer), e.g. a tiny random one for a smoke run")
    t.add_argument("--no-eval-before", action="store_true",
                   help="record the exact step-0 held-out DPO loss (log 2) instead of computing it")
    a = p.parse_args(argv)
    try:
        {"pairs": cmd_pairs, "train": cmd_train}[a.cmd](a)
    except DeltaMemError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
