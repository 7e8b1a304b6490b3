"""The main job's logic on a toy environment: banks from demonstrations, frozen evaluation,
the paired difference and one recall."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.bench import read_episodes
from deltamem.bench.gain import gain
from deltamem.demo import demo, example_recall
from deltamem.envs.registry import register, unregister
from deltamem.errors import ConfigError


def _results_script():
    """``scripts/results.py`` as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "results_script", Path(__file__).parents[2] / "scripts" / "results.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def keyroom():
    register("keyroom-demo", "tests.agents.test_expert:KeyRoom")
    yield "keyroom-demo"
    unregister("keyroom-demo")


def test_demo_builds_from_demonstrations_and_compares_frozen_runs(tmp_path: Path,
                                                                  keyroom: str) -> None:
    out = demo(tmp_path / "demo", episodes=3, train_episodes=2, split="test", llm="scripted",
               embedder="hashing", env=keyroom, progress=False)
    assert [r.memory for r in out.results] == ["none", "deltamem"]
    for r in out.results:
        lines = read_episodes(r.result.episodes_path)
        assert [x["phase"] for x in lines] == ["build"] * 2 + ["frozen"] * 3
        assert [x["agent"] for x in lines] == ["expert"] * 2 + ["react"] * 3
        assert len(r.successes) == 3
    # the scripted model picks the first admissible action ("go shelf"...): with the guide's
    # prior and a bank built from demonstrations it leaves the room, without memory it does not
    none, dm = out.results
    assert none.rate == 0.0 and dm.rate == 1.0
    assert out.gains["deltamem"].paired and out.gains["deltamem"].diff == 1.0
    assert "deltamem built from demonstrations succeeds more often" in out.verdict()
    goal, text = example_recall(out)
    assert goal == "leave the room" and "take key" in text


def test_demo_passes_the_action_list_limit_to_every_run(tmp_path: Path, keyroom: str) -> None:
    import json

    demo(tmp_path / "demo", episodes=1, train_episodes=1, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False, jobs=1, max_listed_actions=0)
    for memory in ("none", "deltamem"):
        cfg = json.loads((tmp_path / "demo" / memory / "config.json").read_text())
        assert cfg["max_listed_actions"] == 0


def test_gain_is_paired_by_task_and_honest_about_zero() -> None:
    g = gain([0, 0, 0, 0], [1, 1, 1, 0], ids_a=list("abcd"), ids_b=list("abcd"))
    assert g.paired and g.diff == 0.75 and g.excludes_zero
    same = gain([1, 0, 1, 0], [0, 1, 1, 0], ids_a=list("abcd"), ids_b=list("abcd"))
    assert same.diff == 0 and not same.excludes_zero
    assert not gain([0, 1], [1, 1], ids_a=["a", "b"], ids_b=["b", "a"]).paired


def test_results_script_writes_one_table_with_the_difference_and_the_commands(
        tmp_path: Path, keyroom: str) -> None:
    demo(tmp_path / "demo", episodes=3, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False)
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "demo" / "none"), str(tmp_path / "demo" / "deltamem"),
              "--out", str(out), "--expect", "none,synapse,deltamem"])
    text = out.read_text()
    assert text.count("## keyroom-demo") == 1
    assert "| none | - | frozen | 3 | 0.0 |" in text
    assert "| deltamem | expert x 2 (train) | frozen | 3 | 100.0 |" in text
    assert "+100.0 [+100.0, +100.0] *" in text
    assert "Not measured in this setting: synapse." in text
    assert "--train-agent expert --train-episodes 2" in text


def test_results_script_compares_deltamem_with_each_other_memory_on_shared_games(
        tmp_path: Path, keyroom: str) -> None:
    demo(tmp_path / "demo", episodes=3, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False, systems=("none", "deltamem"))
    demo(tmp_path / "demo", episodes=2, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False, systems=("synapse",))
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "demo" / m) for m in ("none", "synapse", "deltamem")]
             + ["--out", str(out)])
    text = out.read_text()
    assert "DeltaMem against each other memory" in text
    line = next(x for x in text.splitlines() if x.startswith("* deltamem − synapse"))
    assert "(frozen, 2 games)" in line  # paired on the two games synapse played
    assert not any(x.startswith("* deltamem − none") for x in text.splitlines())


