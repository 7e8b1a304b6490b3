"""grid_settings: a shared TOML run configuration for every grid cell, overridden by flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.analysis.grid import grid_settings
from deltamem.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "run.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_config_fields_reach_every_cell_and_flags_win(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'env = "household"\nsplit = "seen"\nepisodes = 60\nllm = "local"\n'
                          'constrained = true\nrepeat_limit = 2\nmax_listed_actions = 0\n'
                          '[llm_options]\nn_threads = 1\n[memory_options]\nepsilon = 0.2\n')
    s = grid_settings(cfg, episodes=6, seed=None, llm=None, options={"d_max": 4})
    assert (s["env"], s["split"], s["episodes"], s["llm"], s["seed"]) == (
        "household", "seen", 6, "local", 0)
    assert s["embedder"] == "minilm"
    assert s["options"] == {"epsilon": 0.2, "d_max": 4}
    assert s["run_options"] == {"constrained": True, "repeat_limit": 2, "max_listed_actions": 0,
                                "llm_options": {"n_threads": 1}, "extractor": "structural"}


def test_flags_alone_keep_the_old_defaults() -> None:
    s = grid_settings(env="household", split="seen", episodes=None)
    assert s["llm"] == "local" and s["embedder"] == "minilm" and s["seed"] == 0
    # the local model picks among admissible actions, as in `deltamem run`
    assert s["run_options"] == {"extractor": "structural", "constrained": True}
    assert s["options"] is None
    api = grid_settings(env="household", split="seen", episodes=None, llm="openai:m")
    assert api["run_options"]["constrained"] is False
    explicit = grid_settings(env="household", split="seen", episodes=None, constrained=False)
    assert explicit["run_options"]["constrained"] is False


@pytest.mark.parametrize("text", ['memory = "none"\nenv = "x"\nsplit = "y"\n',
                                  'run_dir = "r"\nenv = "x"\nsplit = "y"\n'])
def test_grid_owned_keys_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="cannot be set for a grid"):
        grid_settings(write(tmp_path, text))


def test_env_and_split_are_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env and split"):
        grid_settings(write(tmp_path, "episodes = 3\n"))
    with pytest.raises(ConfigError, match="cannot read"):
        grid_settings(tmp_path / "missing.toml", env="a", split="b")
