"""store.factory.new_bank_file: a new SQLite bank appears whole at its name or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.errors import StoreError
from deltamem.store.factory import new_bank_file
from deltamem.store.items import ItemStore


def _fill(path: Path, texts: list[str]) -> None:
    from deltamem.store.items import Item

    st = ItemStore(path)
    try:
        st.init_meta(system="lessons", embedder_name="hashing-8", embedder_dim=8, config={})
        for t in texts:
            st.insert(Item(system="lessons", kind="lesson", text=t))
    finally:
        st.close()


def _texts(path: Path) -> list[str]:
    st = ItemStore(path, readonly=True)
    try:
        return [i.text for i in st.items()]
    finally:
        st.close()


def test_the_bank_appears_whole_and_the_temporary_file_goes(tmp_path):
    out = tmp_path / "b.db"
    with new_bank_file(out, suffix=".building", doing="build") as build:
        assert build == tmp_path / "b.db.building"
        _fill(build, ["a", "b"])
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.db"]  # no -wal: one file
    assert _texts(out) == ["a", "b"]


def test_a_failure_inside_leaves_nothing(tmp_path):
    out = tmp_path / "b.db"
    with pytest.raises(RuntimeError), new_bank_file(out, suffix=".building", doing="build") as b:
        _fill(b, ["a"])
        raise RuntimeError("cut")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_run_s_temporary_file_is_replaced(tmp_path):
    """The state a SIGKILL inside the block leaves: a half-made bank under the temporary
    name, nothing at the bank's name. The next run starts from scratch."""
    out = tmp_path / "b.db"
    _fill(tmp_path / "b.db.building", ["half"])
    with new_bank_file(out, suffix=".building", doing="build") as build:
        assert not build.exists()
        _fill(build, ["whole"])
    assert _texts(out) == ["whole"]
    assert not (tmp_path / "b.db.building").exists()


def test_a_bank_made_meanwhile_is_never_replaced(tmp_path):
    out = tmp_path / "b.db"
    with pytest.raises(StoreError, match=r"cannot build .*created there meanwhile"), \
            new_bank_file(out, suffix=".building", doing="build") as build:
        _fill(build, ["mine"])
        _fill(out, ["theirs"])
    assert _texts(out) == ["theirs"]
    assert not (tmp_path / "b.db.building").exists()
