"""``--memory mcma``: levels H0–H2, Eq. 9 reuse, hierarchy functions, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.llm.scripted import ScriptedLLM
from deltamem.memories import make_memory, open_bank
from deltamem.memories.mcma import hierarchy as hz
from deltamem.memories.mcma.memory import MCMA
from deltamem.testing import check_memory, make_episode
from deltamem.types import Task

GOALS = ["put a clean apple in fridge", "put a clean egg in fridge", "put a hot mug in cabinet",
         "put a clean tomato in fridge", "examine the book with the desklamp"]


def _filled(**options) -> MCMA:
    mem = MCMA.open(embedder=HashingEmbedder(), mode="deterministic", rebuild_every=2, **options)
    for i, g in enumerate(GOALS):
        mem.learn(make_episode(g, episode_id=f"e{i}", success=i != 2))
    return mem


def test_contract_and_registry(tmp_path) -> None:
    check_memory(MCMA.open(embedder=HashingEmbedder(), mode="deterministic"))
    mem = make_memory("mcma", bank=tmp_path / "b.sqlite", embedder=HashingEmbedder())
    mem.learn(make_episode(episode_id="x"))
    mem.close()
    with open_bank(tmp_path / "b.sqlite") as bank:
        assert bank.stats()["levels"] == {"h0": 1, "h1": 1, "h2": 0}


def test_levels_and_structure_census() -> None:
    stats = _filled().stats()
    assert stats["levels"]["h0"] == 5 and stats["levels"]["h1"] == 5
    assert stats["levels"]["h2"] >= 1
    assert stats["h1_by_role"] == {"failure": 1, "success": 4}
    census = stats["structures"]["h1"]
    assert census["top_level"] == {"key_value": 1, "tree": 4}
    assert census["all_nested"]["chain"] >= 4  # the trees nest chains in their leaves



@pytest.mark.parametrize(("level", "expected"), [("h1", 1), ("h2", 2)])
def test_forced_level_overrides_eq9(level: str, expected: int) -> None:
    """Table 5's ablation: one level for every task, near or far."""
    mem = _filled(level=level)
    scene = make_episode().task.scene
    for goal in ("put a clean pear in fridge", "slice a tomato", "put a clean apple in fridge"):
        r = mem.recall(Task("q", goal, scene=scene, domain="alfworld"))
        assert r.details["level"] == expected, goal
        assert {i.source for i in r.items} == {f"h{expected}"}


def test_forced_h2_falls_back_to_h1_without_scripts() -> None:
    mem = MCMA.open(embedder=HashingEmbedder(), mode="deterministic", level="h2")
    mem.learn(make_episode("put a clean apple in fridge", episode_id="e0"))
    r = mem.recall(Task("q", "slice a tomato", domain="alfworld"))
    assert r.details["level"] == 1 and {i.source for i in r.items} == {"h1"}

def test_eq9_level_follows_similarity() -> None:
    mem = _filled()
    scene = make_episode().task.scene
    same = mem.recall(Task("q", "put a clean apple in fridge", scene=scene, domain="alfworld"))
    # the same instruction in another situation is not near-identical: no raw replay
    moved = mem.recall(Task("q", "put a clean apple in fridge", domain="alfworld",
                            scene="You are in a garage. You see a shelf 1 and a bin 2."))
    assert moved.details["level"] == 1
    close = mem.recall(Task("q", "put a clean pear in fridge", domain="alfworld"))
    far = mem.recall(Task("q", "slice a tomato", domain="alfworld"))
    assert same.details["level"] == 0 and same.items[0].source == "h0"
    assert "> take apple 1 from countertop 1" in same.items[0].text
    assert close.details["level"] == 1 and {i.source for i in close.items} == {"h1"}
    assert far.details["level"] == 2 and {i.source for i in far.items} == {"h2"}
    assert "<item>" in far.text  # level 2 is the abstract script
    assert len(close.items) == 4  # Top-N


def test_no_h2_falls_back_to_h1_and_empty_bank_recalls_nothing() -> None:
    mem = MCMA.open(embedder=HashingEmbedder(), mode="deterministic", rebuild_every=50)
    assert mem.recall(Task("q", "anything", domain="alfworld")).empty
    mem.learn(make_episode(episode_id="a"))
    r = mem.recall(Task("q", "slice a tomato", domain="alfworld"))
    assert r.details["level"] == 1 and not r.empty


def test_failures_can_be_turned_off() -> None:
    mem = MCMA.open(embedder=HashingEmbedder(), mode="deterministic", use_failures=False)
    ch = mem.learn(make_episode(success=False, episode_id="f"))
    assert [c.kind for c in ch] == ["written", "skipped"]


def test_llm_copilot_rejection_is_logged_not_stored() -> None:
    llm = ScriptedLLM(responder=lambda *_: "no json here")
    mem = MCMA.open(embedder=HashingEmbedder(), llm=llm, mode="llm")
    ch = mem.learn(make_episode(episode_id="r"))
    assert [c.kind for c in ch] == ["written", "rejected"]
    st = mem.stats()
    assert st["levels"]["h1"] == 0 and st["rejections"] == 1


