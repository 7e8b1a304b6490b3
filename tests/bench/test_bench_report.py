"""Reports, statistics and configuration loading."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.bench import RunConfig, load_config, parse_option, report, run
from deltamem.bench.report import MATPLOTLIB_MISSING, depth_histograms
from deltamem.bench.results import bank_size
from deltamem.bench.stats import bootstrap_ci, running_mean
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.llm import ScriptedLLM
from deltamem.memories import register_memory

from .bench_toys import CorridorEnv, Faults, FileMemory


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    faults = Faults()
    register_memory("test-file", lambda **kw: FileMemory(kw.get("bank"), faults))
    config = RunConfig(run_dir=tmp_path / "run", env="corridor", split="test", llm="scripted",
                       memory="test-file", protocol="train-to-test", train_episodes=4,
                       episodes=3)
    llm = ScriptedLLM(responder=lambda m, p, c: "Action: go east")
    run(config, env=CorridorEnv(), llm=llm, progress=False)
    return Path(config.run_dir)


@pytest.mark.slow  # importing matplotlib alone takes ~3 s here
def test_report_renders_tables_and_plots(run_dir: Path) -> None:
    pytest.importorskip("matplotlib")
    path = report(run_dir)
    assert path == run_dir / "report.md"
    text = path.read_text()
    for heading in ("## Configuration", "## Results", "## LLM usage per episode",
                    "## Bank after each phase", "## Plots"):
        assert heading in text
    rows = [ln for ln in text.splitlines() if ln.startswith(("| build", "| frozen", "| unfrozen"))]
    assert len(rows) >= 6  # one results row and at least one usage row per phase
    assert "| build | train | 4 |" in text and "| frozen | test | 3 |" in text
    assert "| act |" in text
    for png in ("success_rate.png", "bank_size.png", "depth_build.png", "depth_unfrozen.png"):
        assert (run_dir / png).stat().st_size > 0
        assert f"![{png}]({png})" in text
    assert MATPLOTLIB_MISSING not in text


def test_report_is_reproducible(run_dir: Path) -> None:
    first = report(run_dir, plots=False).read_text()
    assert report(run_dir, plots=False).read_text() == first
    assert "## Plots" not in first


def test_report_of_attempts_counts_games_and_intervals_over_games(tmp_path: Path) -> None:
    config = RunConfig(run_dir=tmp_path / "run", env="corridor", split="test", llm="scripted",
                       memory="none", episodes=2, attempts=3, temperature=0.5)
    run(config, env=CorridorEnv(), llm=ScriptedLLM(responder=lambda m, p, c: "Action: go east"),
        progress=False)
    text = report(Path(config.run_dir), plots=False).read_text()
    # the corridor's two games: one is won every time, one never; over 2 games the interval
    # spans both (over 6 episodes the percentile bootstrap would be narrower)
    assert "| online | test | 6 (2 games) | 50.0% | 0.500 [0.000, 1.000] |" in text


def test_report_without_matplotlib_says_so(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    text = report(run_dir).read_text()
    assert MATPLOTLIB_MISSING in text and "deltamem[plots]" in text
    assert not (run_dir / "success_rate.png").exists()


def test_report_of_an_empty_run_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no recorded episode"):
        report(tmp_path)


def test_depth_histograms_are_found_per_tree() -> None:
    assert depth_histograms({"task": {"depth_histogram": {"0": 2, "1": 1}}}) == {
        "task": {0: 2, 1: 1}}
    assert depth_histograms({"depth_histogram": {"task": {"0": 1}, "env": {"0": 3, "2": 1}}}) == {
        "task": {0: 1}, "env": {0: 3, 2: 1}}
    assert depth_histograms({"depth_histogram": {"0": 5}}) == {"bank": {0: 5}}
    assert depth_histograms({"units": 3}) == {}


def test_bank_size_reads_units_nodes_or_nested_counts() -> None:
    assert bank_size({"units": 4}) == 4
    assert bank_size({"nodes": 7, "units": True}) == 7
    assert bank_size({"task": {"nodes": 2}, "env": {"nodes": 3}}) == 5
    assert bank_size({"other": 1}) is None and bank_size(None) is None


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=40),
       st.integers(min_value=0, max_value=5))
def test_bootstrap_ci_brackets_the_mean_and_is_seeded(values: list[float], seed: int) -> None:
    lo, hi = bootstrap_ci(values, seed=seed, n_boot=200)
    mean = sum(values) / len(values)
    assert lo <= mean + 1e-9 and mean - 1e-9 <= hi
    assert (lo, hi) == bootstrap_ci(values, seed=seed, n_boot=200)


def test_bootstrap_ci_rejects_empty_input_and_narrows_with_more_data() -> None:
    with pytest.raises(InvalidInputError):
        bootstrap_ci([])
    small = bootstrap_ci([0, 1] * 5)
    large = bootstrap_ci([0, 1] * 500)
    assert large[1] - large[0] < small[1] - small[0]
    assert running_mean([1, 0, 1, 0]) == [1.0, 0.5, 2 / 3, 0.5]


def test_load_config_from_toml_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text(
        'run_dir = "runs/a"\nenv = "alfworld"\nsplit = "seen"\nllm = "openai:x"\n'
        'episodes = 10\nmemory = "deltamem"\n[memory_options]\ntau_task = 0.7\nd_max = 5\n'
    )
    config = load_config(toml, episodes=3, seed=None, memory_options={"tau_task": 0.8})
    assert config.episodes == 3 and config.seed == 0
    assert config.memory_options == {"tau_task": 0.8, "d_max": 5}
    assert config.run_dir == Path("runs/a") and config.protocol == "online"
    assert RunConfig.model_validate_json(config.to_json()) == config


def test_load_config_errors_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="invalid run configuration"):
        load_config(run_dir="x", env="e", split="s", llm="l", protocol="offline")
    with pytest.raises(ConfigError, match="invalid run configuration"):
        load_config(run_dir="x", env="e", split="s", llm="l", unknown_key=1)


def test_parse_option() -> None:
    assert parse_option("tau_task=0.8") == ("tau_task", 0.8)
    assert parse_option("flag=true") == ("flag", True)
    assert parse_option("name=e5 base") == ("name", "e5 base")
    with pytest.raises(ConfigError):
        parse_option("novalue")


def test_public_surface_is_pinned() -> None:
    import deltamem.agents
    import deltamem.bench

    assert sorted(deltamem.bench.__all__) == [
        "PhaseSummary", "RunConfig", "RunResult", "load_config", "parse_option",
        "parse_options", "read_episodes", "report", "run",
    ]
    assert sorted(deltamem.agents.__all__) == [
        "INVALID_OBSERVATION", "ReActAgent", "Reply", "clean_action", "match_action",
        "parse_reply",
    ]


def test_env_options_merge_and_reach_the_environment(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / "run.toml"
    toml.write_text('env = "textworld:treasure"\nsplit = "seen"\nllm = "scripted"\n'
                    '[env_options]\ndifficulty = 2\nmax_steps = 9\n')
    config = load_config(toml, run_dir=tmp_path / "r", env_options={"difficulty": 3})
    assert config.env_options == {"difficulty": 3, "max_steps": 9}
    seen: dict = {}

    class Stop(Exception):
        pass

    def fake_make_env(spec: str, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(spec=spec, **kwargs)
        raise Stop

    import deltamem.envs.registry as registry

    monkeypatch.setattr(registry, "make_env", fake_make_env)
    with pytest.raises(Stop):
        run(config, progress=False)
    assert seen == {"spec": "textworld:treasure", "difficulty": 3, "max_steps": 9}
