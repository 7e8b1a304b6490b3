"""RecordReplayLLM: record with ScriptedLLM, replay without it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem.errors import ConfigError, LLMError
from deltamem.llm.replay import RecordReplayLLM, request_hash
from deltamem.llm.scripted import ScriptedLLM

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def run(llm) -> list:
    """A small 'run': repeated identical calls, schema, choices, several purposes."""
    m1 = [{"role": "user", "content": "what next?"}]
    m2 = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "extract"}]
    return [
        llm.complete(m1, purpose="act", choices=["a", "b", "c"]),
        llm.complete(m1, purpose="act"),
        llm.complete(m1, purpose="act"),  # identical request, different answer
        llm.complete(m2, purpose="extract", schema=SCHEMA),
        llm.complete(m1, purpose="plan", max_tokens=64),
    ]


def scripted() -> ScriptedLLM:
    counter = itertools.count()
    return ScriptedLLM(responder=lambda msgs, purpose, choices:
                       choices[-1] if choices else f"{purpose} answer {next(counter)}")


def test_record_then_replay_is_identical(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "llm.jsonl"
    rec = RecordReplayLLM(scripted(), path, mode="record")
    recorded = run(rec)
    assert [c.text for c in recorded][:3] == ["c", "act answer 0", "act answer 1"]

    rep = RecordReplayLLM(None, path, mode="replay")
    replayed = run(rep)
    assert replayed == recorded
    assert rep.usage.to_dict() == rec.usage.to_dict()
    assert rep.usage.calls == 5


def test_replay_does_not_call_inner(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    run(RecordReplayLLM(scripted(), path, mode="record"))
    inner = ScriptedLLM()
    rep = RecordReplayLLM(inner, path, mode="replay")
    # the key uses inner.name, and both are "scripted"
    assert [c.text for c in run(rep)][1] == "act answer 0"
    assert inner.calls == []


def test_miss_in_replay_names_purpose(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    rec = RecordReplayLLM(scripted(), path, mode="record")
    rec.complete([{"role": "user", "content": "x"}], purpose="act")
    rep = RecordReplayLLM(None, path, mode="replay")
    rep.complete([{"role": "user", "content": "x"}], purpose="act")
    with pytest.raises(LLMError, match="'consolidate'"):
        rep.complete([{"role": "user", "content": "x"}], purpose="consolidate")
    with pytest.raises(LLMError, match="occurrence 1"):  # second identical call: not recorded
        rep.complete([{"role": "user", "content": "x"}], purpose="act")


def test_missing_file_in_replay_raises(tmp_path: Path) -> None:
    rep = RecordReplayLLM(None, tmp_path / "none.jsonl", mode="replay")
    with pytest.raises(LLMError, match="does not exist"):
        rep.complete([{"role": "user", "content": "x"}], purpose="act")


def test_torn_last_line_is_tolerated_and_cut_before_append(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    recorded = run(RecordReplayLLM(scripted(), path, mode="record"))
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "key": "abc:0", "purp')  # crash mid-write
    rep = RecordReplayLLM(None, path, mode="replay")
    assert run(rep) == recorded

    auto = RecordReplayLLM(scripted(), path, mode="auto")
    run(auto)
    auto.complete([{"role": "user", "content": "new"}], purpose="act")
    lines = path.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line) for line in lines)


def test_complete_last_record_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    first = RecordReplayLLM(scripted(), path, mode="record")
    first.complete([{"role": "user", "content": "q1"}], purpose="act")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    auto = RecordReplayLLM(scripted(), path, mode="auto")
    auto.complete([{"role": "user", "content": "q2"}], purpose="act")
    assert len(path.read_text().splitlines()) == 2
    rep = RecordReplayLLM(None, path, mode="replay")
    assert rep.complete([{"role": "user", "content": "q1"}], purpose="act").text == "act answer 0"


def test_corrupt_middle_line_raises(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    run(RecordReplayLLM(scripted(), path, mode="record"))
    lines = path.read_text().splitlines()
    lines[1] = "not json"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LLMError, match="line 2"):
        run(RecordReplayLLM(None, path, mode="replay"))


def test_auto_records_misses_only(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    first = RecordReplayLLM(scripted(), path, mode="auto")
    a = first.complete([{"role": "user", "content": "q"}], purpose="act")
    inner = scripted()
    second = RecordReplayLLM(inner, path, mode="auto")
    assert second.complete([{"role": "user", "content": "q"}], purpose="act") == a
    assert inner.calls == []
    second.complete([{"role": "user", "content": "other"}], purpose="act")
    assert len(inner.calls) == 1
    assert len(path.read_text().splitlines()) == 2


def test_key_depends_on_every_field() -> None:
    base = dict(schema=None, choices=None, max_tokens=10, temperature=0.0, model="m",
                purpose="act")
    msgs = [{"role": "user", "content": "x"}]
    h = request_hash(msgs, **base)
    variants = [dict(base, schema={"type": "object"}), dict(base, choices=["a"]),
                dict(base, max_tokens=11), dict(base, temperature=0.5), dict(base, model="n"),
                dict(base, purpose="plan")]
    assert len({h, *(request_hash(msgs, **v) for v in variants)}) == 7
    assert request_hash([{"role": "system", "content": "x"}], **base) != h
    assert request_hash(msgs, **base) == h  # stable


@settings(max_examples=30)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_hash_separates_message_boundaries(parts: list[str]) -> None:
    base = dict(schema=None, choices=None, max_tokens=10, temperature=0.0, model="m",
                purpose="act")
    split = [{"role": "user", "content": p} for p in parts]
    joined = [{"role": "user", "content": "".join(parts)}]
    if len(parts) > 1:
        assert request_hash(split, **base) != request_hash(joined, **base)


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        RecordReplayLLM(None, tmp_path / "x.jsonl", mode="record")
    with pytest.raises(ConfigError):
        RecordReplayLLM(ScriptedLLM(), tmp_path / "x.jsonl", mode="bogus")  # type: ignore[arg-type]


def test_several_models_need_explicit_model(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    a, b = scripted(), ScriptedLLM(["from other"])
    b.name = "other"
    RecordReplayLLM(a, path, mode="record").complete(
        [{"role": "user", "content": "q"}], purpose="act")
    RecordReplayLLM(b, path, mode="record").complete(
        [{"role": "user", "content": "q"}], purpose="act")
    with pytest.raises(ConfigError, match="model="):
        RecordReplayLLM(None, path, mode="replay").complete(
            [{"role": "user", "content": "q"}], purpose="act")
    rep = RecordReplayLLM(None, path, mode="replay", model="other")
    assert rep.complete([{"role": "user", "content": "q"}], purpose="act").text == "from other"
