"""Rules every baseline (Synapse, AWM, ReasoningBank, long-context, ACE, MemP, MACLA)
follows, in both modes."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, EmbedderMismatchError, InvalidInputError, StoreError
from deltamem.llm import ScriptedLLM
from deltamem.memories import awm, list_memories, make_memory, reasoningbank
from deltamem.memories.flat import load_prompt
from deltamem.store.items import ItemStore
from deltamem.testing import check_memory, make_episode
from deltamem.types import Episode, Step, Task

from .baseline_helpers import (
    LLM_SYSTEMS,
    SYSTEMS,
    H,
    episodes,
    good_answer,
    good_llm,
    open_memory,
)

MODES = ("deterministic", "llm")
ALL = [(s, m) for s in SYSTEMS for m in MODES]


def learn_all(mem, eps=None):
    out = []
    for ep in eps or episodes():
        out.append(mem.learn(ep, mem.recall(ep.task)))
    return out


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_contract(system, mode):
    check_memory(open_memory(system, mode))


@pytest.mark.parametrize("system", SYSTEMS)
def test_registered_and_mode_follows_extractor(system, tmp_path):
    assert system in list_memories()
    llm = good_llm()
    mem = make_memory(system, bank=str(tmp_path / "b.db"), embedder=H, llm=llm,
                      extractor="llm", domain="alfworld", options={})
    assert isinstance(mem, SYSTEMS[system])
    assert mem.config.mode == "llm" and mem.config.domain == "alfworld"
    mem.close()
    mem = make_memory(system, bank=None, embedder=H, llm=llm, extractor="structural",
                      domain="webshop", options={"mode": "llm"})
    assert mem.config.mode == "llm" and mem.config.domain == "webshop"
    mem = make_memory(system, embedder=H, llm=llm, extractor="structural")
    assert mem.config.mode == "deterministic"
    with pytest.raises(ConfigError):
        make_memory(system, embedder=H, extractor="magic")
    with pytest.raises(ConfigError):
        make_memory(system, embedder=None)
    with pytest.raises(ConfigError):
        make_memory(system, embedder=H, options={"no_such_option": 1})


@pytest.mark.parametrize("system", LLM_SYSTEMS)
def test_llm_mode_needs_an_llm(system):
    with pytest.raises(ConfigError, match="llm"):
        SYSTEMS[system].open(embedder=H, mode="llm")


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_learning_the_same_episode_twice_changes_nothing(system, mode):
    mem = open_memory(system, mode)
    learn_all(mem)
    before = mem.stats()
    calls = mem.llm.usage.calls if mem.llm else 0
    for ep in episodes():
        changes = mem.learn(ep)
        assert [c.kind for c in changes] == ["unchanged"]
        assert changes.items[0].id == ep.id
    assert mem.stats() == before
    assert (mem.llm.usage.calls if mem.llm else 0) == calls


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_bank_persists_across_reopen(system, mode, tmp_path):
    path = tmp_path / f"{system}.db"
    mem = open_memory(system, mode, str(path))
    learn_all(mem)
    task = episodes()[0].task
    recall, stats = mem.recall(task), mem.stats()
    assert stats["units"] > 0 and stats["episodes_learned"] == 4
    assert stats["last_episode_id"] == "e-egg-fail"
    mem.close()
    again = SYSTEMS[system].open(path, embedder=H)  # mode and options come from the bank
    assert again.config.mode == mode and again.config.domain == "alfworld"
    assert again.recall(task) == recall
    assert again.stats() == stats
    if mode == "llm" and system in LLM_SYSTEMS:  # the recorded mode needs an llm to learn
        with pytest.raises(ConfigError, match="without an llm"):
            again.learn(make_episode(episode_id="new"))
    again.close()


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_export_import_round_trip(system, mode, tmp_path):
    mem = open_memory(system, mode, str(tmp_path / "a.db"))
    learn_all(mem)
    out = tmp_path / "a.jsonl"
    n = mem.store.export_jsonl(out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(records) - 2 and records[0]["type"] == "header"
    assert records[1]["type"] == "meta" and records[1]["system"] == system
    b = ItemStore(tmp_path / "b.db")
    assert b.import_jsonl(out) == mem.stats()["items"]
    assert list(b.iter_export()) == list(mem.store.iter_export())
    b.close()
    copy = SYSTEMS[system].open(tmp_path / "b.db", embedder=H)
    task = episodes()[1].task
    assert copy.recall(task) == mem.recall(task)
    assert copy.stats() == mem.stats()


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_rejected_learn_leaves_bank_unchanged(system, mode):
    mem = open_memory(system, mode)
    learn_all(mem, episodes()[:2])
    before = mem.stats()
    bad = Episode(Task(id="x", goal="  "), (Step("look", "You see a room."),), True, 1.0)
    with pytest.raises(InvalidInputError):
        mem.learn(bad)
    with pytest.raises(InvalidInputError):
        mem.recall(bad.task)
    assert mem.stats() == before


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_recall_is_read_only_and_ignores_oracle_labels(system, mode):
    mem = open_memory(system, mode)
    learn_all(mem)
    task = episodes()[0].task
    before = mem.stats()
    labelled = Task(**{**task.to_dict(), "meta": {"task_type": "SENTINEL-LABEL"}})
    assert mem.recall(labelled) == mem.recall(task)
    assert mem.stats() == before
    if mem.llm is not None:
        for _purpose, messages, _ in mem.llm.calls:
            assert all("SENTINEL" not in m["content"] for m in messages)


@pytest.mark.parametrize("system", LLM_SYSTEMS)
def test_llm_prompts_never_see_task_meta(system):
    llm = good_llm()
    mem = open_memory(system, "llm", llm=llm)
    for ep in episodes():
        task = Task(**{**ep.task.to_dict(), "meta": {"task_type": "SENTINEL-LABEL"}})
        mem.learn(Episode(task, ep.steps, ep.success, ep.reward, id=ep.id))
    assert llm.calls
    for _purpose, messages, _ in llm.calls:
        assert all("SENTINEL" not in m["content"] for m in messages)


@pytest.mark.parametrize("system", LLM_SYSTEMS)
def test_invalid_llm_output_twice_is_rejected_logged_and_not_stored(system, caplog):
    llm = ScriptedLLM(["I think the workflow is obvious.", '{"title": 3}'])
    mem = open_memory(system, "llm", llm=llm)
    ep = make_episode(episode_id="e-bad")
    with caplog.at_level(logging.WARNING, logger="deltamem.memory"):
        changes = mem.learn(ep)
    assert [c.kind for c in changes] == ["rejected"]
    assert "rejected after one repair" in changes.items[0].reason
    assert len(llm.calls) == 2  # the answer and one repair, no more
    repair_prompt = llm.calls[1][1][-1]["content"]
    assert "invalid JSON" in repair_prompt
    stats = mem.stats()
    assert (stats["units"], stats["items"], stats["rejections"]) == (0, 0, 1)
    (rej,) = mem.store.rejections()
    assert rej["episode_id"] == "e-bad" and rej["raw"] == '{"title": 3}'
    assert any(r.name == "deltamem.memory" and "rejected" in r.getMessage()
               for r in caplog.records)
    assert mem.recall(ep.task).empty
    # the episode counts as learned: replaying it does not call the LLM again
    assert [c.kind for c in mem.learn(ep)] == ["unchanged"]
    assert len(llm.calls) == 2


@pytest.mark.parametrize("system", LLM_SYSTEMS)
def test_repaired_output_is_stored(system):
    first = {"title": "x" * 500, "steps": []} if system == "awm" else {"items": [{}] * 5}
    llm = ScriptedLLM([first], responder=good_answer)
    mem = open_memory(system, "llm", llm=llm)
    changes = mem.learn(make_episode(episode_id="e1"))
    assert changes.written and not changes.rejected
    roles = 2 if system == "ace" else 1  # ACE's reflector, then its curator
    assert len(llm.calls) == roles + 1 and mem.stats()["rejections"] == 0


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_reopen_checks_embedder_and_system(system, mode, tmp_path):
    path = tmp_path / "bank.db"
    open_memory(system, mode, str(path)).close()
    with pytest.raises(EmbedderMismatchError):
        SYSTEMS[system].open(path, embedder=HashingEmbedder(dim=32))
    other = next(s for s in SYSTEMS if s != system)
    with pytest.raises(StoreError, match=system):
        SYSTEMS[other].open(path, embedder=H)


@pytest.mark.parametrize("system", SYSTEMS)
def test_deltamem_bank_is_refused(system, tmp_path):
    path = tmp_path / "dm.db"
    DeltaMem.open(path, embedder=H).close()
    with pytest.raises(StoreError, match="DeltaMem"):
        SYSTEMS[system].open(path, embedder=H)
    # and nothing was added to the DeltaMem bank
    tables = {r[0] for r in sqlite3.connect(path).execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    assert "items" not in tables


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_inspection_without_embedder(system, mode, tmp_path):
    path = tmp_path / "bank.db"
    mem = open_memory(system, mode, str(path))
    learn_all(mem)
    stats = mem.stats()
    mem.close()
    ro = SYSTEMS[system].open(path, embedder=None, readonly=True)
    assert ro.stats() == stats
    with pytest.raises(ConfigError, match="embedder"):
        ro.learn(make_episode(episode_id="new"))


@pytest.mark.parametrize(("system", "mode"), ALL)
def test_avg_tokens_is_per_table5_unit(system, mode):
    mem = open_memory(system, mode)
    learn_all(mem)
    items = mem.store.items()
    if system == "reasoningbank":
        per_unit: dict[str, int] = {}
        for i in items:
            per_unit[i.episode_id] = per_unit.get(i.episode_id, 0) + len(i.text.split())
        counts = list(per_unit.values())
    else:
        counts = [len(i.text.split()) for i in items]
    stats = mem.stats()
    assert stats["units"] == len(counts) > 0
    assert stats["avg_tokens"] == round(sum(counts) / len(counts), 1)
    json.dumps(stats)


@pytest.mark.parametrize(("system", "name", "variables"), [
    ("awm", "induce", awm._INDUCE_VARS),
    ("awm", "merge", awm._MERGE_VARS),
    ("reasoningbank", "distill_success", reasoningbank._VARS),
    ("reasoningbank", "distill_failure", reasoningbank._VARS),
])
def test_prompt_templates_load_and_fill(system, name, variables):
    template = load_prompt(system, name, variables)
    text = template.substitute(dict.fromkeys(variables, "VALUE"))
    assert "$" not in text and "VALUE" in text and "JSON" in text
    with pytest.raises(ConfigError, match="unknown variables"):
        load_prompt(system, name, frozenset())
    with pytest.raises(ConfigError, match="not found"):
        load_prompt(system, "no_such_prompt", variables)
