"""Arbitrary LLM outputs through LLMExtractor + ScriptedLLM into DeltaMem.learn.

Property: an output reaches the bank only if it is valid; every rejection is
logged (``deltamem.extract`` warning) and recorded in ``store.rejections()``
with its reason. The episode is a success on an empty bank, so each learn
asks for ``task_root_success`` and ``env_root``; the scripted LLM gives the
same answer to the first call and to the repair call.
"""

from __future__ import annotations

import json
import logging
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.extract.llm import LLMExtractor
from deltamem.extract.schema import ACTIVATION_MAX, PROCEDURE_MAX, TERMINATION_MAX
from deltamem.memories.deltamem import DeltaMem
from deltamem.testing import HashingEmbedder, ScriptedLLM, make_episode

KEYS = ("activation_condition", "execution_procedure", "termination_condition")
ROLES = {"task": "task_root_success", "env": "env_root"}
_counter = iter(range(10**9))

_ok_char = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"))
_field = st.text(_ok_char, min_size=1, max_size=60).filter(lambda s: s.strip())


def _obj(a: str, p: str, t: str) -> str:
    return json.dumps({KEYS[0]: a, KEYS[1]: p, KEYS[2]: t})


valid = st.builds(_obj, _field, _field, st.text(_ok_char, max_size=40))
malformed = st.one_of(
    st.text(max_size=200),
    valid.map(lambda s: s[: len(s) // 2]),  # truncated
    valid.map(lambda s: s[:-1] + ",}"),  # trailing comma
    valid.map(lambda s: "Here is the JSON: " + s),  # prose around it
    valid.map(lambda s: s + s),  # two objects
    st.just(""),
    st.just("null"),
)
wrong_types = st.builds(
    lambda k, v, base: json.dumps({**base, k: v}),
    st.sampled_from(KEYS),
    st.one_of(st.integers(), st.floats(allow_nan=False), st.none(), st.booleans(),
              st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                         st.integers())),
    st.fixed_dictionaries({k: _field for k in KEYS}),
) | st.builds(lambda v: json.dumps(v), st.one_of(st.lists(_field), st.integers(), _field))
huge = st.builds(
    lambda k, n, base: json.dumps({**base, k: "x" * n}),
    st.sampled_from(KEYS),
    st.sampled_from([ACTIVATION_MAX + 1, PROCEDURE_MAX + 1, TERMINATION_MAX + 1, 100_000]),
    st.fixed_dictionaries({k: _field for k in KEYS}),
).filter(lambda raw: any(len(v) > _limit(k) for k, v in json.loads(raw).items()))
control = st.builds(
    lambda k, ch, pos, base: json.dumps({**base, k: base[k][:pos] + ch + base[k][pos:]}),
    st.sampled_from(KEYS),
    st.sampled_from([chr(c) for c in [*range(0, 9), *range(11, 32), 127, 0x85]]),
    st.integers(0, 60),
    st.fixed_dictionaries({k: _field for k in KEYS}),
)


def _limit(key: str) -> int:
    return {KEYS[0]: ACTIVATION_MAX, KEYS[1]: PROCEDURE_MAX, KEYS[2]: TERMINATION_MAX}[key]


def _learn(raw: str, caplog: pytest.LogCaptureFixture) -> DeltaMem:
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(dim=64), domain="alfworld",
                        extractor=LLMExtractor(ScriptedLLM(responder=lambda *_: raw)))  # fmt: skip
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="deltamem.extract"):
        mem.learn(make_episode(episode_id=f"fuzz-{next(_counter)}"))
    return mem


def _assert_bank_clean(mem: DeltaMem) -> None:
    """Whatever got in satisfies the output rules."""
    for tree in ("task", "env"):
        for n in mem.nodes(tree):
            p = n.payload
            assert p.activation.strip() and p.procedure.strip()
            assert len(p.activation) <= ACTIVATION_MAX and len(p.procedure) <= PROCEDURE_MAX
            assert len(p.termination) <= TERMINATION_MAX
            for text in (p.activation, p.procedure, p.termination):
                assert not [c for c in text if c not in "\n\t" and unicodedata.category(c) == "Cc"]


def _assert_rejected(mem: DeltaMem, raw: str, caplog: pytest.LogCaptureFixture) -> None:
    assert mem.stats()["nodes"] == {"task": 0, "env": 0}
    rejections = mem.store.rejections()
    assert sorted(r["role"] for r in rejections) == sorted(ROLES.values())
    logged = [r.getMessage() for r in caplog.records if r.name == "deltamem.extract"]
    for rej in rejections:
        assert rej["reason"] and rej["raw"] == raw[:20000]
        detail = rej["reason"].split(": ")[-1]
        assert any(rej["role"] in m and detail in m for m in logged), (rej, logged)


_fuzz = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                 deadline=None)  # fmt: skip


@_fuzz
@given(raw=st.one_of(malformed, wrong_types, huge, control))
def test_invalid_outputs_never_reach_the_bank_and_are_logged(raw, caplog):
    mem = _learn(raw, caplog)
    try:
        _assert_rejected(mem, raw, caplog)
    finally:
        mem.close()


@_fuzz
@given(raw=valid)
def test_valid_outputs_are_written_verbatim(raw, caplog):
    mem = _learn(raw, caplog)
    try:
        obj = json.loads(raw)
        assert mem.stats()["nodes"] == {"task": 1, "env": 1}
        assert mem.store.rejections() == []
        for tree in ("task", "env"):
            p = mem.nodes(tree)[0].payload
            assert (p.activation, p.procedure, p.termination) == tuple(obj[k].strip() for k in KEYS)
        _assert_bank_clean(mem)
    finally:
        mem.close()


@_fuzz
@given(raw=st.text(max_size=300) | valid | malformed | wrong_types | control)
def test_any_output_is_either_written_clean_or_rejected_with_a_reason(raw, caplog):
    mem = _learn(raw, caplog)
    try:
        written = mem.stats()["nodes"]
        rejected = {r["role"] for r in mem.store.rejections()}
        for tree, role in ROLES.items():
            assert (written[tree] == 1) != (role in rejected)
        _assert_bank_clean(mem)
    finally:
        mem.close()


def test_whitespace_only_fields_are_rejected(caplog):
    raw = _obj("   ", "\n\t ", "")
    mem = _learn(raw, caplog)
    try:
        _assert_rejected(mem, raw, caplog)
    finally:
        mem.close()
