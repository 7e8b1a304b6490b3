"""k-means consolidation (paper §3.2): exactly N' entries, each nearest its centroid."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, EmbedderMismatchError, InvalidInputError, StoreError
from deltamem.memories.decocted.kmeans import consolidate, consolidate_bank, mix_embeddings
from deltamem.memories.decocted.lessons import KMeansLessonMemory, LessonMemory
from deltamem.testing import make_episode


def _blobs(n_per: int, centers: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centers, 8)) * 10
    return np.concatenate([c[i] + rng.normal(scale=0.1, size=(n_per, 8)) for i in range(centers)])


def _check_nearest(x: np.ndarray, res, target: int) -> None:
    assert len(res.kept) == target == len(set(res.kept))
    labels = np.asarray(res.labels)
    for c, k in enumerate(res.kept):
        if c in res.filled:
            continue
        members = np.flatnonzero(labels == c)
        assert k in members
        d = np.linalg.norm(x[members] - res.centroids[c], axis=1)
        assert np.linalg.norm(x[k] - res.centroids[c]) == pytest.approx(d.min())
        assert res.distances[c] == pytest.approx(d.min())


def test_keeps_exactly_target_entries_each_nearest_its_centroid():
    x = _blobs(10, 5)
    res = consolidate(x, 5)
    _check_nearest(x, res, 5)
    # one representative per blob
    assert sorted(k // 10 for k in res.kept) == [0, 1, 2, 3, 4]
    assert sorted(res.sizes) == [10] * 5


@settings(max_examples=10, deadline=None)
@given(n=st.integers(2, 30), target=st.integers(1, 30), seed=st.integers(0, 5))
def test_exact_count_and_nearest_for_random_data(n, target, seed):
    x = np.random.default_rng(seed).normal(size=(n, 4))
    res = consolidate(x, target, seed=seed)
    assert len(res.kept) == min(n, target) == len(set(res.kept))
    if n > target:
        _check_nearest(x, res, target)


def test_duplicates_still_give_exactly_target_distinct_entries():
    x = np.array([[1.0, 0.0]] * 6 + [[0.0, 1.0]] * 2)
    res = consolidate(x, 4)
    assert len(res.kept) == 4 == len(set(res.kept))


def test_small_bank_keeps_everything_and_bad_args_raise():
    assert consolidate(np.eye(3), 5).kept == (0, 1, 2)
    with pytest.raises(ConfigError):
        consolidate(np.eye(3), 0)
    with pytest.raises(InvalidInputError):
        consolidate(np.zeros((0, 3)), 2)


def test_mix_embeddings_hand_computed():
    t = np.array([[1.0, 0.0]])
    le = np.array([[0.0, 1.0]])
    assert mix_embeddings(t, le, 0.5)[0] == pytest.approx([2 ** -0.5, 2 ** -0.5])
    assert mix_embeddings(t, le, 0.0)[0] == pytest.approx([1.0, 0.0])
    assert mix_embeddings(t, le, 0.25)[0] == pytest.approx(np.array([0.75, 0.25]) / np.hypot(
        0.75, 0.25))
    with pytest.raises(ConfigError):
        mix_embeddings(t, le, 1.5)


GOALS = ["put a clean apple in fridge", "put a clean mug in shelf", "heat some egg and put it in "
         "garbagecan", "heat some potato and put it in countertop", "cool some apple and put it "
         "in microwave", "find two pencils and put them in drawer"]


def _bank(path, cls=LessonMemory, **opts):
    mem = cls.open(path, embedder=HashingEmbedder(64), mode="deterministic", **opts)
    for i, g in enumerate(GOALS):
        mem.learn(make_episode(goal=g, task_id=f"t{i}", episode_id=f"e{i}"))
    return mem


def test_kmeans_memory_recalls_from_a_view_of_target_size():
    mem = _bank(":memory:", KMeansLessonMemory, target_size=3, k=10)
    assert len(mem.entries()) == 3
    r = mem.recall(make_episode(goal="put a clean apple in fridge").task)
    assert r.details["bank_entries"] == 6 and r.details["entries"] == 3
    assert len(r.items) == 3
    assert mem.stats()["consolidated_entries"] == 3 and mem.stats()["units"] == 6


def test_consolidate_bank_writes_the_kept_entries(tmp_path):
    src = tmp_path / "lessons.db"
    _bank(src).close()
    res = consolidate_bank(src, tmp_path / "small.db", embedder=HashingEmbedder(64), size=2)
    assert res.total == 6 and len(res.kept) == 2
    assert sum(k.cluster_size for k in res.kept) <= 6
    small = LessonMemory.open(tmp_path / "small.db", embedder=HashingEmbedder(64))
    assert sorted(e.id for e in small.entries()) == sorted(k.id for k in res.kept)
    with pytest.raises(StoreError):
        consolidate_bank(src, tmp_path / "small.db", embedder=HashingEmbedder(64), size=2)
    with pytest.raises(EmbedderMismatchError):
        consolidate_bank(src, tmp_path / "x.db", embedder=HashingEmbedder(32), size=2)


def _records(path):
    from deltamem.store.items import ItemStore

    st = ItemStore(path, readonly=True)
    try:
        return [{k: v for k, v in r.items() if not (r["type"] == "meta" and k == "created_at")}
                for r in st.iter_export()]
    finally:
        st.close()


def test_a_killed_consolidation_leaves_no_bank_and_the_rerun_completes(tmp_path):
    """The state a consolidation killed while writing leaves (issue 51): a half-written bank
    under the temporary name, nothing at ``out`` (before the fix: ``out`` with meta only, and a
    re-run refused because ``out`` existed). The re-run makes the bank an uninterrupted run
    makes and removes the temporary file."""
    from deltamem.store.items import ItemStore

    src = tmp_path / "lessons.db"
    _bank(src).close()
    emb = HashingEmbedder(64)
    consolidate_bank(src, tmp_path / "ref.db", embedder=emb, size=3)
    half = ItemStore(tmp_path / "small.db.consolidating")
    half.init_meta(system="lessons", embedder_name=emb.name, embedder_dim=emb.dim, config={})
    half.close()
    assert not (tmp_path / "small.db").exists()
    consolidate_bank(src, tmp_path / "small.db", embedder=emb, size=3)
    assert not list(tmp_path.glob("*consolidating*"))
    assert _records(tmp_path / "small.db") == _records(tmp_path / "ref.db")


def test_a_consolidation_that_fails_while_writing_leaves_nothing(tmp_path, monkeypatch):
    from deltamem.store.items import ItemStore

    src = tmp_path / "lessons.db"
    _bank(src).close()
    insert = ItemStore.insert
    calls = []

    def cut(self, item, **kw):
        calls.append(item.id)
        if len(calls) == 2:
            raise OSError("disk full")
        return insert(self, item, **kw)

    monkeypatch.setattr(ItemStore, "insert", cut)
    with pytest.raises(OSError):
        consolidate_bank(src, tmp_path / "small.db", embedder=HashingEmbedder(64), size=3)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith("lessons.db")]
    monkeypatch.setattr(ItemStore, "insert", insert)
    res = consolidate_bank(src, tmp_path / "small.db", embedder=HashingEmbedder(64), size=3)
    assert len(LessonMemory.open(tmp_path / "small.db", embedder=HashingEmbedder(64)).entries()
               ) == len(res.kept) == 3


def test_consolidation_makes_the_folder_of_its_new_bank(tmp_path):
    src = tmp_path / "lessons.db"
    _bank(src).close()
    consolidate_bank(src, tmp_path / "new" / "small.db", embedder=HashingEmbedder(64), size=2)
    assert (tmp_path / "new" / "small.db").is_file()
