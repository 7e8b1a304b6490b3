"""The household engine's caches: compiled-game files, parse memos, TextWorld parity.

The byte-identical replay of recorded episodes is in ``test_household_replay.py``; these
tests check the cache paths it does not reach (a compiled file read by a new process,
stale or broken files) and compare :func:`engine.derive` with TextWorld's own derivation.
"""

from __future__ import annotations

import copy
import gzip
import json
import sys
from pathlib import Path

import pytest

from tests.envs.test_household_replay import _replay, _unpack, _write_games, load_recorded

pytestmark = pytest.mark.envs


@pytest.fixture(scope="module")
def recorded() -> dict:
    return load_recorded()


@pytest.fixture
def engine():
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from deltamem.envs.household import engine

    return engine


def _forget(engine) -> None:
    """Start from empty per-process memos, as a new process does."""
    for memo in (engine._GAMES, engine._SYMBOLS, engine._QUERIES, engine._CODE):
        memo.clear()


def _episodes_of(recorded: dict, task_id: str) -> list[dict]:
    return [e for e in recorded["episodes"] if e["task_id"] == task_id]


def _cache_file(root: Path, task_id: str, engine) -> Path:
    from deltamem.envs.household.generator import GENERATOR_VERSION

    return root / f"v{GENERATOR_VERSION}" / task_id / engine.CACHE_FILE


def _play_all(root: Path, episodes: list[dict]) -> None:
    from deltamem.envs.household import HouseholdEnv

    with HouseholdEnv(cache_dir=root) as env:
        for want in episodes:
            assert _replay(env, want) == want


def test_compiled_file_is_written_then_read_instead_of_compiling(
        recorded, engine, tmp_path: Path, monkeypatch) -> None:
    task_id = "seen/pick_and_place_simple/0-4"
    episodes = _episodes_of(recorded, task_id)
    _write_games({task_id: _unpack(recorded)[task_id]}, tmp_path)
    _forget(engine)
    _play_all(tmp_path, episodes[:1])
    path = _cache_file(tmp_path, task_id, engine)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        stored = json.load(fh)
    assert stored["format"] == engine.CACHE_FORMAT and stored["logic"] is not None
    assert not list(path.parent.glob(".*.tmp"))

    _forget(engine)   # a new process: only the file is left

    def fail(*_a, **_k):
        raise AssertionError("compiled again although the file was valid")
    monkeypatch.setattr(engine, "translate", fail)
    monkeypatch.setattr(engine, "_parse_logic", fail)
    _play_all(tmp_path, episodes)


