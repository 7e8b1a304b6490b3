"""Eq. 5–7 on the pure ResidualTree."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deltamem.core.payload import Payload
from deltamem.core.tree import BestNode, Node, ResidualTree


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
    assert m == BestNode(None, None, 0.5, False)


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


def test_record_ties_go_to_the_variant_most_often_followed_to_a_win():
    e = vec(1, 0)
    base = replace(node("base", e, seq=1), success_hits=2)
    v1 = replace(node("v1", e, parent="base", depth=2, seq=2), success_hits=1)
    v2 = node("v2", e, parent="v1", depth=3, seq=3)  # fresh: written, never followed
    deepest = ResidualTree("task", 2, [base, v1, v2])
    record = ResidualTree("task", 2, [base, v1, v2], tie_rule="record")
    assert deepest.match(e, 0.5, 0.05).node_id == "v2"
    assert record.match(e, 0.5, 0.05).node_id == "base"  # 3/4 > 2/3 > 1/2
    record.set_state("base", 2, False, 3)  # then it lost three times: 3/7 < 1/2
    assert record.match(e, 0.5, 0.05).node_id == "v1"
    record.set_state("v1", 1, False, 1)  # 2/4 = 1/2 = v2's: equal records → deeper
    assert record.match(e, 0.5, 0.05).node_id == "v2"


def test_attachment_rule_eq5():
    nodes = [node("n1", vec(1, 0), seq=1)]
    for d in range(2, 6):
        nodes.append(node(f"n{d}", vec(1, 0), parent=f"n{d - 1}", depth=d, seq=d))
    t = ResidualTree("task", 2, nodes)
    assert t.attachment(None, 5) == (None, 1)
    assert t.attachment("n3", 5) == ("n3", 4)
    assert t.attachment("n4", 5) == ("n4", 5)
    # at D_max the new node becomes a sibling of v*
    assert t.attachment("n5", 5) == ("n4", 5)


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
    monkeypatch.setattr(tree_mod, "_rowdot",
                        lambda m, q, out: calls.append(1) or real_rowdot(m, q, out))
    small = [t.match(q, 0.5, 0.05) for q in queries]
    assert len(calls) == len(queries)
    monkeypatch.setattr(tree_mod, "GEMV_ONE_THREAD", 0)  # one dot per row
    rows = [t.match(q, 0.5, 0.05) for q in queries]
    assert len(calls) == 2 * len(queries)
    monkeypatch.setattr(tree_mod, "SINGLE_THREAD_MAX", 0)  # force the BLAS thread pool
    big = [t.match(q, 0.5, 0.05) for q in queries]
    assert len(calls) == 2 * len(queries)  # the single-thread kernel was not used again
    assert small == rows == big
    assert {m.node_id for m in small} != {None}


def test_rowdot_without_vecdot_uses_einsum(monkeypatch):
    """numpy 1.26 has no ``np.vecdot``: the einsum fallback gives the same float32 product."""
    import deltamem.core.tree as tree_mod

    rng = np.random.default_rng(3)
    m = rng.standard_normal((50, 16), dtype=np.float32)
    q = rng.standard_normal(16, dtype=np.float32)
    monkeypatch.setattr(tree_mod, "_VECDOT", None)
    monkeypatch.setattr(tree_mod, "GEMV_ONE_THREAD", 0)
    out = tree_mod._rowdot(m, q, np.empty(50, np.float32))
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


# -- the standing penalty (Eq. 6 extended) ---------------------------------------------------


def test_a_node_whose_matches_keep_failing_loses_standing() -> None:
    from deltamem.core.tree import standing_penalty

    e = np.zeros(8, dtype=np.float32)
    e[0] = 1.0
    tree = ResidualTree("task", 8, failure_weight=0.1)
    tree.add(node("a", e, seq=1))
    tree.add(node("b", e, seq=2))
    assert tree.match(e, 0.5, 0.05).node_id == "b"  # exact tie: the newer one
    b = tree.get("b")
    tree.replace(replace(b, failure_hits=1))
    m = tree.match(e, 0.5, 0.05)
    assert m.node_id == "a" and m.score == 1.0
    assert tree.exact_scores(np.array([1]), e, 0.05)[0] == 1.0 - float(np.float32(0.05))
    tree.replace(replace(b, failure_hits=1, success_hits=4))  # successes restore it
    assert tree.get("b").failure_hits == 1
    assert standing_penalty(4, 1, 0.1) == 0.1 / 6
    # λ = 0: the paper's Eq. 6, failures counted but not scored
    plain = ResidualTree("task", 8)
    plain.add(node("a", e, seq=1))
    plain.add(replace(node("b", e, seq=2), failure_hits=5))
    assert plain.match(e, 0.5, 0.05).node_id == "b"


# -- columns and text (what a tree keeps, what it reads from its details source) ------------


def _random_tree_nodes(n: int = 40, d: int = 16, seed: int = 5) -> list[Node]:
    rng = np.random.default_rng(seed)
    nodes: list[Node] = []
    for i in range(n):
        parent = nodes[int(rng.integers(0, len(nodes)))] if nodes and i % 3 else None
        if parent is not None and parent.depth >= 4:
            parent = None
        nodes.append(Node(
            id=f"n{i}", tree="task", kind="ROOT" if parent is None else "RESIDUAL",
            label="FAILURE" if i % 4 == 0 else "SUCCESS",
            parent=None if parent is None else parent.id,
            depth=1 if parent is None else parent.depth + 1, trigger=f"trigger {i}",
            embedding=vec(*rng.normal(size=d)), payload=Payload(f"when {i}", f"do {i} " * i),
            success_hits=i % 3, consolidated=i % 7 == 0, seq=i + 1,
            origin="consolidated" if i % 7 == 0 else "extracted",
            source=f"n{i - 1}" if i % 7 == 0 and i else None, episode_id=f"e{i}",
            created_at=float(i), failure_hits=i % 2, last_used=i * 2,
        ))  # fmt: skip
    return nodes


def _same(a: Node, b: Node) -> bool:
    return a == b and np.array_equal(a.embedding, b.embedding)


class Source:
    """A details source over a dict of nodes that counts what it was asked for."""

    def __init__(self, nodes: list[Node]) -> None:
        self.by_id = {n.id: n for n in nodes}
        self.asked: list[list[str]] = []

    def __call__(self, ids):
        self.asked.append(list(ids))
        return [self.by_id[i] for i in ids if i in self.by_id]


def test_nodes_read_back_are_the_nodes_added_with_or_without_a_details_source():
    nodes = _random_tree_nodes()
    held = ResidualTree("task", 16, nodes)
    lazy = ResidualTree("task", 16, nodes, details=Source(nodes))
    for t in (held, lazy):
        assert all(_same(a, b) for a, b in zip(t, nodes, strict=True))
        assert _same(t.get("n17"), nodes[17])
        chain = t.chain("n38")
        assert [n.id for n in chain] == t.chain_ids("n38")
        assert chain[-1].id == "n38" and chain[0].parent is None
        assert all(_same(n, nodes[int(n.id[1:])]) for n in chain)
        assert [n.id for n in t.children(None)] == [n.id for n in nodes if n.parent is None]


def test_scoring_and_state_read_no_text_and_chains_are_cached(monkeypatch):
    import deltamem.core.tree as tree_mod

    monkeypatch.setattr(tree_mod, "DETAILS_CACHE", 4)  # keeps the last 4 nodes added
    nodes = _random_tree_nodes()
    src = Source(nodes)
    t = ResidualTree("task", 16, nodes, details=src)
    q = nodes[20].embedding
    m = t.match(q, 0.5, 0.05)
    t.scores(q, 0.05)
    t.state("n3")
    t.set_state("n3", 5, True, 2)
    assert t.ids() == [n.id for n in nodes] and t.summary()["consolidated"] >= 1
    t.attachment("n20", 5)
    assert src.asked == []  # nothing above reads a node's text
    chain = t.chain(m.node_id)
    assert src.asked == [[n.id for n in chain]]
    t.chain(m.node_id)  # the recalled chain again: from the cache
    assert len(src.asked) == 1
    got = t.get("n3")
    assert (got.success_hits, got.consolidated, got.failure_hits) == (5, True, 2)
    assert got.payload == nodes[3].payload and got.last_used == nodes[3].last_used


def test_a_tree_keeps_the_text_of_the_nodes_added_up_to_its_cache():
    nodes = _random_tree_nodes()
    src = Source(nodes)
    t = ResidualTree("task", 16, nodes, details=src)
    assert all(_same(a, b) for a, b in zip([t.get(n.id) for n in nodes], nodes, strict=True))
    assert src.asked == []  # a bank opened with a few thousand nodes reads no text again


def test_a_node_its_source_no_longer_has_is_a_clear_error(monkeypatch):
    import deltamem.core.tree as tree_mod
    from deltamem.errors import StoreError

    monkeypatch.setattr(tree_mod, "DETAILS_CACHE", 0)  # no text kept: every read asks
    nodes = _random_tree_nodes(5)
    src = Source(nodes)
    t = ResidualTree("task", 16, nodes, details=src)
    del src.by_id["n2"]
    with pytest.raises(StoreError, match="no longer stored"):
        t.get("n2")


def test_summary_counts_what_the_nodes_say():
    nodes = _random_tree_nodes()
    s = ResidualTree("task", 16, nodes, details=Source(nodes)).summary()
    roots = [n for n in nodes if n.kind == "ROOT"]
    assert s["kind"] == {"ROOT": len(roots), "RESIDUAL": len(nodes) - len(roots)}
    fails = sum(n.label == "FAILURE" for n in nodes)
    assert s["label"] == {"SUCCESS": len(nodes) - fails, "FAILURE": fails}
    assert s["consolidated"] == sum(n.consolidated for n in nodes)
    assert s["failure_hits"] == sum(n.failure_hits for n in nodes)
    assert s["tokens"]["ROOT"] == (sum(len(n.payload.text.split()) for n in roots), len(roots))


def test_vectors_of_any_length_score_as_their_cosine():
    """Rows and queries that are not unit length (the filter skips the scaling only for
    unit ones) give the match of their normalised versions, and the same cosine: scaled by
    powers of two, every product and sum scales exactly, so the scores are equal."""
    nodes = _random_tree_nodes()
    unit_tree = ResidualTree("task", 16, nodes)
    scaled = [replace(n, embedding=n.embedding * np.float32(2.0 ** (i % 5 - 2)))
              for i, n in enumerate(nodes)]
    scaled_tree = ResidualTree("task", 16, scaled)
    rng = np.random.default_rng(9)
    for _ in range(30):
        q = vec(*rng.normal(size=16))
        a = unit_tree.match(q, 0.3, 0.05)
        assert scaled_tree.match(q * np.float32(4.0), 0.3, 0.05) == a


def test_nodes_made_without_init_are_the_nodes_init_makes():
    """``Node._of`` (what a tree's reads and a bank's open use, issue 26) gives the object
    ``Node(...)`` gives: every field set, equal, the same hash and repr, still frozen."""
    from dataclasses import FrozenInstanceError, fields

    from deltamem.store.records import node_from_columns

    nodes = _random_tree_nodes()
    names = {f.name for f in fields(Node)}
    for t in (ResidualTree("task", 16, nodes),
              ResidualTree("task", 16, nodes, details=Source(nodes))):
        for got in [*t, t.get("n5"), *t.chain("n38")]:
            want = nodes[int(got.id[1:])]
            assert set(vars(got)) == names
            same = Node(**{k: getattr(got, k) for k in names})
            assert got == same and hash(got) == hash(same) and repr(got) == repr(same)
            assert _same(got, want)
            with pytest.raises(FrozenInstanceError):
                got.depth = 9  # type: ignore[misc]
    n = nodes[7]
    cols = {**{k: getattr(n, k) for k in names}, "parent_id": n.parent, "source_id": n.source,
            "activation": n.payload.activation, "procedure": n.payload.procedure,
            "termination": n.payload.termination}
    got = node_from_columns(cols, n.embedding)
    assert set(vars(got)) == names and got == n


def test_match_is_eq6_by_definition_on_both_paths() -> None:
    """``match`` (its one-row fast path and its window path, issue 26) returns exactly what
    Eq. 6 by definition gives: the arg-max of :func:`exact_cosine` − ε·[FAILURE] − standing
    penalty, ties by the deepest rule, the same score to the last bit — with unit and
    non-unit rows and queries, ε changing between queries, and the tree's scratch buffers
    reused from one query to the next."""
    from deltamem.core.tree import exact_cosine, standing_penalty

    lam = 0.1
    base = _random_tree_nodes(60, 16, seed=11)
    # every 5th node repeats an earlier embedding: exact ties, so the window path runs
    nodes = [replace(n, embedding=base[i // 2].embedding) if i % 5 == 4 else n
             for i, n in enumerate(base)]
    scaled = [replace(n, embedding=n.embedding * np.float32(1.0 + (i % 3) * 0.37))
              for i, n in enumerate(nodes)]
    rng = np.random.default_rng(12)
    queries: list[np.ndarray] = []
    for k in range(60):
        if k % 3 == 0:
            queries.append(nodes[int(rng.integers(0, len(nodes)))].embedding.copy())
        else:
            queries.append(vec(*rng.normal(size=16)) * np.float32(1.0 if k % 2 else 1.9))
    for tree_nodes in (nodes, scaled):
        t = ResidualTree("task", 16, tree_nodes, failure_weight=lam)
        windows = []
        exact = t._exact
        t._exact = lambda *a, w=windows, f=exact: w.append(1) or f(*a)  # type: ignore[method-assign]
        for k, q in enumerate(queries):
            eps = (0.05, 0.05, 0.0, 0.1)[k % 4]
            q64 = q.astype(np.float64)

            def s(n: Node, q64: np.ndarray = q64, eps: float = eps) -> float:
                pen = float(np.float32(standing_penalty(n.success_hits, n.failure_hits, lam)))
                return exact_cosine(n.embedding, q64) - (eps if n.label == "FAILURE" else 0.0) - pen

            best = max(tree_nodes, key=lambda n: (s(n), not n.consolidated, n.depth, n.seq))
            want = BestNode(best.id, s(best), 0.4, s(best) >= 0.4)
            got = t.match(q if k % 7 else q.tolist(), 0.4, eps)  # type: ignore[arg-type]
            assert got == want and vars(got) == vars(want)
        assert 0 < len(windows) < len(queries) // 2  # both paths ran
