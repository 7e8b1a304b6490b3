"""Run defaults a new user can rely on: bundled embedder, constrained mode for the local
model, a run directory, and errors that name the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.bench.config import RunConfig, default_run_dir, is_local_llm, load_config
from deltamem.errors import ConfigError


def test_memory_gets_the_bundled_embedder_unless_none():
    assert RunConfig(run_dir="r", memory="deltamem").embedder == "minilm"
    assert RunConfig(run_dir="r", memory="none").embedder is None
    assert RunConfig(run_dir="r", memory="deltamem", embedder="hashing").embedder == "hashing"
    # an explicit None is kept (a memory that must get no embedder)
    assert RunConfig(run_dir="r", memory="deltamem", embedder=None).embedder is None


@pytest.mark.parametrize(("llm", "constrained"), [
    ("local", True), ("local:/m/model.gguf", True), (" LOCAL ", True),
    ("openai:gpt-4o-mini", False), ("scripted", False),
])
def test_constrained_by_default_only_for_the_local_model(llm, constrained):
    cfg = RunConfig(run_dir="r", llm=llm)
    assert cfg.constrained is constrained
    assert is_local_llm(llm) is constrained
    assert ("constrained" in cfg.decoding) is constrained


def test_explicit_mode_wins_over_the_default():
    assert RunConfig(run_dir="r", llm="local", constrained=False).constrained is False
    assert RunConfig(run_dir="r", llm="openai:m", constrained=True).constrained is True
    assert load_config(run_dir="r", llm="local", constrained=None).constrained is True


def test_saved_config_keeps_the_resolved_mode(tmp_path):
    cfg = RunConfig(run_dir=tmp_path, memory="deltamem")
    path = tmp_path / "config.json"
    path.write_text(cfg.to_json())
    back = RunConfig.from_json_file(path)
    assert back == cfg and back.constrained is True and back.embedder == "minilm"


def test_flags_alone_make_a_working_config():
    cfg = load_config(memory="deltamem")
    assert (cfg.env, cfg.split, cfg.llm, cfg.embedder) == ("household", "seen", "local", "minilm")
    assert cfg.run_dir == Path("runs/household-seen-deltamem")
    assert default_run_dir({"env": "textworld:cooking", "memory": "none"}) == Path(
        "runs/textworld_cooking-seen-none")


def test_toml_run_dir_and_embedder_are_kept(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('run_dir = "elsewhere"\nmemory = "deltamem"\nembedder = "hashing:32"\n')
    cfg = load_config(toml)
    assert cfg.run_dir == Path("elsewhere") and cfg.embedder == "hashing:32"


def test_validation_errors_name_the_flag():
    with pytest.raises(ConfigError) as e:
        load_config(run_dir="r", episodes=0, max_steps=0)
    msg = str(e.value)
    assert "--episodes" in msg and "--max-steps" in msg and "\n" not in msg


def test_report_says_which_decoding_the_run_used(tmp_path):
    from deltamem.bench import report, run
    from deltamem.llm import ScriptedLLM

    from .bench_toys import CorridorEnv

    for constrained in (True, False):
        cfg = RunConfig(run_dir=tmp_path / str(constrained), env="corridor", split="test",
                        llm="scripted", episodes=1, constrained=constrained)
        llm = ScriptedLLM(responder=lambda m, p, c: c[0] if c else "Action: go east")
        run(cfg, env=CorridorEnv(), llm=llm, progress=False)
        text = report(cfg.run_dir, plots=False).read_text()
        assert ("Action decoding: constrained" in text) is constrained
        assert ("Action decoding: free generation" in text) is not constrained


@pytest.mark.parametrize("memory", ["deltamem", "synapse"])
def test_needs_an_embedder_names_the_flag(memory):
    from deltamem.memories import make_memory

    with pytest.raises(ConfigError, match="--embedder"):
        make_memory(memory, embedder=None)

