"""A small test bank for the viewer tests (both trees, residuals, a consolidation)."""

from __future__ import annotations

from pathlib import Path

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.testing import make_episode

EMB = HashingEmbedder(dim=64)
GOALS = ["put a hot apple in fridge", "examine the book with the desklamp",
         "put two cellphone in sofa"]  # fmt: skip
SCENES = ["kitchen with a fridge 1 and a countertop 1", "bedroom with a desk 1 and a bed 1"]


def make_bank(path: Path) -> dict:
    """Write the bank; returns its stats."""
    mem = DeltaMem.open(path, embedder=EMB, domain="alfworld", k_cons=2, tau_task=0.5,
                        tau_env=0.5)
    acts = [("go to countertop 1", "On the countertop 1, you see a apple 1."),
            ("take apple 1 from countertop 1", "You pick up the apple 1."),
            ("go to fridge 1", "The fridge 1 is closed."),
            ("open fridge 1", "You open the fridge 1.")]  # fmt: skip
    i = 0
    for goal in GOALS:
        for n, ok in ((2, True), (3, True), (4, True), (1, False)):
            scene = SCENES[i % 2]
            mem.learn(make_episode(goal, scene=scene, actions=acts[:n], success=ok,
                                   episode_id=f"e{i}"))
            i += 1
    stats = mem.stats()
    mem.close()
    return stats
