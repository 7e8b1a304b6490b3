"""pgvector search (Eq. 6 in the database) returns the in-process search's node, ties included."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.core.payload import Payload
from deltamem.core.tree import Node, ResidualTree

from .store_cases import ACTIONS, GOALS, SCENES, H, build, pg_url_or_skip

DIM = 8
rng = np.random.default_rng(7)
POOL = rng.normal(size=(5, DIM)).astype(np.float32)
POOL /= np.linalg.norm(POOL, axis=1, keepdims=True)

# a node: (parent index or None, pool vector, FAILURE?, consolidated?)
forest = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 30)),
        st.integers(0, len(POOL) - 1),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


@pytest.fixture
def pg_store():
    from deltamem.store.postgres import PostgresStore, drop_bank

    url = pg_url_or_skip()
    made = []

    def make(index: str = "exact") -> PostgresStore:
        s = PostgresStore(url, bank="search-" + uuid.uuid4().hex[:10], index=index)
        s.init_meta("pool", DIM, {})
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
        drop_bank(url, bank=s.bank)


def fill(store, spec) -> ResidualTree:
    tree = ResidualTree("task", DIM)
    nodes: list[Node] = []
    for i, (parent, vec, failure, cons) in enumerate(spec):
        p = nodes[parent] if parent is not None and parent < len(nodes) else None
        if p is not None and p.depth >= 5:
            p = None
        node = Node(
            id=f"n{i}", tree="task", kind="RESIDUAL" if p else "ROOT",
            label="FAILURE" if failure else "SUCCESS", parent=p.id if p else None,
            depth=p.depth + 1 if p else 1, trigger=f"t{vec}", embedding=POOL[vec],
            payload=Payload("a", "b", "c"), consolidated=cons, episode_id="e",
        )  # fmt: skip
        node = store.insert_node(node)
        nodes.append(node)
        tree.add(node)
    return tree


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=forest, qi=st.integers(0, len(POOL) - 1), eps=st.sampled_from([0.0, 0.05, 0.3]))
def test_exact_search_returns_the_in_process_node(pg_store, spec, qi, eps):
    store = pg_store()
    tree = fill(store, spec)
    for q in (POOL[qi], (POOL[qi] + POOL[(qi + 1) % len(POOL)]) / 2):
        want = tree.match(q, 0.5, eps)
        got = store.match("task", q, 0.5, eps)
        assert got == want
    assert store.match("env", POOL[0], 0.5, eps).node_id is None


def test_ties_follow_the_tree_rule(pg_store):
    store = pg_store()
    # five nodes with the same vector: consolidated root, two depths, newest wins at equal depth
    spec = [(None, 0, False, True), (0, 0, False, False), (1, 0, False, False),
            (1, 0, False, False), (None, 1, False, False)]  # fmt: skip
    tree = fill(store, spec)
    got = store.match("task", POOL[0], 0.0, 0.05)
    assert got.node_id == "n3" == tree.match(POOL[0], 0.0, 0.05).node_id


def test_hnsw_index_gives_the_same_node_on_a_small_bank(pg_store):
    exact, hnsw = pg_store(), pg_store("hnsw")
    spec = [(None if i % 4 == 0 else i - 1, i % len(POOL), i % 3 == 0, False) for i in range(20)]
    fill(exact, spec)
    tree = fill(hnsw, spec)
    idx = hnsw._exec(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexdef LIKE %s",
        (hnsw.schema, "%hnsw%"),
    ).fetchone()[0]
    assert idx == 4
    for qi in range(len(POOL)):
        assert hnsw.match("task", POOL[qi], 0.5, 0.05) == tree.match(POOL[qi], 0.5, 0.05)
        assert exact.match("task", POOL[qi], 0.5, 0.05) == tree.match(POOL[qi], 0.5, 0.05)


def test_deltamem_recall_matches_store_search(pg_store):
    url = pg_url_or_skip()
    loc = f"{url}{'&' if '?' in url else '?'}bank=dm-{uuid.uuid4().hex[:10]}"
    mem = build([(g, s, ACTIONS[:3], i % 2 == 0) for i, g in enumerate(GOALS) for s in SCENES],
                loc)
    try:
        for g in GOALS:
            for tree in ("task", "env"):
                q = H.embed_queries([g])[0]
                want = mem.trees[tree].match(q, 0.6, mem.config.epsilon)
                assert mem.store.match(tree, q, 0.6, mem.config.epsilon) == want
    finally:
        from deltamem.store.postgres import drop_bank

        mem.close()
        drop_bank(loc)
