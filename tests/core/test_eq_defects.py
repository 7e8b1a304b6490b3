"""Two defects of Eq. 4–6 found by an independent check (issue 15, item 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deltamem import DeltaMem, Episode, Step, Task
from deltamem.core.payload import Payload
from deltamem.core.tree import Node, ResidualTree
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError

GOAL = "put a clean apple in fridge"


def _task(i: str = "t1") -> Task:
    return Task(id=i, goal=GOAL, domain="alfworld",
                scene="You are in a kitchen. You see a countertop 1 and a fridge 1.")


PLACES = ("drawer", "shelf", "safe", "desk", "sidetable", "cabinet")


def _episode(i: str) -> Episode:
    place = PLACES[int(i) % len(PLACES)]
    steps = (Step(f"go to {place} 1", f"On the {place} 1, you see nothing."),
             Step("take apple 1 from countertop 1", "You pick up the apple 1."),
             Step("put apple 1 in/on fridge 1", "You win.", done=True))
    return Episode(_task(i), steps, success=True, reward=1.0, id=f"ep-{i}")


def test_a_text_scored_against_itself_is_cosine_one_and_passes_tau_one():
    emb = HashingEmbedder()
    v = emb.embed_passages([GOAL])[0]
    # the float32 row is not exactly unit length: its raw dot with itself is below 1
    assert math.fsum((v.astype(np.float64) ** 2).tolist()) < 1.0
    tree = ResidualTree("task", emb.dim)
    tree.add(Node(id="a", tree="task", kind="ROOT", label="SUCCESS", parent=None, depth=1,
                  trigger=GOAL, embedding=v, payload=Payload("a", "a")))
    m = tree.match(emb.embed_queries([GOAL])[0], 1.0, 0.05)
    assert m.score == 1.0 and m.accepted  # Eq. 6: cos(e, e) = 1 ≥ τ


def test_repeated_goal_with_tau_one_is_a_warm_start():
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld",
                        tau_task=1.0, tau_env=1.0)
    mem.learn(_episode("1"))
    changes = mem.learn(_episode("2"))
    written = {c.source: c.reason for c in changes.written}
    assert "warm start" in written["task"]
    assert sorted(n.kind for n in mem.nodes("task")) == ["RESIDUAL", "ROOT"]


@pytest.mark.parametrize("d_max", [0, 1])
def test_d_max_below_two_is_refused_at_open(d_max):
    # Eq. 5 with D_max = 1 would file a RESIDUAL at the virtual root (a delta with no base)
    with pytest.raises(ConfigError, match="d_max"):
        DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld", d_max=d_max)


def test_d_max_two_attaches_siblings_under_the_root():
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld", d_max=2)
    for i in range(4):
        mem.learn(_episode(str(i)))
    depths = sorted(n.depth for n in mem.nodes("task"))
    assert depths[0] == 1 and max(depths) == 2
