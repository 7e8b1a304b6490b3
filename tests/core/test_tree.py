"""Eq. 5–7 on the pure ResidualTree."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deltamem.core.payload import Payload
from deltamem.core.tree import Match, Node, ResidualTree


def vec(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def node(i: str, e, *, parent=None, depth=1, label="SUCCESS", seq=0, kind=None) -> Node:
    return Node(
        id=i,
        tree="task",
        kind=kind or ("ROOT" if parent is None else "RESIDUAL"),
        label=label,
        parent=parent,
        depth=depth,
        trigger=i,
        embedding=e,
        payload=Payload(i, i),
        seq=seq,
    )


def test_empty_tree_is_cold_start():
    m = ResidualTree("task", 2).match(vec(1, 0), 0.5, 0.05)
    assert m == Match(None, None, 0.5, False)


def test_match_at_exactly_tau_is_accepted_and_just_below_is_not():
    t = ResidualTree("task", 2, [node("a", np.array([0.75, np.sqrt(1 - 0.75**2)], np.float32))])
    q = vec(1, 0)
    assert t.match(q, 0.75, 0.05).accepted
    assert not t.match(q, float(np.nextafter(np.float32(0.75), np.float32(1))), 0.05).accepted


def test_failure_penalty_changes_the_winner():
    good = node("good", vec(0.9, 0.436), seq=1)
    bad = node("bad", vec(0.93, 0.367), label="FAILURE", seq=2)
    t = ResidualTree("task", 2, [good, bad])
    q = vec(1, 0)
    assert t.match(q, 0.0, 0.0).node_id == "bad"  # without penalty the failure is nearer
    m = t.match(q, 0.0, 0.05)
    assert m.node_id == "good"
    assert m.score == pytest.approx(float(good.embedding @ q), abs=1e-6)


def test_global_argmax_reaches_any_depth():
    r = node("r", vec(0, 1), seq=1)
    c1 = node("c1", vec(0.5, 0.5), parent="r", depth=2, seq=2)
    c2 = node("c2", vec(1, 0.01), parent="c1", depth=3, seq=3)
    t = ResidualTree("task", 2, [r, c1, c2])
    m = t.match(vec(1, 0), 0.9, 0.05)
    assert m.node_id == "c2" and m.accepted
    assert [n.id for n in t.chain("c2")] == ["r", "c1", "c2"]


def test_ties_prefer_unconsolidated_then_deeper_then_newer():
    e = vec(1, 0)
    far = vec(0, 1)
    t = ResidualTree("task", 2, [node("r_old", e, seq=1), node("r_new", e, seq=2)])
    assert t.match(e, 0.5, 0.05).node_id == "r_new"  # newer wins among equals
    t.add(node("deep", e, parent="r_old", depth=2, seq=3))
    t.add(node("deep_far", far, parent="r_old", depth=2, seq=4))
    assert t.match(e, 0.5, 0.05).node_id == "deep"  # deeper beats newer
    t.replace(replace(t.get("deep"), consolidated=True))
    t.add(node("r_star", e, seq=5))
    assert t.match(e, 0.5, 0.05).node_id == "r_star"  # R* beats the consolidated v


def test_attachment_rule_eq5():
    nodes = [node("n1", vec(1, 0), seq=1)]
    for d in range(2, 6):
        nodes.append(node(f"n{d}", vec(1, 0), parent=f"n{d - 1}", depth=d, seq=d))
    t = ResidualTree("task", 2, nodes)
    assert t.attachment(Match(None, 0.1, 0.5, False), 5) == (None, 1)
    assert t.attachment(Match("n3", 0.9, 0.5, True), 5) == ("n3", 4)
    assert t.attachment(Match("n4", 0.9, 0.5, True), 5) == ("n4", 5)
    # at D_max the new node becomes a sibling of v*
    assert t.attachment(Match("n5", 0.9, 0.5, True), 5) == ("n4", 5)


def test_add_rejects_unknown_parent_and_wrong_dim():
    t = ResidualTree("task", 2)
    with pytest.raises(ValueError, match="unknown"):
        t.add(node("x", vec(1, 0), parent="missing", depth=2))
    with pytest.raises(ValueError, match="dimension"):
        t.add(node("y", vec(1, 0, 0)))


def test_matrix_grows_past_initial_capacity():
    rng = np.random.default_rng(0)
    nodes = [node(f"n{i}", vec(*rng.normal(size=8)), seq=i) for i in range(100)]
    t = ResidualTree("task", 8, nodes)
    q = nodes[63].embedding
    assert t.match(q, 0.99, 0.05).node_id == "n63"
    naive = max(nodes, key=lambda n: float(n.embedding @ q))
    assert naive.id == "n63"


def test_single_thread_and_blas_kernels_give_identical_matches(monkeypatch):
    """Small trees score on the calling thread, large ones with BLAS ``M @ q``: same Eq. 6."""
    import deltamem.core.tree as tree_mod

    rng = np.random.default_rng(7)
    base = [vec(*rng.normal(size=24)) for _ in range(60)]
    nodes: list[Node] = []
    for i in range(300):
        # every 3rd node repeats an earlier embedding: exact ties for the tie rule
        e = base[i % 60] if i % 3 == 0 else vec(*rng.normal(size=24))
        parent = nodes[int(rng.integers(0, len(nodes)))] if nodes and i % 4 == 1 else None
        nodes.append(
            node(
                f"n{i}",
                e,
                parent=None if parent is None or parent.depth >= 5 else parent.id,
                depth=1 if parent is None or parent.depth >= 5 else parent.depth + 1,
                label="FAILURE" if i % 5 == 0 else "SUCCESS",
                seq=i + 1,
            )
        )
    queries = [base[k] for k in range(0, 60, 7)] + [vec(*rng.normal(size=24)) for _ in range(20)]
    t = ResidualTree("task", 24, nodes)
    assert t._emb[: len(t)].size <= tree_mod.SINGLE_THREAD_MAX  # default: single-thread path
    calls = []
    real_rowdot = tree_mod._rowdot
    monkeypatch.setattr(tree_mod, "_rowdot", lambda m, q: calls.append(1) or real_rowdot(m, q))
    small = [t.match(q, 0.5, 0.05) for q in queries]
    assert len(calls) == len(queries)
    monkeypatch.setattr(tree_mod, "SINGLE_THREAD_MAX", 0)  # force the BLAS path
    big = [t.match(q, 0.5, 0.05) for q in queries]
    assert len(calls) == len(queries)  # the single-thread kernel was not used again
    assert small == big
    assert {m.node_id for m in small} != {None}


def test_rowdot_without_vecdot_uses_einsum(monkeypatch):
    """numpy 1.26 has no ``np.vecdot``: the einsum fallback gives the same float32 product."""
    import deltamem.core.tree as tree_mod

    rng = np.random.default_rng(3)
    m = rng.standard_normal((50, 16), dtype=np.float32)
    q = rng.standard_normal(16, dtype=np.float32)
    monkeypatch.setattr(tree_mod, "_VECDOT", None)
    out = tree_mod._rowdot(m, q)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, m.astype(np.float64) @ q.astype(np.float64), atol=1e-4)


def test_bfs_tie_rule_takes_the_first_node_in_breadth_first_order():
    e = vec(1, 0)
    t = ResidualTree("task", 2, [node("r_old", e, seq=1), node("r_new", e, seq=2)],
                     tie_rule="bfs")
    assert t.match(e, 0.5, 0.05).node_id == "r_old"  # first root
    t.add(node("deep", e, parent="r_new", depth=2, seq=3))
    assert t.match(e, 0.5, 0.05).node_id == "r_old"  # shallower beats deeper
    t.replace(replace(t.get("r_old"), consolidated=True))
    t.add(node("a2", e, parent="r_old", depth=2, seq=4))
    # r_new (unconsolidated root) now leads; among depth-2 nodes, the child of the
    # earlier parent (r_old's a2) would come before r_new's deep despite its later seq
    assert t.match(e, 0.5, 0.05).node_id == "r_new"
    t.replace(replace(t.get("r_new"), consolidated=True))
    assert t.match(e, 0.5, 0.05).node_id == "a2"


def test_unknown_tie_rule_is_a_config_error():
    from deltamem.errors import ConfigError

    with pytest.raises(ConfigError, match="tie rule"):
        ResidualTree("task", 2, tie_rule="newest")  # type: ignore[arg-type]
