"""Write decisions across processes: two DeltaMem objects on one bank (two connections, as two
service replicas have) decide as one process would, on every backend.

The extractor holds both learners at a barrier after each has decided (matched and started
extracting) and before either writes, so the race the decision check must win happens every
time, not by luck of timing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from deltamem import DeltaMem
from deltamem.core.payload import ChainEntry, Payload
from deltamem.testing import make_episode
from deltamem.types import Episode

from .store_cases import AlwaysWrites, H, check_invariants

CFG = {"domain": "alfworld", "tau_task": 0.9, "tau_env": 0.9, "k_cons": 2, "d_max": 5,
       "tie_rule": "deepest"}  # hits go to the newest node, as these cases count them


class MeetsFirst(AlwaysWrites):
    """The first extraction of each instance waits for the other learner's; writes a node
    for every episode, or (``skip_warm``) skips every warm start (the chain covers it)."""

    def __init__(self, barrier: threading.Barrier, *, skip_warm: bool = False) -> None:
        self.barrier = barrier
        self.skip_warm = skip_warm
        self.calls = 0

    def extract(self, role: str, episode: Episode, chain: Sequence[ChainEntry],
                domain: str) -> Payload | None:
        self.calls += 1
        if self.calls == 1:
            self.barrier.wait(timeout=30)
        if self.skip_warm and "residual" in role:
            return None
        return super().extract(role, episode, chain, domain)


def _race(loc: str, episodes: tuple[Episode, Episode], *, recalls: bool = False,
          skip_warm: bool = False) -> list:
    """Learn the two episodes at once from two objects on ``loc``; their Changes."""
    barrier = threading.Barrier(2)
    mems = [DeltaMem.open(loc, embedder=H, extractor=MeetsFirst(barrier, skip_warm=skip_warm),
                          **CFG) for _ in range(2)]
    out: list = [None, None]
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            ep = episodes[i]
            given = mems[i].recall(ep.task) if recalls else None
            out[i] = mems[i].learn(ep, given)
        except BaseException as e:  # reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for m in mems:
        m.close()
    assert not errors, errors
    return out


def test_two_cold_starts_on_one_new_goal_write_one_root(new_bank):
    loc = new_bank()
    eps = (make_episode(episode_id="a", task_id="t-a"), make_episode(episode_id="b", task_id="t-b"))
    changes = _race(loc, eps)
    mem = DeltaMem.open(loc, embedder=H, **CFG)
    for tree in ("task", "env"):
        nodes = mem.nodes(tree)
        assert [n.kind for n in nodes] == ["ROOT", "RESIDUAL"]
        assert nodes[1].parent == nodes[0].id
    # the learn that committed second saw the first one's ROOT and hit it
    kinds = sorted(tuple(c.kind for c in ch) for ch in changes)
    assert kinds == [("written", "hit", "written", "hit"), ("written", "written")]
    check_invariants(mem)
    mem.close()


def test_consolidation_follows_the_committed_hit_count(new_bank):
    """Both racers hit the same RESIDUAL (K_cons 2, no hit yet) and write nothing else: each
    decided on a count of 0, but the one committing second sees 1 and consolidates, once,
    as the second of two sequential learns does."""
    loc = new_bank()
    seed = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    seed.learn(make_episode(episode_id="s0"))  # ROOT
    seed.learn(make_episode(episode_id="s1"))  # RESIDUAL under it (the hit goes to the ROOT)
    seed.close()
    _race(loc, (make_episode(episode_id="a"), make_episode(episode_id="b")), skip_warm=True)
    mem = DeltaMem.open(loc, embedder=H, **CFG)
    for tree in ("task", "env"):
        nodes = mem.nodes(tree)
        assert [(n.kind, n.origin) for n in nodes] == [
            ("ROOT", "extracted"), ("RESIDUAL", "extracted"), ("ROOT", "consolidated")]
        residual = nodes[1]
        assert (residual.success_hits, residual.consolidated) == (2, True)
        assert nodes[2].source == residual.id
    check_invariants(mem)
    mem.close()


def test_a_given_stale_recall_keeps_its_cold_start(new_bank):
    """The recall the agent acted on decides: two agents that both recalled nothing write
    two ROOTs, as two sequential learns with those recalls would."""
    loc = new_bank()
    eps = (make_episode(episode_id="a"), make_episode(episode_id="b"))
    _race(loc, eps, recalls=True)
    mem = DeltaMem.open(loc, embedder=H, **CFG)
    assert [n.kind for n in mem.nodes("task")] == ["ROOT", "ROOT"]
    mem.close()


@pytest.mark.parametrize("tries", [0, 1])
def test_a_learn_decided_under_the_lock_finishes(new_bank, monkeypatch, tries):
    """With no optimistic try left, the decision is taken holding the write lock."""
    import deltamem.memories.deltamem.decision as dm

    monkeypatch.setattr(dm, "OPTIMISTIC_TRIES", tries)
    loc = new_bank()
    mem = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    other = DeltaMem.open(loc, embedder=H, extractor=AlwaysWrites(), **CFG)
    mem.learn(make_episode(episode_id="a"))
    assert [c.kind for c in other.learn(make_episode(episode_id="b"))] == [
        "written", "hit", "written", "hit"]
    assert [n.kind for n in other.nodes("task")] == ["ROOT", "RESIDUAL"]
    mem.close()
    other.close()
