"""One base for every banked memory (memories/banked.py): each registered system learns
through BankedMemory.learn, so the learned ledger, the read-only refusal and the stats head
behave alike for DeltaMem, the flat memories and the step memories."""

from __future__ import annotations

from typing import Any

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import BankReadOnlyError
from deltamem.memories import list_memories, make_memory
from deltamem.memories.banked import BankedMemory
from deltamem.testing import make_episode

H = HashingEmbedder(dim=64)
BANKED = [name for name in list_memories() if name != "none"]


def build(name: str, bank: Any = None) -> BankedMemory:
    mem = make_memory(name, bank=bank, embedder=H, extractor="structural", domain="alfworld")
    assert isinstance(mem, BankedMemory)
    return mem


def test_every_registered_system_but_none_is_banked():
    assert {"deltamem", "synapse", "awm", "arigraph", "mcma", "lessons"} <= set(BANKED)


@pytest.mark.parametrize("name", BANKED)
def test_a_second_learn_is_refused_by_the_base(name, monkeypatch):
    """Before the transaction: the base's one ``unchanged`` answer, nothing planned."""
    mem = build(name)
    ep = make_episode(episode_id="e1")
    assert "unchanged" not in [c.kind for c in mem.learn(ep, mem.recall(ep.task))]
    before = mem.stats()
    refusals: list[str] = []
    original = BankedMemory._unchanged

    def spy(self: BankedMemory, episode: Any) -> Any:
        refusals.append(episode.id)
        return original(self, episode)

    def no_plan(*_: Any) -> Any:
        raise AssertionError("a learned episode was planned again")

    monkeypatch.setattr(BankedMemory, "_unchanged", spy)
    monkeypatch.setattr(type(mem), "_plan_learn", no_plan)
    again = mem.learn(ep, mem.recall(ep.task))
    assert [(c.kind, c.reason, c.id) for c in again] == [
        ("unchanged", "episode already learned", "e1")]
    assert refusals == ["e1"]
    assert mem.stats() == before
    mem.close()


@pytest.mark.parametrize("name", BANKED)
def test_an_episode_claimed_while_planning_writes_nothing(name, monkeypatch):
    """Inside the transaction: another writer claimed the episode after the first check (it
    planned and committed meanwhile); the ledger refuses and no write of the plan runs."""
    mem = build(name)
    ep = make_episode(episode_id="e1")
    before = mem.stats()["units"]
    plan_learn = type(mem)._plan_learn

    def plan_then_lose_the_race(self: BankedMemory, *args: Any) -> Any:
        plan = plan_learn(self, *args)
        assert plan.writes, "the plan writes something (else this test shows nothing)"
        self.store.mark_learned(ep.id)  # the other writer's commit
        return plan

    monkeypatch.setattr(type(mem), "_plan_learn", plan_then_lose_the_race)
    changes = mem.learn(ep, mem.recall(ep.task))
    assert [c.kind for c in changes] == ["unchanged"]
    assert mem.stats()["units"] == before
    mem.close()


@pytest.mark.parametrize("name", BANKED)
def test_a_bank_opened_read_only_refuses_to_learn_before_planning(name, tmp_path, monkeypatch):
    path = tmp_path / "b.db"
    build(name, path).close()
    ro = type(build(name)).open(path, embedder=H, readonly=True)
    monkeypatch.setattr(type(ro), "_plan_learn",
                        lambda *_: pytest.fail("planned on a read-only bank"))
    with pytest.raises(BankReadOnlyError, match="open read-only"):
        ro.learn(make_episode(episode_id="e1"))
    ro.close()


@pytest.mark.parametrize("name", BANKED)
def test_the_stats_head_is_the_bases(name):
    mem = build(name)
    ep = make_episode(episode_id="e1")
    mem.learn(ep, mem.recall(ep.task))
    keys = list(mem.stats())
    ledger = ["episodes_learned", "last_episode_id", "rejections"]
    at = keys.index("episodes_learned")
    assert keys[at:at + 3] == ledger and "units" in keys[:at]
    assert (keys[0] == "system") is (name != "deltamem")  # DeltaMem's figures never named it
    s = mem.stats()
    assert (s["episodes_learned"], s["last_episode_id"], s["rejections"]) == (1, "e1", 0)
    mem.close()