@pytest.mark.parametrize("damage", ["other key", "other format", "garbage", "truncated"])
def test_stale_or_broken_compiled_file_is_never_used(
        recorded, engine, tmp_path: Path, monkeypatch, damage: str) -> None:
    task_id = "unseen/look_at_obj_in_light/0-5"
    _write_games({task_id: _unpack(recorded)[task_id]}, tmp_path)
    _forget(engine)
    _play_all(tmp_path, _episodes_of(recorded, task_id)[:1])
    path = _cache_file(tmp_path, task_id, engine)
    good = path.read_bytes()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        stored = json.load(fh)
    if damage in ("other key", "other format"):
        # a translation that would change the observations if it were read
        stored["translation"]["init"] = []
        stored["key" if damage == "other key" else "format"] = "stale"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump(stored, fh)
    elif damage == "garbage":
        path.write_bytes(b"not gzip at all")
    else:
        path.write_bytes(good[: len(good) // 2])
    _forget(engine)
    _play_all(tmp_path, _episodes_of(recorded, task_id))
    assert path.read_bytes() == good   # compiled again and replaced


def test_key_covers_every_text_and_the_format(engine, monkeypatch) -> None:
    key = engine.game_key("d", "g", "p")
    assert key == engine.game_key("d", "g", "p")
    assert len({key, engine.game_key("d2", "g", "p"), engine.game_key("d", "g2", "p"),
                engine.game_key("d", "g", "p2"), engine.game_key("dg", "", "p")}) == 5
    monkeypatch.setattr(engine, "CACHE_FORMAT", engine.CACHE_FORMAT + 1)
    assert engine.game_key("d", "g", "p") != key


def test_grammar_without_a_stored_form_is_parsed_on_read(recorded, engine) -> None:
    game = _unpack(recorded)["seen/look_at_obj_in_light/0-3"]["game"]
    compiled = engine.compile_game(game["pddl_domain"], game["grammar"], game["pddl_problem"])
    data = compiled.to_json()
    calls = []

    def parse():
        calls.append(1)
        return compiled.actions, compiled.rules
    assert engine.CompiledGame.from_json({**data, "logic": None}, parse).rules is compiled.rules
    rebuilt = engine.CompiledGame.from_json(json.loads(json.dumps(data)), parse)
    assert calls == [1]
    assert list(rebuilt.actions) == list(compiled.actions)
    assert {k: [(r.condition, r.weight, repr(r.rhs)) for r in v]
            for k, v in rebuilt.rules._rules.items()} == \
        {k: [(r.condition, r.weight, repr(r.rhs)) for r in v]
         for k, v in compiled.rules._rules.items()}


def _inner(env):
    from deltamem.envs.household.engine import CachedPddlEnv

    inner = env._env
    while not isinstance(inner, CachedPddlEnv):
        inner = inner._wrapped_env
    return inner


def test_derive_matches_textworld_on_every_feedback_and_command(recorded, engine,
                                                                tmp_path: Path) -> None:
    """TextWorld's own ``ContextSensitiveGrammar.derive`` and :func:`engine.derive` on the
    same contexts: the intro, every action's feedback rule, every command template."""
    from deltamem.envs.household import HouseholdEnv

    games = _unpack(recorded)
    _write_games(games, tmp_path)
    compared = 0
    with HouseholdEnv(cache_dir=tmp_path) as env:
        for task_id in list(games)[::3]:
            env.reset(task_id)
            inner = _inner(env)
            grammar = inner._logic.grammar
            facts = list(inner._pddl_state.facts)
            context = inner._context(facts)
            assert engine.derive(grammar, "#intro#", context) == \
                grammar.derive("#intro#", context)
            for action in inner._pddl_state.all_applicable_actions():
                context = inner._context(facts, action)
                for start in (action.feedback_rule, action.command_template):
                    assert engine.derive(grammar, start, context) == \
                        grammar.derive(start, context), (task_id, start)
                    compared += 1
    assert compared > 100


def test_steps_neither_parse_nor_deep_copy(recorded, engine, tmp_path: Path,
                                           monkeypatch) -> None:
    """After a game's first steps, a step runs no tatsu parse and no ``deepcopy``."""
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    from deltamem.envs.household import HouseholdEnv

    want = _episodes_of(recorded, "seen/pick_cool_then_place_in_recep/0-2")
    _write_games(_unpack(recorded), tmp_path)
    with HouseholdEnv(cache_dir=tmp_path) as env:
        for episode in want:   # the first time: templates and conditions are parsed
            assert _replay(env, episode) == episode

        def fail(*_a, **_k):
            raise AssertionError("parsed or deep-copied on the step path")
        monkeypatch.setattr(textgen, "_parse_and_convert", fail)
        monkeypatch.setattr(textgen, "deepcopy", fail)
        monkeypatch.setattr(copy, "deepcopy", fail)
        monkeypatch.setattr(Rule, "parse_conjunctive_query", fail)
        for episode in want:
            assert _replay(env, episode) == episode


def test_sys_argv_is_left_alone(recorded, engine, monkeypatch) -> None:
    game = _unpack(recorded)["unseen/pick_and_place_simple/0-2"]["game"]
    monkeypatch.setattr(sys, "argv", ["deltamem", "run"])
    engine.translate(game["pddl_domain"], game["pddl_problem"])
    assert sys.argv == ["deltamem", "run"]
