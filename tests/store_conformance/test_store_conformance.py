"""The store contract, run on every backend: the same tests pass on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_cases import ACTIONS, GOALS, SCENES, H, build, check_invariants

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import BankReadOnlyError, EmbedderMismatchError, StoreError
from deltamem.store import SCHEMA_VERSION, SQLiteStore
from deltamem.store.factory import open_store
from deltamem.testing import check_memory, make_episode

episodes = st.lists(
    st.tuples(
        st.sampled_from(GOALS),
        st.sampled_from(SCENES),
        st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=5),
        st.booleans(),
    ),
    min_size=1,
    max_size=10,
)
fixture_ok = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def export_text(store) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in store.iter_export())


@fixture_ok
@given(seq=episodes)
def test_any_learn_sequence_keeps_trees_consistent_and_round_trips(new_bank, seq):
    mem = build(seq, new_bank())
    check_invariants(mem)
    text = export_text(mem.store)
    other = open_store(new_bank())
    other.import_records(json.loads(line) for line in text.splitlines())
    assert export_text(other) == text
    mem2 = DeltaMem(other, H)
    assert mem2.stats() == mem.stats()
    check_invariants(mem2)
    mem.close()
    mem2.close()


def test_export_is_the_same_records_as_sqlite(new_bank, tmp_path):
    first = [(GOALS[1], SCENES[0], ACTIONS[:2], True)]
    seq = first + [(GOALS[1], SCENES[0], ACTIONS[:4], True)] * 4
    mem = build(seq, new_bank(), tau_task=0.5, tau_env=0.5)
    assert any(n.consolidated for n in mem.nodes("task"))
    text = export_text(mem.store)
    lite = SQLiteStore(tmp_path / "copy.db")
    lite.import_records(json.loads(line) for line in text.splitlines())
    assert export_text(lite) == text
    recs = [json.loads(line) for line in text.splitlines()]
    assert recs[0]["type"] == "meta" and recs[0]["schema_version"] == SCHEMA_VERSION
    assert recs[0]["embedder_name"] == H.name and recs[0]["embedder_dim"] == H.dim
    assert sum(r["type"] == "learned" for r in recs) == 5
    lite.close()
    mem.close()


def test_reopened_bank_recalls_the_same(new_bank):
    loc = new_bank()
    mem = build([(g, SCENES[0], ACTIONS[:3], True) for g in GOALS], loc)
    task = make_episode(GOALS[2]).task
    before = mem.recall(task).to_dict()
    nodes = mem.stats()["nodes"]
    mem.close()
    again = DeltaMem.open(loc, embedder=H)
    assert again.recall(task).to_dict() == before
    assert again.config == mem.config
    again.close()
    ro = DeltaMem.open(loc, embedder=None, readonly=True)
    assert ro.stats()["nodes"] == nodes
    ro.close()


def test_import_into_a_non_empty_bank_is_refused(new_bank):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    recs = list(mem.store.iter_export())
    with pytest.raises(StoreError, match="empty bank"):
        mem.store.import_records(recs)
    mem.close()


def test_a_malformed_record_imports_nothing(new_bank):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    recs = list(mem.store.iter_export())
    del recs[1]["trigger"]
    target = open_store(new_bank())
    with pytest.raises(StoreError, match="record 2: node misses trigger"):
        target.import_records(recs)
    assert target.load_nodes() == [] and target.meta().get("embedder_name") is None
    with pytest.raises(StoreError, match="unknown type"):
        target.import_records([{"type": "banana"}])
    with pytest.raises(StoreError, match="record 2 is not an object"):
        target.import_records([recs[0], ["node"]])
    with pytest.raises(StoreError, match="schema version 99"):
        target.import_records([{**recs[0], "schema_version": 99}])
    assert target.load_nodes() == [] and target.meta().get("embedder_name") is None
    target.close()
    mem.close()


def test_newer_schema_version_is_refused(new_bank):
    loc = new_bank()
    store = open_store(loc)
    with store.transaction():  # both backends' connections have execute()
        store._conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    store.close()
    with pytest.raises(StoreError, match="schema version 99"):
        open_store(loc)


def test_another_embedder_is_refused(new_bank):
    loc = new_bank()
    build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], loc).close()
    with pytest.raises(EmbedderMismatchError, match="built with embedder"):
        DeltaMem.open(loc, embedder=HashingEmbedder(dim=64))


def test_readonly_open_of_a_missing_bank_fails(new_bank):
    with pytest.raises(StoreError):
        open_store(new_bank(), readonly=True)


def test_transaction_rolls_back_everything_and_nests(new_bank):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    store = mem.store
    node = mem.nodes("task")[0]
    fresh = type(node)(**{**node.__dict__, "id": "n-new", "seq": 0})
    with pytest.raises(RuntimeError), store.transaction():
        store.insert_node(fresh)
        with store.transaction():  # joins the outer transaction
            assert store.mark_learned("ep-x")
        store.increment_hits(node.id)
        raise RuntimeError("boom")
    assert "n-new" not in {n.id for n in store.load_nodes()}
    assert not store.is_learned("ep-x") and store.node_state(node.id) == (0, False)
    mem.close()


def test_counters_flags_and_learned_marks(new_bank):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    store = mem.store
    nid = mem.nodes("task")[0].id
    assert [store.increment_hits(nid) for _ in range(3)] == [1, 2, 3]
    assert store.mark_consolidated(nid) is True
    assert store.mark_consolidated(nid) is False
    assert store.node_state(nid) == (3, True)
    with pytest.raises(StoreError):
        store.increment_hits("no-such-node")
    assert store.mark_learned("x") is True and store.mark_learned("x") is False
    assert store.last_learned() == "x" and store.learned_count() == 2
    store.add_rejection(tree="task", role="skill", reason="bad json", raw="{", episode_id="x")
    assert [r["reason"] for r in store.rejections()] == ["bad json"]
    mem.close()


def test_another_writer_is_seen_incrementally(new_bank):
    loc = new_bank()
    a = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], loc)
    b = DeltaMem.open(loc, embedder=H)
    v0 = a.store.version()
    last = max(n.seq for t in ("task", "env") for n in a.nodes(t))
    b.learn(make_episode(GOALS[3], scene=SCENES[1], actions=ACTIONS[2:4], episode_id="b1"))
    assert a.store.version() != v0
    newer = a.store.load_nodes(after_seq=last)
    assert newer and all(n.seq > last for n in newer)
    assert [n.seq for n in newer] == sorted(n.seq for n in newer)
    assert a.stats() == b.stats()  # a reloads what b committed
    a.close()
    b.close()


def test_memory_contract_holds(new_bank):
    mem = DeltaMem.open(new_bank(), embedder=H, domain="alfworld")
    check_memory(mem)
    mem.close()


def test_learning_into_a_bank_opened_read_only_is_a_read_only_error(new_bank):
    loc = new_bank()
    build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], loc).close()
    ro = DeltaMem.open(loc, embedder=H, readonly=True)
    try:
        with pytest.raises(BankReadOnlyError):
            ro.learn(make_episode(GOALS[1], scene=SCENES[1], actions=ACTIONS[:2]))
        assert sum(ro.stats()["nodes"].values()) > 0  # still answers reads
    finally:
        ro.close()