def test_results_script_takes_the_frozen_none_run_as_the_unfrozen_baseline(
        tmp_path: Path, keyroom: str) -> None:
    from deltamem.bench import RunConfig, run

    demo(tmp_path / "demo", episodes=3, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False, systems=("none",))
    run(RunConfig(run_dir=tmp_path / "demo" / "dm-unfrozen", env=keyroom, split="test",
                  episodes=3, memory="deltamem", llm="scripted", embedder="hashing",
                  extractor="structural", protocol="train-to-test", train_split="train",
                  train_episodes=2, train_agent="expert", eval_modes=("unfrozen",),
                  constrained=True, guide="prior"), progress=False)
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "demo" / "none"), str(tmp_path / "demo" / "dm-unfrozen"),
              "--out", str(out)])
    row = next(x for x in out.read_text().splitlines() if x.startswith("| deltamem |"))
    assert "| unfrozen | 3 | 100.0 |" in row and "+100.0 [+100.0, +100.0] *" in row


def test_systems_run_side_by_side_give_the_same_outcome(tmp_path: Path, keyroom: str) -> None:
    kw = dict(episodes=3, train_episodes=2, split="test", llm="scripted", embedder="hashing",
              env=keyroom, progress=False)
    one = demo(tmp_path / "one", jobs=1, **kw)
    two = demo(tmp_path / "two", jobs=2, **kw)
    assert [(r.memory, r.task_ids, r.successes) for r in one.results] == \
        [(r.memory, r.task_ids, r.successes) for r in two.results]
    assert all(r.seconds > 0 for r in two.results)
    with pytest.raises(ConfigError, match="jobs"):
        demo(tmp_path / "bad", jobs=0, **kw)


def test_side_by_side_runs_print_a_line_per_episode_named_by_system(
        tmp_path: Path, keyroom: str, capfd: pytest.CaptureFixture[str]) -> None:
    demo(tmp_path / "lines", jobs=2, episodes=3, train_episodes=2, split="test",
         llm="scripted", embedder="hashing", env=keyroom, progress=None)
    err = capfd.readouterr().err
    for memory in ("none", "deltamem"):
        assert sum(line.startswith(f"{memory}: frozen") for line in err.splitlines()) == 3, err


def test_results_script_section_replaces_only_its_own_section() -> None:
    mod = _results_script()
    page = "# Results\n\nintro\n\n## keyroom, split `test`\n\nold table\n"
    generated = "# Results\n\npreamble\n\n## household, split `unseen`\n\n| a |\n"
    once = mod.splice(page, "MCMA runs", generated)
    assert once.startswith(page.rstrip())  # the rest of the page is kept
    assert "## MCMA runs" in once and "### household, split `unseen`" in once
    again = mod.splice(once, "MCMA runs", generated.replace("| a |", "| b |"))
    assert again.count("## MCMA runs") == 1 and "| b |" in again and "| a |" not in again
    assert "old table" in again


def test_results_script_command_keeps_every_setting_that_differs_from_its_default() -> None:
    from deltamem.bench.config import RunConfig

    mod = _results_script()
    cfg = RunConfig(env="babyai", split="test", memory="none", llm="local",
                    run_dir="runs/x", history_chars=2500, max_listed_actions=7)
    line = mod.command(cfg)
    assert "history_chars = 2500" in line and "max_listed_actions = 7" in line
    plain = mod.command(RunConfig(env="babyai", split="test", memory="none", llm="local",
                                  run_dir="runs/x"))
    assert "history_chars" not in plain and "in a TOML file" not in plain


def test_results_script_command_of_a_run_saved_before_cue_at_asks_at_the_end(
        tmp_path: Path) -> None:
    import json

    from deltamem.bench.config import RunConfig

    mod = _results_script()
    cfg = RunConfig(env="babyai", split="test", memory="none", llm="local", run_dir="runs/x")
    saved = json.loads(cfg.to_json())
    del saved["cue_at"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    line = mod.command(RunConfig.from_json_file(tmp_path / "config.json"))
    assert 'in a TOML file: cue_at = "end"' in line
    assert "cue_at" not in mod.command(cfg)


def test_results_script_adds_learning_curves_per_block_of_games(tmp_path: Path,
                                                                 keyroom: str) -> None:
    pytest.importorskip("matplotlib")
    demo(tmp_path / "demo", episodes=4, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False)
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "demo" / "none"), str(tmp_path / "demo" / "deltamem"),
              "--out", str(out), "--blocks", "2", "--plot", str(tmp_path / "curves.png")])
    text = out.read_text()
    assert "Success (%) per block of 2 games" in text
    assert "| deltamem (frozen) | 100.0 | 100.0 |" in text
    assert "| none (frozen) | 0.0 | 0.0 |" in text
    assert list(tmp_path.glob("curves-*.png")) and "![learning curves](curves-" in text
    assert "| steps (won) | search steps |" in text


