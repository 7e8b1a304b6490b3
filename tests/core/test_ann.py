"""Eq. 6 search modes: exact search equals the definition; ANN keeps the penalty and ties exact."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.core.payload import Payload
from deltamem.core.tree import Node, ResidualTree
from deltamem.errors import ConfigError
from deltamem.memories.deltamem import DeltaMem
from deltamem.testing import HashingEmbedder, make_episode

# -- the definition ---------------------------------------------------------------------------


def naive_match(nodes: list[Node], q: np.ndarray, tau: float, eps: float, rule: str = "deepest"):
    """Eq. 6 + the tie rule of tree.py, by a Python loop over nodes (the reference)."""
    q64 = np.asarray(q, dtype=np.float32).astype(np.float64)
    by_id = {n.id: n for n in nodes}

    def cos(n: Node) -> float:
        # float64 products of the float32 components, summed by ddot (tree.py, Scores)
        e64 = np.asarray(n.embedding, dtype=np.float32).astype(np.float64)
        den = math.sqrt(float(np.dot(e64, e64)) * float(np.dot(q64, q64)))
        return min(1.0, max(-1.0, float(np.dot(e64, q64)) / den))

    def path(n: Node) -> tuple[int, ...]:
        out: list[int] = []
        cur: Node | None = n
        while cur is not None:
            out.append(cur.seq)
            cur = by_id[cur.parent] if cur.parent else None
        return tuple(reversed(out))

    scored = [(cos(n) - (eps if n.label == "FAILURE" else 0.0), n) for n in nodes]
    top = max(s for s, _ in scored)
    tied = [n for s, n in scored if s == top]
    if rule == "deepest":
        best = max(tied, key=lambda n: (not n.consolidated, n.depth, n.seq))
    elif rule == "record":  # best (c+1)/(c+f+2), compared exactly, then as deepest
        best = max(tied, key=lambda n: (not n.consolidated,
                                        Fraction(n.success_hits + 1,
                                                 n.success_hits + n.failure_hits + 2),
                                        n.depth, n.seq))
    else:  # first in breadth-first order
        best = min(tied, key=lambda n: (n.consolidated, n.depth, path(n)))
    return best.id, top, top >= tau


def _grid_pool(d: int) -> list[np.ndarray]:
    """Unit vectors whose dot products are exact in float32: ±e_i and (±½)^4 blocks."""
    pool = []
    for i in range(d):
        for sign in (1.0, -1.0):
            v = np.zeros(d, np.float32)
            v[i] = sign
            pool.append(v)
    for mask in range(16):
        v = np.zeros(d, np.float32)
        v[:4] = [0.5 if mask >> b & 1 else -0.5 for b in range(4)]
        pool.append(v)
    return pool


def _build(spec, vectors) -> list[Node]:
    """Nodes from (vector index, label bit, parent choice, consolidated bit) tuples."""
    nodes: list[Node] = []
    for i, (vi, fail, parent_pick, cons) in enumerate(spec):
        parent = None
        if nodes and parent_pick is not None:
            p = nodes[parent_pick % len(nodes)]
            parent = p if p.depth < 5 else None
        nodes.append(
            Node(
                id=f"n{i}",
                tree="task",
                kind="ROOT" if parent is None else "RESIDUAL",
                label="FAILURE" if fail else "SUCCESS",
                parent=None if parent is None else parent.id,
                depth=1 if parent is None else parent.depth + 1,
                trigger=f"t{i}",
                embedding=vectors[vi % len(vectors)],
                payload=Payload("a", "b"),
                consolidated=cons,
                seq=i + 1,
                # records for the "record" tie rule, spread over small counts
                success_hits=vi % 3,
                failure_hits=(vi // 3) % 3,
            )
        )
    return nodes


_spec = st.lists(
    st.tuples(
        st.integers(0, 10**6), st.booleans(), st.none() | st.integers(0, 10**6), st.booleans()
    ),
    min_size=1,
    max_size=60,
)


@given(
    spec=_spec,
    qi=st.integers(0, 10**6),
    eps=st.sampled_from([0.0, 0.05, 0.25, 0.5, 1.0]),
    tau=st.sampled_from([-1.0, 0.0, 0.45, 0.5, 0.75, 1.0]),
    d=st.sampled_from([4, 7]),
    pool_size=st.integers(1, 6),
    rule=st.sampled_from(["bfs", "deepest", "record"]),
)
def test_exact_search_equals_definition_on_ties(spec, qi, eps, tau, d, pool_size, rule):
    # few distinct grid vectors → many exact ties, exact arithmetic everywhere
    pool = _grid_pool(d)
    vectors = [pool[(qi + 7 * k) % len(pool)] for k in range(pool_size)]
    nodes = _build(spec, vectors)
    tree = ResidualTree("task", d, nodes, tie_rule=rule)
    for q in (vectors[qi % pool_size], pool[qi % len(pool)]):
        m = tree.match(q, tau, eps)
        assert (m.node_id, m.score, m.accepted) == naive_match(nodes, q, tau, eps, rule)


@given(spec=_spec, seed=st.integers(0, 2**32 - 1), eps=st.sampled_from([0.0, 0.05, 0.3]))
def test_exact_search_equals_definition_on_random_vectors(spec, seed, eps):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 40))
    raw = rng.standard_normal((8, d)).astype(np.float32)
    vectors = list((raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32))
    nodes = _build(spec, vectors)
    tree = ResidualTree("task", d, nodes)
    q = rng.standard_normal(d).astype(np.float32)
    q /= np.linalg.norm(q)
    for query in (q, vectors[seed % 8]):
        m = tree.match(query, 0.5, eps)
        assert (m.node_id, m.score, m.accepted) == naive_match(nodes, query, 0.5, eps)


@pytest.mark.parametrize(("rule", "winner"), [("deepest", "n36"), ("bfs", "n0")])
def test_identical_rows_tie_regardless_of_their_position_in_the_matrix(rule, winner):
    # BLAS sgemv rounds tail rows differently: with 37 copies of one 7-d vector the
    # float32 scores of rows 32-35 came out one ulp above the others, so the "tie" was
    # decided by rounding noise (n35) instead of the tie rule (deepest: the newest root
    # n36; bfs: the first root n0).
    rng = np.random.default_rng(0)
    raw = rng.standard_normal((37, 7)).astype(np.float32)
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    raw[:] = raw[0]
    q = rng.standard_normal(7).astype(np.float32)
    q /= np.linalg.norm(q)
    nodes = _build([(i, False, None, False) for i in range(37)], list(raw))
    tree = ResidualTree("task", 7, nodes, tie_rule=rule)
    assert tree.match(q, -1.0, 0.05).node_id == winner


# -- ANN ---------------------------------------------------------------------------------------


def _clustered(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 40), d)).astype(np.float32)
    x = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, d)).astype(
        np.float32
    ) * np.float32(0.6 / np.sqrt(d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), rng.random(n) < 0.25


def test_ann_agrees_with_exact_on_clustered_data():
    pytest.importorskip("hnswlib")
    x, fail = _clustered(3000, 32)
    spec = [(i, bool(fail[i]), None, False) for i in range(len(x))]
    nodes = _build(spec, list(x))
    exact = ResidualTree("task", 32, nodes)
    ann = ResidualTree("task", 32, nodes, search="ann")
    rng = np.random.default_rng(1)
    qs = x[rng.integers(0, len(x), 100)] + rng.standard_normal((100, 32)).astype(np.float32) * 0.05
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    agree = sum(ann.match(q, 0.5, 0.05) == exact.match(q, 0.5, 0.05) for q in qs)
    assert agree >= 99


def test_ann_keeps_the_failure_penalty_exact():
    pytest.importorskip("hnswlib")
    good = np.array([0.9, 0.436], np.float32)
    bad = np.array([0.93, 0.367], np.float32)
    nodes = _build([(0, False, None, False), (1, True, None, False)], [good, bad])
    tree = ResidualTree("task", 2, nodes, search="ann", ann_options={"k": 1})
    q = np.array([1, 0], np.float32)
    assert tree.match(q, 0.0, 0.0).node_id == "n1"  # the FAILURE node is nearer
    assert tree.match(q, 0.0, 0.05).node_id == "n0"  # after the penalty the SUCCESS wins


def test_ann_expands_duplicates_and_applies_the_tie_rule():
    pytest.importorskip("hnswlib")
    x, _ = _clustered(400, 16)
    x[[10, 50, 90, 300]] = x[7]
    nodes = _build([(i, False, None, False) for i in range(400)], list(x))
    tree = ResidualTree("task", 16, nodes, search="ann", ann_options={"k": 1})
    assert tree.match(x[7], 0.5, 0.05).node_id == "n300"
    tree.replace(replace(tree.get("n300"), consolidated=True))
    assert tree.match(x[7], 0.5, 0.05).node_id == "n90"
    assert tree._ann is not None and tree._ann.distinct == 396


def test_ann_indexes_nodes_added_after_a_query():
    pytest.importorskip("hnswlib")
    x, _ = _clustered(200, 16)
    nodes = _build([(i, False, None, False) for i in range(200)], list(x))
    tree = ResidualTree("task", 16, nodes[:100], search="ann")
    assert tree.match(x[150], 0.5, 0.05).node_id != "n150"
    for n in nodes[100:]:
        tree.add(n)
    assert tree.match(x[150], 0.5, 0.05).node_id == "n150"
    assert tree._ann is not None and len(tree._ann) == 200


def test_deltamem_ann_mode_learns_like_exact():
    pytest.importorskip("hnswlib")
    results = []
    for search in ("exact", "ann"):
        mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(dim=64), domain="alfworld",
                            search=search)  # fmt: skip
        for i in range(8):
            ep = make_episode(f"put a clean apple {i % 3} in fridge", episode_id=f"e{i}")
            mem.learn(ep)
        r = mem.recall(ep.task)
        results.append(
            (mem.stats()["nodes"], r.details["task"]["score"], len(r.details["env"]["chain"]))
        )
        mem.close()
    assert results[0] == results[1]


def test_ann_without_its_package_is_a_config_error_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "hnswlib", None)  # import hnswlib → ImportError
    with pytest.raises(ConfigError, match=r"pip install 'deltamem\[ann\]'"):
        ResidualTree("task", 4, search="ann")
    with pytest.raises(ConfigError, match="hnswlib"):
        DeltaMem.open(":memory:", embedder=HashingEmbedder(dim=16), search="ann")


def test_unknown_search_mode_is_a_config_error():
    with pytest.raises(ConfigError):
        ResidualTree("task", 4, search="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="search"):
        DeltaMem.open(":memory:", embedder=HashingEmbedder(dim=16), search="fast")
