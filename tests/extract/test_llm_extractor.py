"""LLMExtractor, its prompt templates and the output schema/validator."""

from __future__ import annotations

import json
import logging
import string
import unicodedata
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.core.payload import ChainEntry, Payload, render_chain
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError, LLMError
from deltamem.extract import LLMExtractor, Rejection
from deltamem.extract.base import EXTRACTION_ROLES, SKIPPABLE, Extractor
from deltamem.extract.llm import (
    PROMPT_VARIABLES,
    TEMPLATE_DOMAINS,
    load_template,
    render_trajectory,
    template_domain,
    truncate_middle,
)
from deltamem.extract.residual import chain_steps, procedure_steps
from deltamem.extract.schema import (
    ACTIVATION_MAX,
    ALL_ROLES,
    EXEMPLAR_PROCEDURE_MAX,
    FAILURE_ROLES,
    PROCEDURE_MAX,
    TERMINATION_MAX,
    parse_output,
    schema_for,
)
from deltamem.llm import ScriptedLLM
from deltamem.types import Episode, Step, Task

PROMPTS = Path(__file__).resolve().parents[2] / "src" / "deltamem" / "prompts" / "extract"
ROOT_ROLES = ("task_root_success", "task_root_failure", "env_root")
RESIDUAL_ROLES = ("task_residual_success", "task_residual_failure", "env_residual")
KEYS = ("activation_condition", "execution_procedure", "termination_condition")
CHAIN_MARK = "CHAIN-SENTINEL-7731"

GOOD = {
    "activation_condition": "Tasks that ask to heat an object and place it somewhere.",
    "execution_procedure": "1. go to the counter\n2. take the mug\n3. heat it with the microwave",
    "termination_condition": "The heated mug is on the target receptacle.",
}
GOOD_FAILURE = {
    "activation_condition": "Heating tasks where the stove was assumed to heat objects.",
    "execution_procedure": "[FAILED]: heat mug with stoveburner -> Nothing happened.\n"
                           "[UNEXPLORED]: the microwave.",
    "termination_condition": "",
}


def good_for(role: str) -> dict[str, str]:
    return dict(GOOD_FAILURE if role in FAILURE_ROLES else GOOD)


def make_episode(n_steps: int = 3, *, success: bool = True, scene: str = "A kitchen.",
                 observation: str = "", obs_len: int = 20) -> Episode:
    task = Task(id="t1", goal="put a hot mug in the cabinet", scene=scene, domain="alfworld",
                observation=observation, max_steps=50)
    steps = tuple(Step(action=f"action-{i}", observation=f"obs-{i} " + "x" * obs_len)
                  for i in range(n_steps))
    return Episode(task=task, steps=steps, success=success, reward=1.0 if success else 0.0)


def make_chain() -> list[ChainEntry]:
    return [
        ChainEntry("ROOT", "SUCCESS", Payload("heat tasks", f"base steps {CHAIN_MARK}", "done")),
        ChainEntry("RESIDUAL", "FAILURE", Payload("stove case", "[FAILED]: stove", "")),
    ]