def test_reopen_with_other_alpha_is_refused(tmp_path) -> None:
    path = tmp_path / "m.sqlite"
    MCMA.open(path, embedder=HashingEmbedder(), alpha=0.2).close()
    with pytest.raises(ConfigError, match="alpha"):
        MCMA.open(path, embedder=HashingEmbedder(), alpha=0.9)


def test_hierarchy_functions() -> None:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16))
    x = np.concatenate([c + 0.05 * rng.normal(size=(4, 16)) for c in centres])
    g = hz.knn_graph(x, k=3)
    assert all(g.degree(i) >= 3 for i in g.nodes)
    labels = hz.cluster(x, g, distance=0.5)
    assert labels == [0] * 4 + [1] * 4 + [2] * 4
    fused = hz.fuse(x, labels, fuse_cos=-1.0)  # everything in a cluster is redundant
    assert [f.members for f in fused] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)]
    assert len(hz.fuse(x, labels, fuse_cos=1.01)) == 12  # nothing is
    assert len(hz.abstraction_groups(x, fused, distance=2.0)) == 1
    assert len(hz.abstraction_groups(x, fused, distance=0.3)) == 3
    with pytest.raises(ConfigError):
        hz.distance_quantile(x, 1.0)
    assert hz.distance_quantile(x[:1], 0.5) == 1.0
    assert hz.char_similarity("put a clean apple", "put a clean apple") == 1.0
    assert hz.top_n("clean apple", ["hot mug", "clean apples", "x"], 2)[0][0] == 1
    assert hz.choose_level(0.99, hz.ReuseBands()) == 0
    assert hz.choose_level(0.7, hz.ReuseBands()) == 1
    assert hz.choose_level(0.1, hz.ReuseBands()) == 2
    assert hz.choose_level(0.1, hz.ReuseBands(), have_h2=False) == 1
    with pytest.raises(ConfigError):
        hz.ReuseBands(h0=0.5, h1=0.8)


def test_relative_cut_holds_when_the_cosine_scale_shrinks() -> None:
    """A shared offset (an anisotropic embedder) squeezes every cosine distance towards 0:
    a fixed cut then merges all three groups, a quantile of the bank's own distances still
    separates them."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16))
    x = np.concatenate([c + 0.05 * rng.normal(size=(4, 16)) for c in centres])
    squeezed = x + 6.0
    groups = [0] * 4 + [1] * 4 + [2] * 4
    assert hz.cluster(x, distance=0.5) == groups
    assert hz.cluster(squeezed, distance=0.5) == [0] * 12
    for v in (x, squeezed):
        assert hz.cluster(v, distance=hz.distance_quantile(v, 0.25)) == groups
    assert hz.distance_quantile(squeezed, 0.25) < hz.distance_quantile(x, 0.25)


def test_h2_cuts_default_to_quantiles_and_fixed_cuts_still_apply() -> None:
    relative = _filled()
    h1 = relative.store.items(kind="h1")
    built = relative.build_h2(h1)
    vecs = np.stack([i.embedding for i in h1 if i.key == "success"])
    assert built["cuts"]["success"]["cluster"] == pytest.approx(
        hz.distance_quantile(vecs, 0.1), rel=1e-3)
    fixed = _filled(cluster_distance=0.3, abstract_distance=0.6)
    assert fixed.build_h2(h1)["cuts"]["success"] == {"cluster": 0.3, "abstract": 0.6}


@pytest.mark.parametrize("options", [{"cluster_quantile": 0.5, "abstract_quantile": 0.2},
                                     {"cluster_distance": 0.6, "abstract_distance": 0.3}])
def test_finer_abstraction_cut_is_refused(options) -> None:
    with pytest.raises(ConfigError, match="must be at least"):
        make_memory("mcma", embedder=HashingEmbedder(), options=options)


def test_rebuild_h2_applies_new_cuts_to_a_reopened_bank(tmp_path) -> None:
    bank = tmp_path / "b.db"
    mem = MCMA.open(bank, embedder=HashingEmbedder(), mode="deterministic", rebuild_every=100,
                    cluster_distance=2.0, abstract_distance=2.0)
    for i, g in enumerate(GOALS):
        mem.learn(make_episode(g, episode_id=f"e{i}", success=True))
    assert not mem.store.items(kind="h2set")  # fewer entries than rebuild_every
    changes = mem.rebuild_h2()
    (h2,) = mem.store.items(kind="h2set")
    assert len(h2.payload["entries"]) == 1  # one cut that joins everything
    assert changes.of("consolidated")
    fine = MCMA.open(bank, embedder=HashingEmbedder(), cluster_distance=1e-6,
                     abstract_distance=1e-6)
    fine.rebuild_h2()
    (h2,) = fine.store.items(kind="h2set")
    assert len(h2.payload["entries"]) == len(GOALS)  # a cut that joins nothing
    assert h2.payload["cuts"]["success"] == {"cluster": 1e-6, "abstract": 1e-6}


def test_a_failures_entries_are_recalled_as_warnings() -> None:
    mem = _filled(level="h1", top_n=5)
    failed = make_episode(GOALS[2], episode_id="q").task
    roles = {i.role for i in mem.recall(failed).items}
    assert "warning" in roles and "failure" not in roles
