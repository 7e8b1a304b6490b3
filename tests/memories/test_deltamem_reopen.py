"""Reopening a DeltaMem bank: the stored configuration, with the caller's settings on top."""

from __future__ import annotations

import json
import sqlite3

import pytest

from deltamem import DeltaMem, DeltaMemConfig
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing import make_episode

H = HashingEmbedder(dim=64)


@pytest.fixture
def bank(tmp_path):
    """A bank written with domain alfworld, τ_task 0.5 and D_max 4."""
    path = tmp_path / "b.db"
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", tau_task=0.5, d_max=4)
    mem.learn(make_episode("put a clean apple in fridge", episode_id="e1"))
    mem.close()
    return path


@pytest.mark.parametrize("override", [
    {"synchronous": "normal"}, {"epsilon": 0.1}, {"k_cons": 2}, {"search": "exact"},
    {"use_env_tree": False}, {"tie_rule": "bfs"}, {"domain": "alfworld"},
])
def test_an_override_applies_on_top_of_the_stored_settings(bank, override):
    mem = DeltaMem.open(bank, embedder=H, **override)
    try:
        cfg = mem.config
        assert cfg.domain == "alfworld"
        assert cfg.tau_task == 0.5 and cfg.tau_source["task"] == "set by the user"
        assert (cfg.task_trigger, cfg.env_trigger, cfg.d_max) == ("abstract", "places", 4)
        for key, value in override.items():
            assert getattr(cfg, key) == value
        # the session recalls what the bank holds, under the bank's own domain header
        recall = mem.recall(make_episode("put a clean apple in fridge").task)
        assert recall.text.startswith(get_header("alfworld"))
    finally:
        mem.close()


def test_a_config_object_counts_only_the_fields_it_sets(bank):
    mem = DeltaMem.open(bank, embedder=H, config=DeltaMemConfig(epsilon=0.2))
    try:
        assert (mem.config.domain, mem.config.tau_task, mem.config.epsilon) == (
            "alfworld", 0.5, 0.2)
    finally:
        mem.close()


def test_a_new_threshold_is_used_and_named_but_not_stored(bank):
    mem = DeltaMem.open(bank, embedder=H, tau_task=0.7, tau_env="auto")
    try:
        assert mem.config.tau_task == 0.7 and mem.config.tau_source["task"] == "set by the user"
        fresh = DeltaMem.open(":memory:", embedder=H, domain="alfworld")
        assert mem.config.tau_env == fresh.config.tau_env
        assert mem.config.tau_source["env"] == fresh.config.tau_source["env"]
        fresh.close()
    finally:
        mem.close()
    again = DeltaMem.open(bank, embedder=H)
    try:
        assert again.config.tau_task == 0.5  # the bank keeps what it was created with
    finally:
        again.close()


@pytest.mark.parametrize(("override", "says"), [
    ({"domain": "generic"}, "domain='alfworld'"),
    ({"task_trigger": "goal"}, "task_trigger='abstract'"),
    ({"env_trigger": "scene"}, "env_trigger='places'"),
    ({"d_max": 5}, "d_max=4"),
    ({"skill_words": "literal"}, "skill_words='slots'"),
    ({"skill_deltas": "edits"}, "skill_deltas='exact'"),
])
def test_an_override_that_reorganises_the_bank_is_refused(bank, override, says):
    with pytest.raises(ConfigError, match=says) as err:
        DeltaMem.open(bank, embedder=H, **override)
    assert "build a new bank" in str(err.value)
    with pytest.raises(ConfigError, match=says):  # through a config object alike
        DeltaMem.open(bank, embedder=H, config=DeltaMemConfig(**override))


def test_a_new_bank_takes_the_settings_as_given(tmp_path):
    mem = DeltaMem.open(tmp_path / "new.db", embedder=H, domain="generic", d_max=3)
    try:
        assert (mem.config.domain, mem.config.d_max) == ("generic", 3)
    finally:
        mem.close()


def get_header(domain: str) -> str:
    from deltamem.domains import get_domain

    return get_domain(domain).header


def test_skill_words_are_stored_with_their_source_and_used_by_the_default_extractor(tmp_path):
    path = tmp_path / "lit.db"
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", skill_words="literal")
    try:
        mem.learn(make_episode("put a clean apple in fridge", episode_id="e1"))
        assert mem.config.skill_words_source == "set by the user"
        texts = " ".join(n.payload.procedure for n in mem.nodes("task"))
        assert "clean apple with sinkbasin" in texts and "{A}" not in texts
    finally:
        mem.close()
    again = DeltaMem.open(path, embedder=H)  # reopened without it: the stored setting
    try:
        assert again.config.skill_words == "literal"
        assert again.extractor.skill_words == "literal"
    finally:
        again.close()


def test_a_bank_takes_its_domains_skill_words_and_names_where_they_came_from(tmp_path):
    mem = DeltaMem.open(tmp_path / "d.db", embedder=H, domain="alfworld")
    try:
        assert mem.config.skill_words == "slots"
        assert "placeholders" in mem.config.skill_words_source
    finally:
        mem.close()


def _forget(path, *keys: str) -> None:
    """Remove ``keys`` from a bank's stored configuration, as an older version wrote it."""
    with sqlite3.connect(path) as con:
        (raw,) = con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        cfg = json.loads(raw)
        for key in keys:
            del cfg[key]
        con.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(cfg),))


def test_a_bank_written_before_skill_words_reopens_with_slots_and_says_so(tmp_path):
    path = tmp_path / "old.db"
    DeltaMem.open(path, embedder=H, domain="textworld").close()  # textworld: literal now
    _forget(path, "skill_words", "skill_words_source")
    again = DeltaMem.open(path, embedder=H)
    try:
        assert again.config.skill_words == "slots"
        assert "before skill_words existed" in again.config.skill_words_source
    finally:
        again.close()


