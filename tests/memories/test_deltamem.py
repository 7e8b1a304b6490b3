"""DeltaMem rules, one test per equation (paper §3), on a real SQLite bank."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deltamem import DeltaMem, Episode, Step, Task
from deltamem.embed import HashingEmbedder
from deltamem.errors import (
    ConfigError,
    EmbedderMismatchError,
    ExtractionError,
    InvalidInputError,
)
from deltamem.extract import StructuralExtractor
from deltamem.extract.residual import procedure_steps
from deltamem.testing import TableEmbedder, check_memory, make_episode

H = HashingEmbedder(dim=64)


def unit(angle_cos: float, dim: int = 64) -> list[float]:
    """A vector whose cosine with e_0 is exactly ``angle_cos`` (for representable values)."""
    v = [0.0] * dim
    v[0] = angle_cos
    v[1] = math.sqrt(1.0 - angle_cos**2)
    return v


def e0(dim: int = 64) -> list[float]:
    v = [0.0] * dim
    v[0] = 1.0
    return v


def table(mapping: dict[str, list[float]]) -> TableEmbedder:
    return TableEmbedder(mapping, default=lambda t: H.embed_queries([t])[0])


def mem_with(emb, **kw) -> DeltaMem:
    kw.setdefault("domain", "alfworld")
    # these tests drive the tree mechanics with raw texts (the table maps goals/scenes)
    kw.setdefault("task_trigger", "goal")
    kw.setdefault("env_trigger", "scene")
    return DeltaMem.open(":memory:", embedder=emb, **kw)


OTHER_STEPS = (
    ("go to cabinet 2", "On the cabinet 2, you see a apple 2."),
    ("take apple 2 from cabinet 2", "You pick up the apple 2 from the cabinet 2."),
    ("go to microwave 1", "The microwave 1 is closed."),
    ("heat apple 2 with microwave 1", "You heat the apple 2 using the microwave 1."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("put apple 2 in/on fridge 1", "You put the apple 2 in/on the fridge 1."),
)


def test_contract():
    check_memory(mem_with(H))


def test_cold_start_writes_roots_in_both_trees():
    mem = mem_with(H)
    ep = make_episode()
    ch = mem.learn(ep, mem.recall(ep.task))
    assert [c.kind for c in ch] == ["written", "written"]
    for tree in ("task", "env"):
        (n,) = mem.nodes(tree)
        assert (n.kind, n.label, n.depth, n.parent) == ("ROOT", "SUCCESS", 1, None)
    assert "cold start" in ch.written[0].reason


def test_write_decision_at_exactly_tau_is_warm_and_below_is_cold():
    emb = table({"goal a": e0(), "goal b": unit(0.75), "goal c": unit(0.5)})
    mem = mem_with(emb, tau_task=0.75, use_env_tree=False)
    mem.learn(make_episode("goal a", episode_id="e1"))
    ep_b = make_episode("goal b", actions=OTHER_STEPS, episode_id="e2")
    r = mem.recall(ep_b.task)
    assert r.details["task"]["score"] == pytest.approx(0.75, abs=1e-7)
    assert r.details["task"]["accepted"]
    ch = mem.learn(ep_b, r)
    (written,) = ch.written
    node = next(n for n in mem.nodes("task") if n.id == written.id)
    assert (node.kind, node.depth) == ("RESIDUAL", 2)
    # cos 0.5 with "goal a", 0.75*0.5+... with "goal b": below τ → new ROOT
    ep_c = make_episode("goal c", actions=OTHER_STEPS, episode_id="e3")
    mem2 = mem_with(emb, tau_task=0.75, use_env_tree=False)
    mem2.learn(make_episode("goal a", episode_id="e1"))
    assert not mem2.recall(ep_c.task).details["task"]["accepted"]
    ch = mem2.learn(ep_c)
    assert next(n for n in mem2.nodes("task") if n.id == ch.written[0].id).kind == "ROOT"


def test_failure_penalty_changes_which_node_wins():
    emb = table({"success goal": unit(0.90), "failed goal": unit(0.92), "query": e0()})
    mem = mem_with(emb, tau_task=0.5, tau_env=0.99, use_env_tree=False)
    mem.learn(make_episode("success goal", episode_id="s"))
    mem.learn(make_episode("failed goal", success=False, episode_id="f"))
    labels = {n.trigger: n.label for n in mem.nodes("task")}
    assert labels == {"success goal": "SUCCESS", "failed goal": "FAILURE"}
    q = Task(id="q", goal="query", domain="alfworld")
    r = mem.recall(q)
    winner = next(n for n in mem.nodes("task") if n.id == r.details["task"]["node_id"])
    assert winner.trigger == "success goal"
    assert r.details["task"]["score"] == pytest.approx(0.90, abs=1e-6)
    mem0 = mem_with(emb, tau_task=0.5, epsilon=0.0, use_env_tree=False)
    mem0.learn(make_episode("success goal", episode_id="s"))
    mem0.learn(make_episode("failed goal", success=False, episode_id="f"))
    r0 = mem0.recall(q)
    assert (
        next(n for n in mem0.nodes("task") if n.id == r0.details["task"]["node_id"]).trigger
        == "failed goal"
    )


def ladder(n: int) -> TableEmbedder:
    """g0..g{n-1} on a circle, each nearest to the one before it (10° apart)."""

    def at(deg: float) -> list[float]:
        v = [0.0] * 64
        v[0], v[1] = math.cos(math.radians(deg)), math.sin(math.radians(deg))
        return v

    return table({f"g{i}": at(60 - 10 * i) for i in range(n)})


def _variant_steps(i: int) -> tuple[tuple[str, str], ...]:
    return (
        (f"go to shelf {i}", "You arrive."),
        (f"examine vase{i} 1", "A vase."),
        (f"use tool{i} 1", "Done."),
    )


def test_attachment_at_d_max_becomes_sibling():
    # each new goal is nearest to the previous one: each episode matches the newest node
    mem = mem_with(ladder(5), d_max=2, use_env_tree=False)
    mem.learn(make_episode("g0", episode_id="e0"))
    for i in range(1, 4):
        mem.learn(make_episode(f"g{i}", actions=_variant_steps(i), episode_id=f"e{i}"))
    nodes = mem.nodes("task")
    assert [n.depth for n in nodes] == [1, 2, 2, 2]
    root = nodes[0]
    assert all(n.parent == root.id for n in nodes[1:])  # siblings under the root
    # and with the default D_max the same stream deepens the chain instead
    deep = mem_with(ladder(5), use_env_tree=False)
    deep.learn(make_episode("g0", episode_id="e0"))
    for i in range(1, 4):
        deep.learn(make_episode(f"g{i}", actions=_variant_steps(i), episode_id=f"e{i}"))
    assert [n.depth for n in deep.nodes("task")] == [1, 2, 3, 4]


def test_a_sibling_at_d_max_writes_its_delta_against_the_chain_it_hangs_under():
    # v* (g1's node) is at D_max = 2, so g2's node hangs under the root beside it: its
    # delta must hold what it shares with v* too, or its own chain (root, g2) loses it
    mem = mem_with(ladder(3), d_max=2, use_env_tree=False)
    mem.learn(make_episode("g0", episode_id="e0"))
    mem.learn(make_episode("g1", actions=_variant_steps(1), episode_id="e1"))
    extra = (*_variant_steps(1), ("open drawer 7", "The drawer 7 is open."))
    ch = mem.learn(make_episode("g2", actions=extra, episode_id="e2"))
    (written,) = ch.written
    assert "sibling" in written.reason
    r = mem.recall(Task(id="q", goal="g2", domain="alfworld"))
    assert r.details["task"]["node_id"] == written.id
    assert "tool1" in r.text and "drawer" in r.text


def test_recall_chain_runs_root_to_match():
    mem = mem_with(ladder(4), use_env_tree=False)
    mem.learn(make_episode("g0", episode_id="e0"))
    for i in range(1, 3):
        mem.learn(make_episode(f"g{i}", actions=_variant_steps(i), episode_id=f"e{i}"))
    r = mem.recall(Task(id="q", goal="g3", domain="alfworld"))
    chain = r.details["task"]["chain"]
    nodes = {n.id: n for n in mem.nodes("task")}
    assert [nodes[i].depth for i in chain] == [1, 2, 3]
    assert [it.role for it in r.items] == ["base", "delta", "delta"]
    text = r.text
    assert (
        text.index("[Base Skill]") < text.index("[Skill Delta 1]") < text.index("[Skill Delta 2]")
    )
    assert r.items[-1].score is not None and r.items[0].score is None


def test_skip_writes_nothing():
    mem = mem_with(H)
    mem.learn(make_episode(episode_id="a"))
    before = mem.stats()["nodes"]
    ch = mem.learn(make_episode(episode_id="b"))
    assert mem.stats()["nodes"] == before
    assert {c.source for c in ch.skipped} == {"task", "env"}
    assert not ch.written


def test_kth_success_hit_consolidates_and_state_survives_reload(tmp_path):
    emb = table({"base goal": unit(0.8), "variant goal": e0()})
    bank = tmp_path / "bank.db"
    mem = DeltaMem.open(bank, embedder=emb, domain="alfworld", k_cons=2, use_env_tree=False,
                        task_trigger="goal")
    mem.learn(make_episode("base goal", episode_id="e0"))
    mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e1"))
    residual = next(n for n in mem.nodes("task") if n.kind == "RESIDUAL")
    ch1 = mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e2"))
    assert [c.kind for c in ch1] == ["skipped", "hit"]
    ch2 = mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e3"))
    assert [c.kind for c in ch2] == ["skipped", "hit", "consolidated"]
    nodes = mem.nodes("task")
    new_root = nodes[-1]
    assert (new_root.kind, new_root.origin, new_root.source) == (
        "ROOT",
        "consolidated",
        residual.id,
    )
    # the fused skill holds what the chain composes to (Eq. 7): the variant episode's own
    # steps, the base's it did not do dropped (issue 47: a chain composes to its episode)
    proc = new_root.payload.procedure
    variant = make_episode("variant goal", actions=OTHER_STEPS)
    assert procedure_steps(proc) == StructuralExtractor().skill_steps(variant, "alfworld")
    assert "4. heat apple with microwave" in proc and "clean apple" not in proc
    marked = next(n for n in nodes if n.id == residual.id)
    assert marked.consolidated and marked.success_hits == 2
    # Phase 3: the next query matches R* directly
    r = mem.recall(Task(id="q", goal="variant goal", domain="alfworld"))
    assert r.details["task"]["node_id"] == new_root.id and r.details["task"]["chain"] == [
        new_root.id
    ]
    # a further success on R* (a ROOT) never re-consolidates
    mem.learn(make_episode("variant goal", actions=OTHER_STEPS, episode_id="e4"))
    assert len(mem.nodes("task")) == 3
    mem.close()
    again = DeltaMem.open(bank, embedder=emb)
    assert again.config.k_cons == 2 and not again.config.use_env_tree  # config persisted
    by_id = {n.id: n for n in again.nodes("task")}
    assert by_id[residual.id].consolidated and by_id[residual.id].success_hits == 2
    assert by_id[new_root.id].origin == "consolidated"


@pytest.mark.parametrize("switch, off", [("use_task_tree", "task"), ("use_env_tree", "env")])
def test_ablation_switches_disable_their_tree(switch, off):
    mem = mem_with(H, **{switch: False})
    mem.learn(make_episode(episode_id="a"))
    on = "env" if off == "task" else "task"
    assert mem.stats()["nodes"] == {off: 0, on: 1}
    r = mem.recall(make_episode().task)
    assert off not in r.details and r.details[on]["accepted"]
    title = "Task skill memory" if off == "task" else "Environment knowledge memory"
    assert title not in r.text


def test_both_switches_off_is_a_config_error():
    with pytest.raises(ConfigError):
        mem_with(H, use_task_tree=False, use_env_tree=False)


@pytest.mark.parametrize(
    "episode, error",
    [
        (Episode(make_episode().task, (), success=True, reward=1.0), InvalidInputError),
        (
            Episode(make_episode().task, make_episode().steps, success=True, reward=float("nan")),
            InvalidInputError,
        ),
        (
            Episode(Task(id="x", goal="g", domain="no-such-domain"), (Step("a", "b"),), True, 1.0),
            ConfigError,
        ),
        (
            Episode(Task(id="x", goal="  ", domain="alfworld"), (Step("a", "b"),), True, 1.0),
            InvalidInputError,
        ),
    ],
)
def test_bad_episodes_raise_and_leave_the_bank_unchanged(episode, error):
    mem = mem_with(H)
    mem.learn(make_episode(episode_id="ok"))
    before = mem.stats()
    with pytest.raises(error):
        mem.learn(episode)
    assert mem.stats() == before


def test_unknown_domain_in_config_is_a_clear_error():
    with pytest.raises(ConfigError, match="known domains"):
        mem_with(H, domain="nope")


def test_wrong_embedder_at_open_is_refused(tmp_path):
    bank = tmp_path / "b.db"
    DeltaMem.open(bank, embedder=HashingEmbedder(dim=64)).close()
    with pytest.raises(EmbedderMismatchError, match="hashing-64"):
        DeltaMem.open(bank, embedder=HashingEmbedder(dim=128))


class RejectingExtractor:
    name = "rejecting"

    def extract(self, role, episode, chain, domain):
        raise ExtractionError(
            "activation_condition: 'x' * 5000 is too long",
            role=role,
            raw='{"activation_condition": "xxxx"}',
        )

    def consolidate(self, tree, chain, domain):  # pragma: no cover - not reached
        raise AssertionError


def test_invalid_extractor_output_stores_nothing_and_is_logged():
    mem = mem_with(H, extractor=RejectingExtractor())
    ch = mem.learn(make_episode(episode_id="a"))
    assert len(ch.rejected) == 2 and not ch.written
    assert mem.stats()["nodes"] == {"task": 0, "env": 0}
    rej = mem.store.rejections()
    assert [r["role"] for r in rej] == ["task_root_success", "env_root"]
    assert "too long" in rej[0]["reason"] and rej[0]["raw"].startswith("{")


def test_learning_the_same_episode_twice_changes_nothing():
    mem = mem_with(H)
    ep = make_episode(episode_id="same")
    mem.learn(ep)
    before = mem.stats()
    ch = mem.learn(ep)
    assert [c.kind for c in ch] == ["unchanged"]
    assert mem.stats() == before


def test_recall_is_read_only_and_needs_an_embedder(tmp_path):
    bank = tmp_path / "b.db"
    m = DeltaMem.open(bank, embedder=H)
    m.learn(make_episode(episode_id="a"))
    m.close()
    ro = DeltaMem.open(bank, embedder=None, readonly=True)
    assert ro.stats()["nodes"] == {"task": 1, "env": 1}
    with pytest.raises(ConfigError, match="without an embedder"):
        ro.recall(make_episode().task)


def test_second_handle_sees_writes_of_the_first(tmp_path):
    bank = tmp_path / "b.db"
    a = DeltaMem.open(bank, embedder=H, domain="alfworld")
    b = DeltaMem.open(bank, embedder=H)
    assert b.recall(make_episode().task).text == ""
    a.learn(make_episode(episode_id="a"))
    assert b.recall(make_episode().task).text != ""


def test_env_tree_is_queried_with_scene_text():
    ep = make_episode()
    emb = table({ep.task.goal: e0(), ep.task.scene: unit(0.6)})
    mem = mem_with(emb)
    mem.learn(ep)
    env_node = mem.nodes("env")[0]
    assert env_node.trigger == ep.task.scene
    assert np.allclose(env_node.embedding, emb.embed_passages([ep.task.scene])[0])
    assert "countertop" in env_node.payload.procedure
