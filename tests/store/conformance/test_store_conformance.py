"""The store contract, run on every backend: the same tests pass on SQLite and PostgreSQL."""

from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import (
    BankDamagedError,
    BankReadOnlyError,
    EmbedderMismatchError,
    InvalidImportError,
    StoreError,
)
from deltamem.memories.deltamem import check_bank_config
from deltamem.store import SCHEMA_VERSION, SQLiteStore, Store
from deltamem.store.factory import open_store
from deltamem.testing import check_memory, make_episode

from .store_cases import ACTIONS, GOALS, SCENES, H, build, check_invariants

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
    mem = DeltaMem.open(new_bank(), embedder=H, domain="alfworld", tie_rule="deepest")
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


# -- cases where the two backends used to differ (issue 28): now one implementation ----------

def test_a_setting_that_does_not_decode_is_a_damaged_bank(new_bank):
    """SQLite mapped it to BankDamagedError, PostgreSQL raised a bare ValueError."""
    store = open_store(new_bank())
    store.init_meta("hash", 32, {"d_max": 3})
    with store.transaction():  # what a damaged bank reads like
        store._conn.execute("UPDATE meta SET value = 'many' WHERE key = 'embedder_dim'")
    with pytest.raises(BankDamagedError, match="settings do not decode"):
        store.meta()
    with store.transaction():
        store._conn.execute("UPDATE meta SET value = '32' WHERE key = 'embedder_dim'")
        store._conn.execute("UPDATE meta SET value = '{not json' WHERE key = 'config'")
    with pytest.raises(BankDamagedError, match="settings do not decode"):
        store.meta()
    store.close()


def test_a_node_that_cannot_be_stored_says_which(new_bank):
    """A duplicate id or a missing parent: 'cannot store node <id>' on both backends (PostgreSQL
    said 'UniqueViolation')."""
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    store = mem.store
    node = mem.nodes("task")[0]
    again = type(node)(**{**node.__dict__, "seq": 0})
    with pytest.raises(StoreError, match=f"cannot store node {node.id}"):
        store.insert_node(again)
    orphan = type(node)(**{**node.__dict__, "id": "orphan", "seq": 0, "kind": "RESIDUAL",
                           "parent": "no-such-parent", "depth": 2})
    with pytest.raises(StoreError, match="cannot store node orphan"):
        store.insert_node(orphan)
    assert [n.id for n in store.load_nodes()] == [n.id for n in mem.store.load_nodes()]
    assert "orphan" not in {n.id for n in store.load_nodes()}
    with pytest.raises(StoreError, match="no node 'nobody'"):
        store.node_state("nobody")
    mem.close()


def test_the_logs_and_ledgers_read_the_same(new_bank):
    store = open_store(new_bank())
    store.add_rejection(tree="env", role="env_root", reason="too long", raw="x" * 30000,
                        episode_id="e1", created_at=5.0)
    (rej,) = store.rejections()
    assert rej == {"created_at": 5.0, "episode_id": "e1", "tree": "env", "role": "env_root",
                   "reason": "too long", "raw": "x" * 20000}
    assert store.last_learned() is None and store.learned_count() == 0
    for eid in ("b", "a", "c"):
        assert store.mark_learned(eid, learned_at=1.0)
    assert not store.mark_learned("a")
    assert store.last_learned() == "c" and store.learned_count() == 3
    assert store.is_learned("a") and not store.is_learned("z")
    assert [r["episode_id"] for r in store.iter_export() if r["type"] == "learned"] == [
        "b", "a", "c"]
    assert store.integrity_ok()
    store.close()


def test_an_import_checks_the_configuration_with_the_callers_check(new_bank):
    """The store holds no memory's configuration schema: DeltaMem hands it its check."""
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], new_bank())
    recs = list(mem.store.iter_export())
    mem.close()
    bad = [{**recs[0], "config": {**recs[0]["config"], "tau_task": 7}}, *recs[1:]]
    plain = open_store(new_bank())  # no check: a configuration need only be an object
    assert plain.import_records(bad) == len([r for r in recs if r["type"] == "node"])
    plain.close()
    checked = open_store(new_bank(), config_check=check_bank_config)
    with pytest.raises(InvalidImportError, match="not a valid DeltaMem configuration"):
        checked.import_records(bad)
    deep = [{**recs[0], "config": {**recs[0]["config"], "d_max": 2}}, *recs[1:]]
    assert checked.import_records(deep)  # the roots sit at depth 1
    checked.close()


def test_both_stores_implement_the_whole_protocol(new_bank):
    store = open_store(new_bank())
    try:
        for name, member in vars(Store).items():
            if name.startswith("_") or not callable(member):
                continue
            impl = getattr(store, name, None)
            assert callable(impl), f"{type(store).__name__} lacks {name}"
            want = list(inspect.signature(member).parameters)[1:]
            got = list(inspect.signature(impl).parameters)
            assert got == want, f"{type(store).__name__}.{name}{got} != protocol {want}"
        assert isinstance(store.path, str) and store.config_check is None
    finally:
        store.close()