def test_skill_deltas_are_stored_with_their_source_and_used_by_the_default_extractor(tmp_path):
    path = tmp_path / "rep.db"
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", skill_deltas="edits")
    try:
        assert mem.config.skill_deltas_source == "set by the user"
        assert mem.extractor.skill_deltas == "edits"
    finally:
        mem.close()
    again = DeltaMem.open(path, embedder=H)  # reopened without it: the stored setting
    try:
        assert again.config.skill_deltas == "edits"
        assert again.extractor.skill_deltas == "edits"
    finally:
        again.close()


def test_a_bank_written_before_skill_deltas_reopens_with_additions_and_says_so(tmp_path):
    path = tmp_path / "old.db"
    DeltaMem.open(path, embedder=H, domain="alfworld").close()
    _forget(path, "skill_deltas", "skill_deltas_source")
    again = DeltaMem.open(path, embedder=H)
    try:
        assert again.config.skill_deltas == "additions"
        assert "before skill_deltas existed" in again.config.skill_deltas_source
    finally:
        again.close()


def test_the_registry_gives_the_bank_an_extractor_with_its_own_settings():
    from deltamem.memories import make_memory

    mem = make_memory("deltamem", embedder=H, domain="alfworld", extractor="structural",
                      options={"skill_words": "literal", "skill_deltas": "edits"})
    try:
        assert (mem.extractor.skill_words, mem.extractor.skill_deltas) == ("literal", "edits")
    finally:
        mem.close()


def test_a_new_bank_names_where_its_residual_form_came_from(tmp_path):
    mem = DeltaMem.open(tmp_path / "hh.db", embedder=H, domain="alfworld")
    try:
        assert mem.config.skill_deltas == "exact"
        assert "composition contract" in mem.config.skill_deltas_source
    finally:
        mem.close()
    sw = DeltaMem.open(tmp_path / "sw.db", embedder=H, domain="scienceworld")
    try:
        assert sw.config.skill_deltas == "additions"
        assert "development stream" in sw.config.skill_deltas_source
    finally:
        sw.close()


def test_d_max_is_the_domains_unless_given_and_is_stored_with_its_source(tmp_path, monkeypatch):
    from dataclasses import replace

    from deltamem import domains

    monkeypatch.setitem(domains.DOMAINS, "alfworld",
                        replace(domains.DOMAINS["alfworld"], d_max=20))
    monkeypatch.setitem(domains.D_MAX, "alfworld", "a development stream")
    mem = DeltaMem.open(tmp_path / "deep.db", embedder=H, domain="alfworld")
    try:
        assert (mem.config.d_max, mem.config.d_max_source) == (20, "a development stream")
    finally:
        mem.close()
    paper = DeltaMem.open(tmp_path / "paper.db", embedder=H, domain="alfworld", d_max=5)
    try:
        assert (paper.config.d_max, paper.config.d_max_source) == (5, "set by the user")
    finally:
        paper.close()
    generic = DeltaMem.open(tmp_path / "generic.db", embedder=H)
    try:
        assert generic.config.d_max == 5 and "paper" in generic.config.d_max_source
    finally:
        generic.close()
    _forget(tmp_path / "paper.db", "d_max_source")  # as a bank written before it
    again = DeltaMem.open(tmp_path / "paper.db", embedder=H)
    try:
        assert again.config.d_max == 5 and "before d_max_source" in again.config.d_max_source
    finally:
        again.close()
    with pytest.raises(ConfigError, match="d_max"):
        DeltaMem.open(tmp_path / "paper.db", embedder=H, d_max=20)


def test_the_task_trees_tie_rule_is_the_domains_unless_tie_rule_is_given(tmp_path, monkeypatch):
    from dataclasses import replace

    from deltamem import domains

    monkeypatch.setitem(domains.DOMAINS, "alfworld",
                        replace(domains.DOMAINS["alfworld"], task_tie_rule="record"))
    monkeypatch.setitem(domains.TASK_TIE_RULE, "alfworld", "a development stream")
    mem = DeltaMem.open(tmp_path / "hh.db", embedder=H, domain="alfworld")
    try:
        cfg = mem.config
        assert (cfg.tie_rule, cfg.task_tie_rule) == ("deepest", "record")
        assert cfg.task_tie_rule_source == "a development stream"
        assert mem.bank.trees["task"].tie_rule == "record"
        assert mem.bank.trees["env"].tie_rule == "deepest"
    finally:
        mem.close()
    both = DeltaMem.open(tmp_path / "both.db", embedder=H, domain="alfworld", tie_rule="bfs")
    try:
        assert (both.config.tie_rule, both.config.task_tie_rule) == ("bfs", "bfs")
        assert "both trees" in both.config.task_tie_rule_source
    finally:
        both.close()
    again = DeltaMem.open(tmp_path / "hh.db", embedder=H)  # the stored rule, not re-derived
    try:
        assert again.config.task_tie_rule == "record"
    finally:
        again.close()
    _forget(tmp_path / "hh.db", "task_tie_rule", "task_tie_rule_source")  # an older bank
    old = DeltaMem.open(tmp_path / "hh.db", embedder=H)
    try:
        assert old.config.task_tie_rule == "deepest"  # what its tie_rule did for both trees
        assert "before task_tie_rule" in old.config.task_tie_rule_source
    finally:
        old.close()
    switched = DeltaMem.open(tmp_path / "hh.db", embedder=H, tie_rule="bfs")
    try:
        assert switched.config.task_tie_rule == "bfs"  # tie_rule given: both trees
    finally:
        switched.close()
