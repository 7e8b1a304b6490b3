"""How a bank's nodes are read: streamed at open, by id for a recalled chain, counted per
tree. The same answers on every backend, and the same as ``load_nodes``."""

from __future__ import annotations

import numpy as np

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.store.factory import open_store

from .store_cases import ACTIONS, GOALS, SCENES, H, build


def _same(a, b) -> bool:
    return a == b and np.array_equal(a.embedding, b.embedding)


def test_iter_nodes_by_id_and_counts_agree_with_load_nodes(new_bank):
    seq = [(GOALS[i % 5], SCENES[i % 2], ACTIONS[: 1 + i % 4], i % 3 != 1) for i in range(9)]
    mem = build(seq, new_bank())
    store = mem.store
    every = store.load_nodes()
    assert len(every) >= 9
    assert all(_same(a, b) for a, b in zip(store.iter_nodes(), every, strict=True))
    later = every[len(every) // 2 :]
    assert all(_same(a, b) for a, b in zip(store.iter_nodes(after_seq=later[0].seq - 1), later,
                                            strict=True))
    picked = [every[5].id, every[1].id, "no-such-node", every[5].id]
    got = store.nodes_by_id(picked)
    assert [n.id for n in got] == [every[1].id, every[5].id]  # by seq, once, unknown left out
    assert _same(got[1], every[5])
    ids = [n.id for n in every]
    assert [n.id for n in store.nodes_by_id(ids[::-1] * 2)] == ids
    assert store.node_counts() == {t: sum(n.tree == t for n in every) for t in ("task", "env")}
    assert store.nodes_by_id([]) == []
    mem.close()


def test_a_bank_read_in_pages_gives_every_node_once_in_order(new_bank, monkeypatch):
    seq = [(GOALS[i % 5], SCENES[i % 2], ACTIONS[: 1 + i % 4], i % 3 != 1) for i in range(9)]
    mem = build(seq, new_bank())
    store = mem.store
    every = store.load_nodes()
    # a backend that reads in pages (PostgreSQL) reads 4 rows a statement here; the page
    # boundary falls inside the bank and on its last row
    monkeypatch.setattr(type(store), "PAGE", 4, raising=False)
    for n in (len(every) // 4 * 4, len(every)):
        got = list(store.iter_nodes(after_seq=every[-n].seq - 1)) if n else []
        assert len(got) == n and all(_same(a, b) for a, b in zip(got, every[-n:], strict=True))
    assert all(_same(a, b) for a, b in zip(store.iter_nodes(), every, strict=True))
    mem.close()


def test_an_empty_bank_counts_and_streams_nothing(new_bank):
    store = open_store(new_bank())
    assert store.node_counts() == {}
    assert list(store.iter_nodes()) == [] and store.nodes_by_id(["x"]) == []
    store.close()


def test_nodes_by_id_reads_more_ids_than_one_statement_takes(new_bank):
    store = open_store(new_bank())
    store.init_meta(H.name, H.dim, {"domain": "generic"})
    vecs = H.embed_passages([f"text {i}" for i in range(1203)])
    with store.transaction():
        for i, v in enumerate(vecs):
            store.insert_node(Node(id=f"n{i:04d}", tree="task", kind="ROOT", label="SUCCESS",
                                   parent=None, depth=1, trigger=f"text {i}", embedding=v,
                                   payload=Payload("a", "b")))  # fmt: skip
    ids = [f"n{i:04d}" for i in range(1203)]
    got = store.nodes_by_id(ids[::-1])
    assert [n.id for n in got] == ids
    assert np.array_equal(got[1202].embedding, vecs[1202])
    assert store.node_counts() == {"task": 1203}
    store.close()
