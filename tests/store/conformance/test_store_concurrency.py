"""8 processes × 50 learns into one bank: exact node, hit and episode counts on every backend.

The bank is seeded with one node per tree and τ = −1, so every learn is a warm start that
writes exactly one RESIDUAL per tree (the extractor never skips) and every successful one adds
exactly one success hit per tree, whichever node it matched. Lost or interleaved writes
would show as wrong totals or broken parent links.
"""

from __future__ import annotations

import multiprocessing as mp

import pytest

from deltamem import DeltaMem
from deltamem.testing import make_episode

from .store_cases import AlwaysWrites, H, check_invariants

PROCS, LEARNS = 8, 50
CFG = {"domain": "alfworld", "tau_task": -1.0, "tau_env": -1.0, "consolidation": False,
       "d_max": 1000}  # fmt: skip


def _worker(loc: str, worker: int, barrier) -> None:
    mem = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    barrier.wait()
    for i in range(LEARNS):
        ep = make_episode(
            f"task {i % 7} of worker {worker}",
            scene=f"room {i % 3}",
            success=(i + worker) % 2 == 0,
            episode_id=f"w{worker}-{i}",
        )
        mem.learn(ep, mem.recall(ep.task))
    mem.close()


@pytest.mark.slow
def test_concurrent_learns_give_exact_counts(new_bank):
    loc = new_bank()
    seed = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    seed.learn(make_episode("seed task", episode_id="seed"))
    seed.close()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PROCS)
    procs = [ctx.Process(target=_worker, args=(loc, w, barrier)) for w in range(PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * PROCS
    mem = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    total = PROCS * LEARNS
    successes = sum((i + w) % 2 == 0 for w in range(PROCS) for i in range(LEARNS))
    s = mem.stats()
    assert s["nodes"] == {"task": total + 1, "env": total + 1}
    assert s["episodes_learned"] == total + 1
    for tree in ("task", "env"):
        assert sum(n.success_hits for n in mem.nodes(tree)) == successes
        assert s["kind"][tree] == {"ROOT": 1, "RESIDUAL": total}
    check_invariants(mem)
    assert mem.store.integrity_ok()
    mem.close()