def test_results_script_pairs_a_runs_phases_and_two_runs_of_one_memory(
        tmp_path: Path, keyroom: str) -> None:
    from deltamem.bench import RunConfig, run

    base = dict(env=keyroom, split="test", episodes=3, llm="scripted", embedder="hashing",
                extractor="structural", protocol="train-to-test", train_split="train",
                train_agent="expert", constrained=True, guide="prior", memory="awm")
    run(RunConfig(run_dir=tmp_path / "awm-a", train_episodes=2,
                  eval_modes=("frozen", "unfrozen"), **base), progress=False)
    run(RunConfig(run_dir=tmp_path / "awm-b", train_episodes=1, eval_modes=("frozen",),
                  **base), progress=False)
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "awm-a"), str(tmp_path / "awm-b"), "--out", str(out)])
    text = out.read_text()
    assert "Other paired differences (same games):" in text
    assert "* awm (awm-a): unfrozen − frozen (3 games): +0.0 [+0.0, +0.0]" in text
    assert "* awm (awm-b) − awm (awm-a) (frozen, 3 games):" in text


def test_results_script_pairs_the_score_where_the_environment_scores_progress(
        tmp_path: Path, keyroom: str) -> None:
    import json

    demo(tmp_path / "demo", episodes=3, train_episodes=2, split="test", llm="scripted",
         embedder="hashing", env=keyroom, progress=False, systems=("none", "deltamem"))
    mod = _results_script()
    out = tmp_path / "results.md"
    mod.main([str(tmp_path / "demo" / m) for m in ("none", "deltamem")] + ["--out", str(out)])
    assert not any(x.startswith("* deltamem − none") for x in out.read_text().splitlines())
    # give the no-memory run partial progress (as ScienceWorld's 0-100 score): the lines
    # then pair the score as well, and include none (the table pairs success only)
    path = tmp_path / "demo" / "none" / "episodes.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    for r in recs:
        if r.get("phase") == "frozen":
            r["reward"] = 0.25
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    mod.main([str(tmp_path / "demo" / m) for m in ("none", "deltamem")] + ["--out", str(out)])
    line = next(x for x in out.read_text().splitlines() if x.startswith("* deltamem − none"))
    assert "success +100.0 [+100.0, +100.0] *; score +75.0 [+75.0, +75.0] *" in line


def test_results_script_counts_a_game_s_attempts_as_one_game(tmp_path: Path) -> None:
    """With attempts, a game's success is the mean of its attempts, and the intervals and
    the paired differences are over games, not over episodes."""
    import json

    from deltamem.bench.config import RunConfig

    wins = {"none": {"g1": [0, 0], "g2": [0, 0]},
            "deltamem": {"g1": [1, 0], "g2": [1, 1]}}
    for memory, games in wins.items():
        d = tmp_path / memory
        d.mkdir()
        cfg = RunConfig(run_dir=d, env="corridor", split="test", llm="scripted", memory=memory,
                        attempts=2, temperature=0.5)
        (d / "config.json").write_text(cfg.to_json())
        recs = [{"index": a * 2 + i, "phase": "online", "position": i, "task_id": g,
                 "attempt": a + 1, "success": bool(games[g][a]),
                 "reward": float(games[g][a]), "steps": 3, "usage": {}, "wall_s": 1.0,
                 "bank": {}} for a in range(2) for i, g in enumerate(games)]
        (d / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "results.md"
    _results_script().main([str(tmp_path / "none"), str(tmp_path / "deltamem"),
                            "--out", str(out)])
    text = out.read_text()
    row = next(x for x in text.splitlines() if x.startswith("| deltamem |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:7] == ["4 (2 games)", "75.0", "[50.0, 100.0]", "+75.0 [+50.0, +100.0] *"]
    assert "* deltamem − none (online, 2 games)" not in text  # success only: the table has it
    assert "--temperature 0.5 --attempts 2" in text
    assert "intervals over games (a game played in several attempts" in text
