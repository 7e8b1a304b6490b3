"""The memory registry: one entry per system (factory + bank class), refusing a name twice;
every registered system's bank reopens as that system."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, StoreError
from deltamem.memories import (
    bank_system,
    list_memories,
    make_memory,
    memory_spec,
    open_bank,
    register_memory,
    unregister_memory,
)
from deltamem.memories.decocted.lessons import LessonMemory
from deltamem.memories.factory import make_factory
from deltamem.testing import check_memory, make_episode

H = HashingEmbedder(dim=64)


@pytest.mark.parametrize("name", list_memories())
def test_every_registered_system_passes_the_contract_and_reopens(name: str, tmp_path: Path):
    bank = tmp_path / "bank.db"
    memory = make_memory(name, bank=str(bank), embedder=H, extractor="structural",
                         domain="alfworld")
    check_memory(memory, bank=bank)  # learns one episode, closes, reopens with open_bank
    if memory_spec(name).bank is None:
        assert not bank.exists()
        return
    reopened = open_bank(bank)
    try:
        assert type(reopened) is type(memory)
        assert bank_system(bank) == memory.name
        stats = reopened.stats()
        if "episodes_learned" in stats:
            assert stats["episodes_learned"] == 1
    finally:
        reopened.close()


def test_the_built_in_systems_are_all_registered():
    assert {"none", "deltamem", "synapse", "awm", "reasoningbank", "lessons", "lessons-raw",
            "lessons-kmeans", "concept-tree", "arigraph", "fullhistory", "summary", "rag",
            "reflexion", "simulacra", "mcma", "raw-trajectory", "trad",
            "expel"} <= set(list_memories())
    # a bank class for every system that keeps a bank: only `none` keeps none
    assert [n for n in list_memories() if memory_spec(n).bank is None] == ["none"]


def test_a_name_is_registered_once():
    with pytest.raises(ConfigError, match="already registered"):
        register_memory("lessons", "deltamem.memories.decocted.lessons:make_lessons")
    register_memory("test-once", lambda **kw: None)
    with pytest.raises(ConfigError, match="already registered"):
        register_memory("test-once", lambda **kw: None)
    unregister_memory("test-once")
    register_memory("test-once", lambda **kw: None)  # free again
    unregister_memory("test-once")
    with pytest.raises(ConfigError, match="not registered"):
        unregister_memory("test-once")


@pytest.mark.parametrize("name, factory, bank, message", [
    ("", "a.b:make", None, "non-empty stripped"),
    (" x", "a.b:make", None, "non-empty stripped"),
    ("x", "a.b.make", None, "must look like"),
    ("x", "a.b:", None, "must look like"),
    ("x", 42, None, "must be callable"),
    ("x", "a.b:make", "a.b", "must look like"),
])
def test_a_malformed_registration_is_refused(name: str, factory: Any, bank: Any, message: str):
    with pytest.raises(ConfigError, match=message):
        register_memory(name, factory, bank=bank)
    assert name not in list_memories()


def test_unknown_names_and_systems_say_what_is_registered(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"unknown memory system 'nope'; registered: .*lessons"):
        make_memory("nope")
    # a bank recording a system nobody registered
    mem = make_memory("lessons", bank=str(tmp_path / "b.db"), embedder=H)
    mem.learn(make_episode(episode_id="e1"))
    mem.close()
    con = sqlite3.connect(tmp_path / "b.db")  # what an unregistered plug-in leaves behind
    con.execute("UPDATE meta SET value = 'vanished' WHERE key = 'system'")
    con.commit()
    con.close()
    with pytest.raises(ConfigError, match="unknown memory system 'vanished'"):
        open_bank(tmp_path / "b.db")
    with pytest.raises(StoreError, match="no memory bank"):
        open_bank(tmp_path / "missing.db")


class TerseLessons(LessonMemory):
    """A plug-in system: lessons under another name."""

    name = "test-terse-lessons"


def test_a_registered_plug_in_reaches_open_bank(tmp_path: Path):
    register_memory("test-terse-lessons", make_factory(TerseLessons), bank=TerseLessons)
    bank = tmp_path / "b.db"
    mem = make_memory("test-terse-lessons", bank=str(bank), embedder=H)
    check_memory(mem, bank=bank)
    again = open_bank(bank)
    assert type(again) is TerseLessons and again.stats()["episodes_learned"] == 1
    again.close()


def test_a_system_registered_half_way_fails_the_reopen_check(tmp_path: Path):
    """Registered with a factory but no bank class, while it writes a bank: check_memory
    says so (the bug of lessons, lessons-raw, lessons-kmeans and concept-tree before)."""
    register_memory("test-terse-lessons", make_factory(TerseLessons))
    bank = tmp_path / "b.db"
    mem = make_memory("test-terse-lessons", bank=str(bank), embedder=H)
    with pytest.raises(AssertionError, match="registered without a bank class but wrote"):
        check_memory(mem, bank=bank)
    # a system that is not registered at all cannot reopen either
    unregister_memory("test-terse-lessons")
    mem = TerseLessons.open(tmp_path / "c.db", embedder=H)
    with pytest.raises(AssertionError, match="must reopen with open_bank"):
        check_memory(mem, bank=tmp_path / "c.db")
