"""ItemStore: the flat SQLite store of the baselines."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import EmbedderMismatchError, StoreError
from deltamem.store.items import ITEMS_SCHEMA_VERSION, Item, ItemStore


def make_store(path=":memory:") -> ItemStore:
    s = ItemStore(path)
    s.init_meta(system="toy", embedder_name="emb", embedder_dim=3, config={"k": 1})
    return s


def item(text="t", **kw) -> Item:
    kw.setdefault("embedding", np.array([1.0, 0.0, 0.5], dtype=np.float32))
    return Item(system="toy", kind=kw.pop("kind", "unit"), text=text, **kw)


def test_meta_is_recorded_once_and_checked(tmp_path):
    path = tmp_path / "b.db"
    s = make_store(path)
    meta = s.meta()
    assert meta["schema_version"] == ITEMS_SCHEMA_VERSION
    assert (meta["system"], meta["embedder_name"], meta["embedder_dim"]) == ("toy", "emb", 3)
    assert meta["config"] == {"k": 1}
    s.close()
    s = ItemStore(path)
    s.init_meta(system="toy", embedder_name="emb", embedder_dim=3, config={"k": 9})
    assert s.meta()["config"] == {"k": 1}  # never overwritten
    with pytest.raises(EmbedderMismatchError):
        s.init_meta(system="toy", embedder_name="emb", embedder_dim=4, config={})
    with pytest.raises(EmbedderMismatchError):
        s.check_embedder("other", 3)
    with pytest.raises(StoreError, match="toy"):
        s.init_meta(system="other", embedder_name="emb", embedder_dim=3, config={})


def test_wal_journal_on_file_banks(tmp_path):
    s = make_store(tmp_path / "b.db")
    assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_insert_get_update_and_filters():
    s = make_store()
    a = s.insert(item("a", key="k1", payload={"x": [1, 2]}, episode_id="e1"))
    b = s.insert(item("b", kind="other", embedding=None))
    assert (a.seq, b.seq) == (1, 2) and a.updated_at == a.created_at
    got = s.get(a.id)
    assert got.payload == {"x": [1, 2]} and got.episode_id == "e1"
    assert np.array_equal(got.embedding, a.embedding) and got.embedding.dtype == np.float32
    assert s.get(b.id).embedding is None
    assert [i.id for i in s.items(kind="unit")] == [a.id]
    assert [i.id for i in s.items(key="k1")] == [a.id]
    assert s.count() == 2 and s.count("other") == 1
    s.update(a.id, text="a2", payload={"y": 1}, embedding=None, episode_id="e2", updated_at=5.0)
    got = s.get(a.id)
    assert (got.text, got.payload, got.embedding, got.episode_id, got.updated_at) == (
        "a2", {"y": 1}, None, "e2", 5.0)
    with pytest.raises(StoreError):
        s.update("nope", text="", payload={}, embedding=None, episode_id="")
    with pytest.raises(StoreError):
        s.get("nope")
    with pytest.raises(StoreError):
        s.insert(item(id=a.id))
    with pytest.raises(StoreError):
        s.insert(item(payload={"bad": object()}))
    with pytest.raises(StoreError):
        s.insert(item(embedding=np.array([np.nan], dtype=np.float32)))


def test_transaction_is_all_or_nothing():
    s = make_store()
    with pytest.raises(RuntimeError), s.transaction():
        s.insert(item("a"))
        s.mark_learned("e1")
        raise RuntimeError("boom")
    assert s.count() == 0 and not s.is_learned("e1")


def test_learned_and_rejections():
    s = make_store()
    assert s.last_learned() is None
    assert s.mark_learned("e1") and not s.mark_learned("e1")
    s.mark_learned("e2")
    assert s.is_learned("e1") and s.learned_count() == 2 and s.last_learned() == "e2"
    s.add_rejection(episode_id="e1", role="r", reason="why", raw="x" * 30000)
    (rej,) = s.rejections()
    assert rej["role"] == "r" and len(rej["raw"]) == 20000


def test_other_writers_are_seen(tmp_path):
    path = tmp_path / "b.db"
    a, b = make_store(path), ItemStore(path)
    v = a.version()
    b.insert(item("from b"))
    assert a.version() != v and a.count() == 1


def test_refuses_foreign_and_newer_files(tmp_path):
    foreign = tmp_path / "f.db"
    sqlite3.connect(foreign).execute("CREATE TABLE meta (key TEXT, value TEXT)").connection.commit()
    with pytest.raises(StoreError, match="did not create"):
        ItemStore(foreign)
    newer = tmp_path / "n.db"
    make_store(newer).close()
    with sqlite3.connect(newer) as c:
        c.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="upgrade"):
        ItemStore(newer)
    with pytest.raises(StoreError, match="no memory bank"):
        ItemStore(tmp_path / "missing.db", readonly=True)
    garbage = tmp_path / "g.db"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError):
        ItemStore(garbage)


def test_readonly_cannot_write(tmp_path):
    path = tmp_path / "b.db"
    make_store(path).close()
    ro = ItemStore(path, readonly=True)
    assert ro.meta()["system"] == "toy"
    with pytest.raises((StoreError, sqlite3.OperationalError)):
        ro.insert(item("x"))


def test_import_needs_an_empty_bank_and_valid_records(tmp_path):
    s = make_store()
    s.insert(item("a"))
    records = list(s.iter_export())
    with pytest.raises(StoreError, match="empty"):
        s.import_records(records)
    fresh = ItemStore(":memory:")
    with pytest.raises(StoreError, match="unknown type"):
        fresh.import_records([{"type": "node"}])
    with pytest.raises(StoreError, match="malformed"):
        fresh.import_records([{"type": "item", "id": "x"}])
    with pytest.raises(StoreError, match="schema version"):
        fresh.import_records([{"type": "meta", "schema_version": 99}])
    assert fresh.count() == 0 and "system" not in fresh.meta()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "meta"}\n{not json\n')
    with pytest.raises(StoreError, match=r"bad\.jsonl:2"):
        fresh.import_jsonl(bad)


texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
payloads = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), texts, st.booleans(),
                                                          st.lists(st.integers(), max_size=3)),
                           max_size=4)
vectors = st.one_of(st.none(), st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=4))


@given(st.lists(st.tuples(texts, texts, payloads, vectors), max_size=5), texts)
def test_export_import_round_trips_every_field(rows, raw):
    import tempfile
    from pathlib import Path

    s = make_store()
    for text, key, payload, vec in rows:
        s.insert(item(text, key=key, payload=payload,
                      embedding=None if vec is None else np.array(vec, dtype=np.float32)))
    s.add_rejection(episode_id="e", role="r", reason="x", raw=raw)
    s.mark_learned("e")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "x.jsonl"
        n = s.export_jsonl(out)
        lines = out.read_text(encoding="utf-8").rstrip("\n").split("\n")
        assert n == len(lines) - 2 == len(rows) + 3  # and a header and a trailer
        assert all(isinstance(json.loads(line), dict) for line in lines)
        copy = ItemStore(":memory:")
        assert copy.import_jsonl(out) == len(rows)
    assert list(copy.iter_export()) == list(s.iter_export())
    assert [i.embedding is None for i in copy.items()] == [v is None for *_, v in rows]