class SchemaRecordingLLM(ScriptedLLM):
    """ScriptedLLM that also keeps the schema of each call."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.schemas: list[object] = []

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        self.schemas.append(schema)
        return super()._complete(messages, schema=schema, choices=choices,
                                 max_tokens=max_tokens, temperature=temperature, purpose=purpose)


def sample_values() -> dict[str, str]:
    return {name: f"<{name.upper()}>" for name in PROMPT_VARIABLES}


# -- templates -------------------------------------------------------------------------------


def test_exactly_32_template_files() -> None:
    files = sorted(p.relative_to(PROMPTS).as_posix() for p in PROMPTS.rglob("*.txt"))
    expected = sorted(f"{d}/{r}.txt" for d in TEMPLATE_DOMAINS for r in ALL_ROLES)
    assert files == expected
    assert len(files) == 32


@pytest.mark.parametrize("domain", TEMPLATE_DOMAINS)
@pytest.mark.parametrize("role", ALL_ROLES)
def test_template_renders_and_asks_for_the_json_keys(domain: str, role: str) -> None:
    template = load_template(domain, role)
    used = set(template.get_identifiers())
    assert used <= PROMPT_VARIABLES
    if role.startswith("consolidate_"):
        assert used == {"retrieved_memory"}
    else:
        assert {"env_description", "task_description", "result", "steps", "max_steps",
                "reward", "trajectory"} <= used
        assert ("retrieved_memory" in used) == (role in SKIPPABLE)
    text = template.substitute(sample_values())
    assert "$" not in text  # no leftover placeholder
    for key in KEYS:
        assert key in text
    assert ('{"skip": true}' in text) == (role in SKIPPABLE)
    if role in FAILURE_ROLES:
        assert "[FAILED]" in text and "[UNEXPLORED]" in text
    assert text.rstrip().endswith("}")  # ends with the JSON shape to produce
    assert "ONLY" in text
    assert len(template.template) < 2000  # compact: small local models have 4k context


def test_textworld_uses_generic_templates_and_unknown_domain_fails() -> None:
    assert template_domain("textworld") == "generic"
    assert template_domain("alfworld") == "alfworld"
    with pytest.raises(ConfigError, match="unknown domain"):
        template_domain("minecraft")
    with pytest.raises(ConfigError, match="unknown extraction role"):
        load_template("alfworld", "task_root")


def test_custom_prompt_dir_is_checked(tmp_path: Path) -> None:
    (tmp_path / "generic").mkdir()
    (tmp_path / "generic" / "env_root.txt").write_text("facts about $world please")
    with pytest.raises(ConfigError, match="unknown variables"):
        load_template("generic", "env_root", tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_template("generic", "env_residual", tmp_path)
    (tmp_path / "generic" / "task_root_failure.txt").write_text("costs $ 5")
    with pytest.raises(ConfigError, match="malformed"):
        load_template("generic", "task_root_failure", tmp_path)
    (tmp_path / "generic" / "task_root_success.txt").write_text("goal=$task_description $$")
    llm = ScriptedLLM([GOOD])
    extractor = LLMExtractor(llm, prompt_dir=tmp_path)
    assert extractor.extract("task_root_success", make_episode(), [], "generic") is not None
    assert llm.calls[0][1][-1]["content"] == "goal=put a hot mug in the cabinet $"


# -- schema and parse_output ------------------------------------------------------------------


@pytest.mark.parametrize("role", ALL_ROLES)
def test_schemas_are_valid_and_bounded(role: str) -> None:
    schema = schema_for(role, "alfworld")
    jsonschema.Draft202012Validator.check_schema(schema)
    branches = schema["oneOf"] if role in SKIPPABLE else [schema]
    payload = branches[0]
    assert payload["additionalProperties"] is False
    props = payload["properties"]
    assert props["activation_condition"]["maxLength"] == ACTIVATION_MAX
    assert props["execution_procedure"]["maxLength"] == PROCEDURE_MAX
    expected_term = 0 if role in FAILURE_ROLES else TERMINATION_MAX
    assert props["termination_condition"]["maxLength"] == expected_term


def test_webshop_exemplar_gets_a_longer_procedure() -> None:
    long_proc = "Observation: a\nThought: b\nAction: click[x]\n" * 65  # 2795 chars
    assert PROCEDURE_MAX < len(long_proc) <= EXEMPLAR_PROCEDURE_MAX
    out = json.dumps({**GOOD, "execution_procedure": long_proc})
    assert parse_output("task_root_success", out, domain="webshop") is not None
    assert parse_output("consolidate_skill", out, domain="webshop") is not None
    with pytest.raises(ExtractionError, match="the limit is 2000"):
        parse_output("task_root_success", out, domain="alfworld")
    with pytest.raises(ExtractionError, match="the limit is 2000"):
        parse_output("env_root", out, domain="webshop")


def test_parse_valid_output_strips_fields() -> None:
    out = json.dumps({**GOOD, "activation_condition": "  heat tasks \n"})
    payload = parse_output("task_root_success", out)
    assert payload == Payload("heat tasks", GOOD["execution_procedure"],
                              GOOD["termination_condition"])


@pytest.mark.parametrize("wrapper", [
    "{}", "  \n{}\n\n", "```json\n{}\n```", "```\n{}\n```", "\n```json\n{}\n```  \n",
])
def test_parse_tolerates_whitespace_and_one_fence(wrapper: str) -> None:
    text = wrapper.replace("{}", json.dumps(GOOD, indent=1))
    assert parse_output("task_root_success", text) == Payload.from_dict(GOOD)


@pytest.mark.parametrize("wrapper, reason", [
    ("Here you go: {}", "invalid JSON"),
    ("{} Thanks!", "invalid JSON"),
    ("{}{}", "invalid JSON"),
    ("```python\n{}\n```", "invalid JSON"),
    ("```json {} ```", "invalid JSON"),
    ("[{}]", "expected a JSON object"),
    ("", "empty output"),
])
def test_parse_rejects_anything_more_lenient(wrapper: str, reason: str) -> None:
    text = wrapper.replace("{}", json.dumps(GOOD))
    with pytest.raises(ExtractionError, match=reason) as info:
        parse_output("task_root_success", text)
    assert info.value.role == "task_root_success"
    assert info.value.raw == text


@pytest.mark.parametrize("obj, reason", [
    ({**GOOD, "activation_condition": "a\u0001b"}, "control character U\\+0001"),
    ({**GOOD, "execution_procedure": "line\r\nline"}, "control character U\\+000D"),
    ({**GOOD, "termination_condition": "x\u0085"}, "control character U\\+0085"),
    ({**GOOD, "activation_condition": "   \n\t"}, "activation_condition is empty"),
    ({**GOOD, "execution_procedure": ""}, "execution_procedure must not be empty"),
    ({**GOOD, "activation_condition": "a" * 401}, "401 characters, the limit is 400"),
    ({**GOOD, "termination_condition": "t" * 301}, "the limit is 300"),
    ({k: v for k, v in GOOD.items() if k != "termination_condition"},
     "'termination_condition' is a required property"),
    ({**GOOD, "notes": "x"}, "Additional properties"),
    ({**GOOD, "execution_procedure": ["step"]}, "is not of type 'string'"),
    ({"skip": True}, '"skip" is not allowed for role task_root_success'),
    ({**GOOD, "skip": True}, '"skip" is not allowed'),
])
def test_parse_rejects_with_a_precise_reason(obj: dict, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason):
        parse_output("task_root_success", json.dumps(obj))


def test_parse_rejects_non_standard_json() -> None:
    dup = '{"activation_condition": "a", "activation_condition": "b", ' \
          '"execution_procedure": "p", "termination_condition": ""}'
    with pytest.raises(ExtractionError, match="duplicate key 'activation_condition'"):
        parse_output("task_root_success", dup)
    nan = json.dumps(GOOD)[:-1] + ', "x": NaN}'
    with pytest.raises(ExtractionError, match="NaN"):
        parse_output("task_root_success", nan)
    with pytest.raises(ExtractionError, match="lone surrogate"):
        parse_output("task_root_success", json.dumps(GOOD)[:-1].replace(
            '"The heated', '"\\ud800 The heated') + "}")
    with pytest.raises(ExtractionError, match="invalid JSON"):
        parse_output("task_root_success", "[" * 100_000)


def test_skip_rules() -> None:
    for role in SKIPPABLE:
        assert parse_output(role, '{"skip": true}') is None
        assert parse_output(role, '```json\n{"skip": true}\n```') is None
        with pytest.raises(ExtractionError, match="skip"):
            parse_output(role, '{"skip": false}')
        with pytest.raises(ExtractionError, match="Additional properties"):
            parse_output(role, '{"skip": true, "why": "covered"}')
    for role in (*ROOT_ROLES, "consolidate_skill", "consolidate_knowledge"):
        with pytest.raises(ExtractionError, match="not allowed"):
            parse_output(role, '{"skip": true}')


def test_failure_records_need_failed_section_and_empty_termination() -> None:
    for role in FAILURE_ROLES:
        assert parse_output(role, json.dumps(GOOD_FAILURE)) is not None
        with pytest.raises(ExtractionError, match=r"needs a \[FAILED\] section"):
            parse_output(role, json.dumps({**GOOD_FAILURE, "execution_procedure": "it broke"}))
        with pytest.raises(ExtractionError, match="termination_condition is 4 characters"):
            parse_output(role, json.dumps({**GOOD_FAILURE, "termination_condition": "done"}))


def test_unknown_role_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        parse_output("task_root", json.dumps(GOOD))
    with pytest.raises(ConfigError):
        schema_for("nope")


# -- the extractor ----------------------------------------------------------------------------


def test_is_an_extractor_and_validates_config() -> None:
    assert isinstance(LLMExtractor(ScriptedLLM()), Extractor)
    assert LLMExtractor(ScriptedLLM()).name == "llm"
    with pytest.raises(ConfigError, match="max_trajectory_chars"):
        LLMExtractor(ScriptedLLM(), max_trajectory_chars=50)
    with pytest.raises(ConfigError, match="max_tokens"):
        LLMExtractor(ScriptedLLM(), max_tokens=0)


@pytest.mark.parametrize("role", EXTRACTION_ROLES)
def test_valid_output_gives_payload_in_one_call(role: str) -> None:
    llm = SchemaRecordingLLM([good_for(role)])
    payload = LLMExtractor(llm).extract(role, make_episode(), make_chain(), "alfworld")
    if role == "task_residual_success":  # the stored delta composes to the model's steps
        assert payload is not None
        chain = [*make_chain(), ChainEntry("RESIDUAL", "SUCCESS", payload)]
        assert chain_steps(chain) == procedure_steps(good_for(role)["execution_procedure"])
    else:
        assert payload == Payload.from_dict(good_for(role))
    assert len(llm.calls) == 1
    purpose, messages, _ = llm.calls[0]
    assert purpose == "extract"
    assert [m["role"] for m in messages] == ["system", "user"]
    assert llm.schemas == [schema_for(role, "alfworld")]
    assert llm.usage.by_purpose["extract"].calls == 1


@pytest.mark.parametrize("role", sorted(SKIPPABLE))
def test_skip_returns_none_for_residual_roles(role: str) -> None:
    llm = ScriptedLLM([{"skip": True}])
    assert LLMExtractor(llm).extract(role, make_episode(), make_chain(), "webshop") is None
    assert len(llm.calls) == 1


@pytest.mark.parametrize("role", ROOT_ROLES)
def test_skip_is_rejected_for_root_roles(role: str) -> None:
    rejections: list[Rejection] = []
    llm = ScriptedLLM([{"skip": True}, {"skip": True}])
    extractor = LLMExtractor(llm, on_reject=rejections.append)
    with pytest.raises(ExtractionError, match="not allowed"):
        extractor.extract(role, make_episode(), [], "scienceworld")
    assert len(llm.calls) == 2
    assert [r.role for r in rejections] == [role]


def test_invalid_then_valid_is_repaired() -> None:
    llm = ScriptedLLM(["Sure! Here is the skill.", GOOD])
    payload = LLMExtractor(llm).extract("task_root_success", make_episode(), [], "alfworld")
    assert payload == Payload.from_dict(GOOD)
    assert [c[0] for c in llm.calls] == ["extract", "extract"]
    assert llm.usage.by_purpose["extract"].calls == 2
    repair = llm.calls[1][1]
    assert repair[:2] == llm.calls[0][1]  # same conversation, continued
    assert repair[2] == {"role": "assistant", "content": "Sure! Here is the skill."}
    assert repair[3]["role"] == "user"
    assert "invalid JSON" in repair[3]["content"]
    assert "skip" in repair[3]["content"] and "not allowed" in repair[3]["content"]


def test_invalid_twice_is_rejected_logged_and_raised(caplog: pytest.LogCaptureFixture) -> None:
    rejections: list[Rejection] = []
    bad_again = json.dumps({**GOOD, "activation_condition": ""})
    llm = ScriptedLLM(["not json", bad_again])
    extractor = LLMExtractor(llm, on_reject=rejections.append)
    with caplog.at_level(logging.WARNING, logger="deltamem.extract"), \
            pytest.raises(ExtractionError) as info:
        extractor.extract("env_residual", make_episode(), make_chain(), "generic")
    assert info.value.role == "env_residual"
    assert info.value.raw == bad_again
    assert len(rejections) == 1
    r = rejections[0]
    assert (r.role, r.domain, r.raw) == ("env_residual", "generic", bad_again)
    assert "activation_condition must not be empty" in r.reason
    records = [rec for rec in caplog.records if rec.name == "deltamem.extract"]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    assert "env_residual" in records[0].getMessage()
    assert "activation_condition must not be empty" in records[0].getMessage()
    assert len(llm.calls) == 2


def test_raw_output_in_log_is_truncated(caplog: pytest.LogCaptureFixture) -> None:
    huge = "z" * 50_000
    llm = ScriptedLLM([huge, huge])
    with caplog.at_level(logging.WARNING, logger="deltamem.extract"), \
            pytest.raises(ExtractionError):
        LLMExtractor(llm).extract("task_root_success", make_episode(), [], "alfworld")
    assert len(caplog.records[0].getMessage()) < 1000
    assert len(llm.calls[1][1][2]["content"]) <= 2000  # raw shown to the repair call is cut


def test_llm_errors_propagate_unchanged() -> None:
    with pytest.raises(LLMError):
        LLMExtractor(ScriptedLLM()).extract("env_root", make_episode(), [], "alfworld")


def test_bad_inputs_fail_before_any_call() -> None:
    llm = ScriptedLLM([GOOD])
    extractor = LLMExtractor(llm)
    with pytest.raises(ConfigError, match="unknown domain"):
        extractor.extract("env_root", make_episode(), [], "minecraft")
    with pytest.raises(ConfigError, match="unknown extraction role"):
        extractor.extract("consolidate_skill", make_episode(), [], "alfworld")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="needs the retrieved chain"):
        extractor.extract("task_residual_success", make_episode(), [], "alfworld")
    with pytest.raises(InvalidInputError):
        extractor.extract("env_root", make_episode(n_steps=0), [], "alfworld")
    with pytest.raises(ConfigError, match="unknown tree"):
        extractor.consolidate("graph", make_chain(), "alfworld")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="non-empty chain"):
        extractor.consolidate("task", [], "alfworld")
    assert llm.calls == []


@pytest.mark.parametrize("tree, role", [("task", "consolidate_skill"),
                                        ("env", "consolidate_knowledge")])
def test_consolidate_uses_its_own_purpose_and_the_chain(tree: str, role: str) -> None:
    llm = SchemaRecordingLLM([GOOD])
    payload = LLMExtractor(llm).consolidate(tree, make_chain(), "webshop")  # type: ignore[arg-type]
    assert payload == Payload.from_dict(GOOD)
    purpose, messages, _ = llm.calls[0]
    assert purpose == "consolidate"
    assert render_chain(tree, make_chain()) in messages[-1]["content"]  # type: ignore[arg-type]
    assert llm.schemas == [schema_for(role, "webshop")]
    assert "extract" not in llm.usage.by_purpose


def test_consolidate_repairs_and_rejects_under_consolidate_purpose() -> None:
    llm = ScriptedLLM(['{"skip": true}', "{"])
    with pytest.raises(ExtractionError):
        LLMExtractor(llm).consolidate("env", make_chain(), "alfworld")
    assert llm.usage.by_purpose["consolidate"].calls == 2


@pytest.mark.parametrize("domain", ["alfworld", "scienceworld", "webshop", "textworld"])
def test_chain_appears_in_residual_prompts_only(domain: str) -> None:
    extractor = LLMExtractor(ScriptedLLM())
    chain = make_chain()
    for role in EXTRACTION_ROLES:
        prompt = extractor.render_prompt(role, make_episode(), chain, domain)
        tree = "env" if role.startswith("env_") else "task"
        assert (CHAIN_MARK in prompt) == (role in SKIPPABLE)
        if role in SKIPPABLE:
            assert render_chain(tree, chain) in prompt
        assert "put a hot mug in the cabinet" in prompt
        assert "> action-2\nobs-2" in prompt


def test_textworld_prompt_equals_generic_prompt() -> None:
    extractor = LLMExtractor(ScriptedLLM())
    for role in EXTRACTION_ROLES:
        ep, chain = make_episode(), make_chain()
        assert extractor.render_prompt(role, ep, chain, "textworld") == \
            extractor.render_prompt(role, ep, chain, "generic")


def test_prompt_fields() -> None:
    ep = Episode(task=Task(id="t", goal="find the key", scene="", observation="You are in a hall.",
                           max_steps=40),
                 steps=(Step("open door", "The door opens."),), success=False, reward=0.25,
                 max_steps=30)
    prompt = LLMExtractor(ScriptedLLM()).render_prompt("task_root_failure", ep, [], "generic")
    assert "Environment: You are in a hall." in prompt
    assert "FAILURE after 1 steps (limit 30), reward 0.25" in prompt
    assert "> open door\nThe door opens." in prompt
    assert prompt.count("You are in a hall.") == 1  # first observation not repeated
    ep2 = Episode(task=Task(id="t", goal="g", scene="A hall.", observation="Welcome!"),
                  steps=(Step("look", "dark"),), success=True, reward=1.0)
    prompt2 = LLMExtractor(ScriptedLLM()).render_prompt("env_root", ep2, [], "generic")
    assert "Welcome!\n> look\ndark" in prompt2
    assert "limit unknown" in prompt2


def test_long_trajectory_keeps_head_and_tail_within_budget() -> None:
    budget = 1000
    ep = make_episode(n_steps=400, obs_len=30)
    full = render_trajectory(ep.steps)
    assert len(full) > 10 * budget
    prompt = LLMExtractor(ScriptedLLM(), max_trajectory_chars=budget).render_prompt(
        "task_root_success", ep, [], "alfworld")
    start = prompt.index("> action-0")
    end = prompt.index("obs-399 ") + len("obs-399 ") + 30
    shown = prompt[start:end]
    assert len(shown) <= budget
    assert "characters omitted" in shown
    assert "> action-1\n" in shown and "> action-399\n" in shown
    assert "action-200" not in shown
    short = make_episode(n_steps=3)
    prompt = LLMExtractor(ScriptedLLM(), max_trajectory_chars=budget).render_prompt(
        "task_root_success", short, [], "alfworld")
    assert render_trajectory(short.steps) in prompt and "omitted" not in prompt


@settings(derandomize=True)
@given(text=st.text(max_size=3000), budget=st.integers(200, 2000))
def test_truncate_middle_property(text: str, budget: int) -> None:
    out = truncate_middle(text, budget)
    assert len(out) <= budget
    if len(text) <= budget:
        assert out == text
        return
    head, _, tail = out.partition("\n[... ")
    tail = tail.split(" characters omitted ...]\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail)
    room = budget - 40
    assert len(head) >= room // 4 and len(tail) >= room // 4


# -- fuzzing: nothing invalid ever becomes a Payload -------------------------------------------

_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                          st.text(max_size=50))
_json_values = st.recursive(_json_scalars, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=10), c, max_size=3)), max_leaves=8)
_field = st.one_of(
    st.text(max_size=60),
    st.builds(lambda ch, n: ch * n, st.characters(), st.integers(0, 3500)),
    st.sampled_from(["", " ", "\n\t", "[FAILED]: x", "ok\u0000", "a\x7f", "\u2028x"]),
    _json_values,
)
_objects = st.fixed_dictionaries(
    {}, optional={k: _field for k in (*KEYS, "skip", "extra")}
)
_text_field = st.one_of(
    st.text(max_size=80),
    st.builds(lambda t: "[FAILED]: " + t, st.text(max_size=80)),
    st.builds(lambda ch, n: ch * n, st.characters(), st.integers(250, 3200)),
    st.sampled_from(["", "  ", "ok\u0000", "x\r\ny", "a\tb\nc"]),
)
_clean = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=80)
_mostly_clean = st.one_of(_clean, st.builds(lambda t: "[FAILED]: " + t, _clean),
                          st.sampled_from(["", " ", "\n\t ", "[FAILED]:\u0003"]), _text_field)
_near_valid = st.one_of(
    st.fixed_dictionaries({k: _mostly_clean for k in KEYS}),
    st.fixed_dictionaries(
        {k: _text_field for k in KEYS},
        optional={"skip": st.sampled_from([True, False, 1]), "extra": _json_values},
    ),
)


def _render(obj: object, how: int) -> str:
    text = json.dumps(obj, ensure_ascii=bool(how % 2))
    return [text, f"```json\n{text}\n```", text[:-1], f"x{text}", f"  {text}\n"][how % 5]


_outputs = st.one_of(
    st.builds(_render, _near_valid, st.integers(0, 9)),
    st.builds(_render, _near_valid, st.sampled_from([0, 1, 4])),
    st.text(max_size=200),
    st.builds(_render, _objects, st.integers(0, 9)),
    st.builds(_render, _json_values, st.integers(0, 9)),
    st.sampled_from(['{"skip": true}', '{"skip": 1}', "{", "```json\n{}\n```"]),
)


def _assert_schema_conform(role: str, domain: str, payload: Payload) -> None:
    obj = payload.to_dict()
    jsonschema.validate(obj, schema_for(role, domain))
    exemplar = domain == "webshop" and role in ("task_root_success", "consolidate_skill")
    assert len(payload.activation) <= 400
    assert len(payload.procedure) <= (3000 if exemplar else 2000)
    assert len(payload.termination) <= 300
    assert payload.activation.strip() and payload.procedure.strip()
    for value in obj.values():
        assert all(c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cs") for c in value)
    if role in FAILURE_ROLES:
        assert "[FAILED]" in payload.procedure and payload.termination == ""


def _check_extractor(role: str, domain: str, first: str, second: str) -> None:
    llm = ScriptedLLM([first, second])
    extractor = LLMExtractor(llm)
    try:
        if role.startswith("consolidate_"):
            tree = "task" if role == "consolidate_skill" else "env"
            result = extractor.consolidate(tree, make_chain(), domain)  # type: ignore[arg-type]
        else:
            result = extractor.extract(role, make_episode(), make_chain(), domain)  # type: ignore[arg-type]
    except ExtractionError as exc:
        assert exc.raw == second and exc.role == role
        return
    if result is None:
        assert role in SKIPPABLE
    else:
        assert isinstance(result, Payload)
        _assert_schema_conform(role, domain, result)


def _check_parse(role: str, domain: str, text: str) -> None:
    try:
        result = parse_output(role, text, domain=domain)
    except ExtractionError as exc:
        assert str(exc) and exc.raw == text
        return
    if result is None:
        assert role in SKIPPABLE
    else:
        _assert_schema_conform(role, domain, result)


_roles = st.sampled_from(ALL_ROLES)
_domains = st.sampled_from(TEMPLATE_DOMAINS)


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(role=_roles, domain=_domains, first=_outputs, second=_outputs)
def test_fuzzed_outputs_give_valid_payload_or_extraction_error(
    role: str, domain: str, first: str, second: str
) -> None:
    _check_extractor(role, domain, first, second)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(role=_roles, domain=_domains, text=_outputs)
def test_fuzzed_parse_output(role: str, domain: str, text: str) -> None:
    _check_parse(role, domain, text)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(role=_roles, domain=_domains, text=_outputs)
def test_fuzzed_parse_output_thorough(role: str, domain: str, text: str) -> None:
    _check_parse(role, domain, text)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(role=_roles, domain=_domains, first=_outputs, second=_outputs)
def test_fuzzed_outputs_thorough(role: str, domain: str, first: str, second: str) -> None:
    _check_extractor(role, domain, first, second)


def test_string_template_semantics_are_what_the_readme_says() -> None:
    # a literal dollar is written $$, values are not re-expanded
    assert string.Template("$$ $trajectory").substitute(trajectory="$x") == "$ $x"
