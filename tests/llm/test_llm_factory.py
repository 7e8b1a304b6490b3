"""make_llm specs and the package's public names."""

from __future__ import annotations

from pathlib import Path

import pytest

import deltamem.llm as llm_pkg
from deltamem.errors import ConfigError
from deltamem.llm import (
    LLMClient,
    LocalLLM,
    LogProbSampler,
    OpenAICompatLLM,
    RecordReplayLLM,
    ScriptedLLM,
    make_llm,
)


def test_public_names_are_pinned() -> None:
    assert sorted(llm_pkg.__all__) == [
        "BaseLLM", "Completion", "LLMClient", "LocalLLM", "LogProbSampler", "Message",
        "OpenAICompatLLM", "RecordReplayLLM", "ScoredSample", "ScriptedLLM", "make_llm",
    ]


def test_copilot_spec_reaches_the_training_package_by_name(tmp_path: Path) -> None:
    # the entry point is resolved on use; an unknown copilot backend fails before any model
    with pytest.raises(ConfigError, match="unknown copilot backend"):
        make_llm(f"copilot:{tmp_path}", role="success", backend="onnx")
    with pytest.raises(ConfigError, match="bad options"):
        make_llm(f"copilot:{tmp_path}")  # the role is required


def test_only_the_local_model_samples_with_logprobs() -> None:
    assert isinstance(make_llm("local"), LogProbSampler)
    assert not isinstance(make_llm("scripted"), LogProbSampler)


def test_local_specs() -> None:
    default = make_llm("local", n_ctx=1024)
    assert isinstance(default, LocalLLM) and default.model_path is None and default.n_ctx == 1024
    custom = make_llm("local:/models/x.gguf")
    assert isinstance(custom, LocalLLM) and custom.model_path == "/models/x.gguf"
    assert custom.name == "local:x.gguf"


def test_openai_spec_takes_base_url_and_is_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = make_llm("openai:deepseek-chat", base_url="https://api.deepseek.com", max_retries=2)
    assert isinstance(llm, OpenAICompatLLM)
    assert (llm.model, llm.base_url, llm.max_retries) == (
        "deepseek-chat", "https://api.deepseek.com", 2)
    assert llm.name == "openai:deepseek-chat"
    assert isinstance(llm, LLMClient)


def test_scripted_spec_picks_first_choice_or_uses_responses() -> None:
    llm = make_llm("scripted")
    assert isinstance(llm, ScriptedLLM)
    msgs = [{"role": "user", "content": "?"}]
    assert llm.complete(msgs, purpose="act", choices=["b", "a"]).text == "b"
    assert make_llm("scripted", responses=["hi"]).complete(msgs, purpose="act").text == "hi"


def test_cache_wrapping(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    llm = make_llm("scripted", cache_path=path, cache_mode="record")
    assert isinstance(llm, RecordReplayLLM) and llm.mode == "record"
    assert isinstance(llm.inner, ScriptedLLM)
    llm.complete([{"role": "user", "content": "?"}], purpose="act", choices=["x"])
    replay = make_llm("scripted", cache_path=path, cache_mode="replay")
    out = replay.complete([{"role": "user", "content": "?"}], purpose="act", choices=["x"])
    assert out.text == "x" and replay.inner.calls == []
    assert make_llm("scripted", cache_path=str(path)).mode == "auto"


@pytest.mark.parametrize("spec", ["", "gpt-4o", "openai", "openai:", "scripted:x", "hf:foo"])
def test_unknown_spec_lists_valid_forms(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"local:/path/model\.gguf.*openai:MODEL"):
        make_llm(spec)


def test_bad_keyword_is_config_error() -> None:
    with pytest.raises(ConfigError, match="bad options"):
        make_llm("local", n_gpu_layers=3)
    with pytest.raises(ConfigError, match="not both"):
        make_llm("local:/a.gguf", model_path="/b.gguf")
    with pytest.raises(ConfigError, match="cache mode"):
        make_llm("scripted", cache_path="x.jsonl", cache_mode="nope")


def test_llm_threads_come_from_the_environment_when_not_given(monkeypatch) -> None:
    from deltamem.errors import ConfigError
    from deltamem.llm.local import THREADS_ENV, env_threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert env_threads() is None
    monkeypatch.setenv(THREADS_ENV, " 3 ")
    assert env_threads() == 3
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ConfigError, match=THREADS_ENV):
            env_threads()
