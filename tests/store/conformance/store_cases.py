"""Shared inputs of the store conformance tests: goals, scenes, actions, an always-writing
extractor (so concurrent learns write a known number of nodes)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from deltamem import DeltaMem
from deltamem.core.payload import ChainEntry, Payload
from deltamem.embed import HashingEmbedder
from deltamem.testing import make_episode
from deltamem.types import Episode

PG_URL = os.environ.get("DELTAMEM_TEST_PG_URL", "")


def pg_url_or_skip() -> str:
    """The test server's URL; skips the test when none is configured or psycopg is missing."""
    if not PG_URL:
        pytest.skip("DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
    pytest.importorskip("psycopg")
    return PG_URL


H = HashingEmbedder(dim=32)
GOALS = [
    "put a clean apple in fridge",
    "put a hot apple in fridge",
    "heat some egg and put it in garbagecan",
    "examine the book with the desklamp",
    "put two cellphone in sofa",
]
SCENES = ["kitchen with a fridge 1 and a countertop 1", "bedroom with a desk 1 and a bed 1"]
ACTIONS = [
    ("go to countertop 1", "On the countertop 1, you see a apple 1."),
    ("take apple 1 from countertop 1", "You pick up the apple 1."),
    ("go to desk 1", "On the desk 1, you see a book 2, and a desklamp 1."),
    ("use desklamp 1", "You turn on the desklamp 1."),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1."),
    ("jump", "Nothing happened."),
]


class AlwaysWrites:
    """Extractor that writes one node for every episode and tree (never skips)."""

    name = "always"

    def extract(
        self, role: str, episode: Episode, chain: Sequence[ChainEntry], domain: str
    ) -> Payload:
        return Payload(f"{role}: {episode.task.goal}", episode.steps[0].action, episode.id)

    def consolidate(self, tree: str, chain: Sequence[ChainEntry], domain: str) -> Payload:
        return Payload("fused", " | ".join(e.payload.procedure for e in chain), "done")


def build(seq, location: str = ":memory:", **cfg) -> DeltaMem:
    """Open ``location`` and learn ``(goal, scene, actions, success)`` tuples into it."""
    cfg.setdefault("tau_task", 0.6)
    cfg.setdefault("tau_env", 0.6)
    # the store's own search implements the deepest tie rule (what these cases compare)
    cfg.setdefault("tie_rule", "deepest")
    mem = DeltaMem.open(location, embedder=H, domain="alfworld", k_cons=2, d_max=3, **cfg)
    for i, (goal, scene, acts, ok) in enumerate(seq):
        mem.learn(make_episode(goal, scene=scene, actions=acts, success=ok, episode_id=f"e{i}"))
    return mem


def check_invariants(mem: DeltaMem) -> None:
    """Tree-shape rules every bank satisfies whatever was learned."""
    for tree in ("task", "env"):
        nodes = {n.id: n for n in mem.nodes(tree)}
        seqs = [n.seq for n in nodes.values()]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        for n in nodes.values():
            if n.kind == "ROOT":
                assert n.parent is None and n.depth == 1
            else:
                p = nodes[n.parent]
                assert p.seq < n.seq and n.depth == p.depth + 1 <= mem.config.d_max
            if n.origin == "consolidated":
                src = nodes[n.source]
                assert src.consolidated and src.success_hits >= mem.config.k_cons
            assert n.success_hits >= 0
        cons_roots = [n for n in nodes.values() if n.origin == "consolidated"]
        assert len(cons_roots) == sum(1 for n in nodes.values() if n.consolidated)
    s = mem.stats()
    assert s["units"] == len(mem.nodes("task")) + len(mem.nodes("env"))
    assert sum(int(c) for c in s["depth_histogram"]["task"].values()) == s["nodes"]["task"]
