"""SQLite bank: persistence, export/import round trips, invariants under any learn sequence."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import StoreError
from deltamem.store import SCHEMA_VERSION, SQLiteStore, export_jsonl, read_jsonl

from .conformance.store_cases import build, check_invariants

H = HashingEmbedder(dim=32)
GOALS = [
    "put a clean apple in fridge",
    "put a hot apple in fridge",
    "heat some egg and put it in garbagecan",
    "examine the book with the desklamp",
    "put two cellphone in sofa",
]
SCENES = ["kitchen with a fridge 1 and a countertop 1", "bedroom with a desk 1 and a bed 1"]
ACTIONS = [
    ("go to countertop 1", "On the countertop 1, you see a apple 1."),
    ("take apple 1 from countertop 1", "You pick up the apple 1."),
    ("go to desk 1", "On the desk 1, you see a book 2, and a desklamp 1."),
    ("use desklamp 1", "You turn on the desklamp 1."),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1."),
    ("jump", "Nothing happened."),
]

episodes = st.lists(
    st.tuples(
        st.sampled_from(GOALS),
        st.sampled_from(SCENES),
        st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=5),
        st.booleans(),
    ),
    min_size=1,
    max_size=14,
)


@given(episodes)
def test_any_sequence_of_learns_keeps_the_trees_consistent(seq):
    check_invariants(build(seq))


@given(episodes)
def test_export_import_export_is_identical(tmp_path_factory, seq):
    d = tmp_path_factory.mktemp("rt")
    mem = build(seq)
    export_jsonl(mem.store, d / "a.jsonl")
    s2 = SQLiteStore(d / "b.db")
    s2.import_records(read_jsonl(d / "a.jsonl"))
    export_jsonl(s2, d / "b.jsonl")
    assert (d / "a.jsonl").read_text() == (d / "b.jsonl").read_text()
    mem2 = DeltaMem(s2, H)
    assert mem2.stats() == mem.stats()
    check_invariants(mem2)
    s2.close()


def test_export_round_trips_hits_and_consolidation(tmp_path):
    seq = [("put a hot apple in fridge", SCENES[0], ACTIONS[:2], True)] * 1 + [
        ("put a hot apple in fridge", SCENES[0], ACTIONS[:4], True)
    ] * 4
    mem = build(seq, tau_task=0.5, tau_env=0.5)
    assert any(n.consolidated for n in mem.nodes("task"))
    export_jsonl(mem.store, tmp_path / "x.jsonl")
    recs = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert recs[0]["type"] == "header" and recs[-1]["type"] == "trailer"
    assert recs[1]["type"] == "meta" and recs[1]["schema_version"] == SCHEMA_VERSION
    assert recs[1]["embedder_name"] == H.name and recs[1]["embedder_dim"] == H.dim
    nodes = [r for r in recs if r["type"] == "node"]
    assert any(r["consolidated"] for r in nodes) and any(r["success_hits"] for r in nodes)
    assert sum(r["type"] == "learned" for r in recs) == 5
    s2 = SQLiteStore(tmp_path / "y.db")
    s2.import_records(recs)
    m2 = DeltaMem(s2, H)
    got = {
        (n.id, n.success_hits, n.consolidated, n.origin)
        for t in ("task", "env")
        for n in m2.nodes(t)
    }
    want = {
        (n.id, n.success_hits, n.consolidated, n.origin)
        for t in ("task", "env")
        for n in mem.nodes(t)
    }
    assert got == want


def test_import_into_a_non_empty_bank_is_refused(tmp_path):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], tmp_path / "a.db")
    export_jsonl(mem.store, tmp_path / "a.jsonl")
    with pytest.raises(StoreError, match="empty bank"):
        mem.store.import_records(read_jsonl(tmp_path / "a.jsonl"))


def test_malformed_export_line_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"type": "meta", "schema_version": 1}\n{not json\n')
    with pytest.raises(StoreError, match=r"bad.jsonl:2"):
        SQLiteStore(tmp_path / "b.db").import_records(read_jsonl(p))


def test_newer_schema_version_is_refused(tmp_path):
    SQLiteStore(tmp_path / "a.db").close()
    con = sqlite3.connect(tmp_path / "a.db")
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SQLiteStore(tmp_path / "a.db")


def test_foreign_sqlite_file_is_refused(tmp_path):
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE nodes (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError):
        SQLiteStore(tmp_path / "other.db")
    (tmp_path / "text.db").write_text("hello, not a database" * 100)
    with pytest.raises(StoreError):
        SQLiteStore(tmp_path / "text.db")


def test_readonly_open_of_missing_bank_is_an_error(tmp_path):
    with pytest.raises(StoreError, match="no memory bank"):
        SQLiteStore(tmp_path / "missing.db", readonly=True)


def test_failed_transaction_rolls_back_everything(tmp_path):
    mem = build([(GOALS[0], SCENES[0], ACTIONS[:2], True)], tmp_path / "a.db")
    before = mem.stats()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), mem.store.transaction():
        mem.store.mark_learned("zzz")
        mem.store.increment_hits(mem.nodes("task")[0].id)
        raise Boom
    assert mem.stats() == before and not mem.store.is_learned("zzz")
    assert mem.store.integrity_ok()


def test_learned_count_is_the_ledger_size_through_appends_rollbacks_and_deletes(tmp_path):
    """The count of learned episodes (what every learn's ``touch`` records, issue 26: read
    from the largest rowid once the ledger is seen dense) is ``COUNT(*)`` whatever happens:
    appends, repeated ids, a rolled-back append, another connection's appends, and rows
    deleted by hand (then it is counted again)."""
    path = tmp_path / "b.db"
    s = SQLiteStore(path)
    other = SQLiteStore(path)

    def count() -> int:
        return int(s._conn.execute("SELECT COUNT(*) FROM learned").fetchone()[0])

    assert s.learned_count() == 0 == count()
    for i in range(5):
        s.mark_learned(f"e{i}")
        assert s.learned_count() == count() == i + 1
    assert not s.mark_learned("e2") and s.learned_count() == 5
    with pytest.raises(RuntimeError), s.transaction():
        s.mark_learned("gone")
        assert s.learned_count() == 6
        raise RuntimeError
    assert s.learned_count() == 5 == count()
    other.mark_learned("from-another-process")
    s.mark_learned("e5")
    assert s.learned_count() == 7 == count() == other.learned_count()
    with sqlite3.connect(path) as raw:
        raw.execute("DELETE FROM learned WHERE episode_id = 'e1'")
    fresh = SQLiteStore(path)
    assert fresh.learned_count() == 6 == count()
    fresh.mark_learned("e6")
    assert fresh.learned_count() == 7 == count()
    for st_ in (s, other, fresh):
        st_.close()
