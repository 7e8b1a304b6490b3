"""Structured answers: one LLM call for a JSON object, validated, with one repair call.

Every caller that wants a JSON object from a model goes through
:func:`complete_with_repair`: the answer is parsed by the caller's ``parse``
(which raises :class:`~deltamem.errors.ExtractionError` saying what is wrong);
an invalid answer gets exactly one repair request carrying that reason; a second
invalid answer raises the second :class:`~deltamem.errors.ExtractionError`
(``raw`` = that answer). LLM backend errors propagate unchanged.

On top of it:

* :func:`decode_object`: the strict JSON decoding every validator shares: one
  object, optionally in one Markdown code fence; no duplicate keys, no
  ``NaN``/``Infinity``;
* :func:`parse_json`: :func:`decode_object` plus a JSON schema and the rules a
  schema cannot state portably (no control characters or lone surrogates, no
  whitespace-only strings);
* :func:`ask_json`: a prompt in, a validated object out (the memories' and the
  Ariadne agent's calls), rejected answers logged;
* :func:`truncate_middle`: cuts a long text (a trajectory, a rejected answer) to a
  character budget, keeping its head and tail.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import jsonschema

from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.base import LLMClient, Message

__all__ = [
    "MEMORY_SYSTEM",
    "ask_json",
    "bad_char",
    "complete_with_repair",
    "decode_object",
    "describe_schema_error",
    "parse_json",
    "truncate_middle",
]

T = TypeVar("T")

MEMORY_SYSTEM = (
    "You maintain the long-term memory of an agent that plays text-based tasks. "
    "Answer with one JSON object and nothing else."
)
"""The system message of :func:`ask_json` unless the caller gives its own."""

RAW_IN_REPAIR = 2000
"""Characters of a rejected answer shown back to the model in the repair request."""
RAW_IN_LOG = 300
"""Characters of a rejected answer written to the log."""

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n[ \t]*```\Z", re.DOTALL)


def truncate_middle(text: str, budget: int) -> str:
    """``text`` if it fits in ``budget`` characters, else its head and tail joined by a marker.

    The result is never longer than ``budget``; head and tail get half the room
    each and are cut at line boundaries when that keeps at least half of it.
    Raises :class:`ConfigError` when ``budget`` is too small for the marker.

    >>> truncate_middle("short", 80)
    'short'
    >>> cut = truncate_middle("a" * 100, 40)
    >>> len(cut) <= 40, cut.startswith("aaa"), "omitted" in cut
    (True, True, True)
    """
    if len(text) <= budget:
        return text
    marker = "\n[... {} characters omitted ...]\n"
    room = budget - len(marker.format(len(text)))
    if room < 2:
        raise ConfigError(f"truncation budget {budget} is too small")
    head_len = room // 2
    tail_len = room - head_len
    head, tail = text[:head_len], text[len(text) - tail_len:]
    cut = head.rfind("\n")
    if cut >= head_len // 2:
        head = head[:cut]
    cut = tail.find("\n")
    if 0 <= cut < tail_len // 2:
        tail = tail[cut + 1:]
    return head + marker.format(len(text) - len(head) - len(tail)) + tail


# -- strict decoding --------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def bad_char(value: str) -> str | None:
    """A description of the first forbidden character in ``value``, or None.

    ``\\n`` and ``\\t`` are allowed; other control characters and lone surrogates are not.

    >>> bad_char("two\\nlines") is None
    True
    >>> bad_char("bell\\x07")
    'control character U+0007 at position 4'
    """
    for i, ch in enumerate(value):
        if ch in "\n\t":
            continue
        category = unicodedata.category(ch)
        if category == "Cc":
            return f"control character U+{ord(ch):04X} at position {i}"
        if category == "Cs":
            return f"lone surrogate U+{ord(ch):04X} at position {i}"
    return None


def decode_object(role: str, text: str) -> dict[str, Any]:
    """The one JSON object in ``text``: surrounding whitespace and one Markdown code fence
    (```` ```json ... ``` ````) are allowed, nothing else (prose, several objects, trailing
    commas, duplicate keys, ``NaN``).

    Raises :class:`ExtractionError` (``role`` set, ``raw`` = ``text``) whose message,
    prefixed with ``role``, says what is wrong.

    >>> decode_object("demo", '```json\\n{"a": 1}\\n```')
    {'a': 1}
    >>> decode_object("demo", '{"a": 1, "a": 2}')
    Traceback (most recent call last):
    ...
    deltamem.errors.ExtractionError: demo: invalid JSON: duplicate key 'a'
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    body = fenced.group("body").strip() if fenced else body
    if not body:
        raise ExtractionError(f"{role}: empty output", role=role, raw=text)
    try:
        obj = json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise ExtractionError(f"{role}: invalid JSON: {e.msg} at line {e.lineno} column "
                              f"{e.colno}", role=role, raw=text) from None
    except (ValueError, RecursionError) as e:
        raise ExtractionError(f"{role}: invalid JSON: {e}", role=role, raw=text) from None
    if not isinstance(obj, dict):
        raise ExtractionError(f"{role}: expected a JSON object, got {type(obj).__name__}",
                              role=role, raw=text)
    return obj


def describe_schema_error(error: jsonschema.ValidationError, obj: Mapping[str, Any]) -> str:
    """A short, precise reason for one schema error: the path and what is wrong (a length
    in characters, an array size), ``oneOf`` errors resolved to the likely branch (the
    ``{"skip": true}`` branch when the answer has ``skip``)."""
    if error.validator in ("maxItems", "minItems") and isinstance(error.instance, list):
        where = ".".join(str(p) for p in error.path) or "the answer"
        bound = "at most" if error.validator == "maxItems" else "at least"
        return f"{where} has {len(error.instance)} items; {bound} {error.validator_value} allowed"
    if error.validator == "oneOf" and error.context:
        branch = 1 if "skip" in obj else 0
        sub = [e for e in error.context if e.relative_schema_path and
               e.relative_schema_path[0] == branch]
        if sub:
            error = sorted(sub, key=lambda e: list(e.path))[0]
    where = ".".join(str(p) for p in error.path)
    if error.validator == "maxLength":
        length = len(error.instance) if isinstance(error.instance, str) else "?"
        what = f"is {length} characters, the limit is {error.validator_value}"
    elif error.validator == "minLength":
        what = "must not be empty"
    else:
        what = error.message
        if len(what) > 200:
            what = what[:200] + "..."
    return f"{where} {what}" if where else what


def _check_strings(obj: Any, where: str, role: str, raw: str) -> None:
    """Every string in ``obj``: no control characters, not only whitespace."""
    if isinstance(obj, str):
        bad = bad_char(obj)
        if bad:
            raise ExtractionError(f"{role}: {where} contains a {bad}", role=role, raw=raw)
        if not obj.strip():
            raise ExtractionError(f"{role}: {where} is empty or only whitespace",
                                  role=role, raw=raw)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            _check_strings(v, f"{where}.{k}" if where else str(k), role, raw)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _check_strings(v, f"{where}.{i}", role, raw)


def parse_json(role: str, text: str, schema: Mapping[str, Any]) -> Any:
    """Decode (:func:`decode_object`) and validate one JSON object answer against ``schema``;
    every string must hold more than whitespace and no forbidden character (:func:`bad_char`).
    Raises :class:`ExtractionError` (``role``, ``raw`` set) saying what is wrong.

    >>> schema = {"type": "object", "properties": {"title": {"type": "string",
    ...           "maxLength": 5}}, "required": ["title"]}
    >>> parse_json("demo", '{"title": "soap"}', schema)
    {'title': 'soap'}
    >>> parse_json("demo", '{"title": "washing"}', schema)
    Traceback (most recent call last):
    ...
    deltamem.errors.ExtractionError: demo: title is 7 characters, the limit is 5
    """
    obj = decode_object(role, text)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(obj),
                    key=lambda e: list(e.path))
    if errors:
        raise ExtractionError(f"{role}: {describe_schema_error(errors[0], obj)}",
                              role=role, raw=text)
    _check_strings(obj, "", role, text)
    return obj


# -- the call and its repair ------------------------------------------------------------------


def complete_with_repair(
    llm: LLMClient,
    messages: Sequence[Message],
    *,
    parse: Callable[[str], T],
    repair_request: Callable[[str], str],
    purpose: str,
    schema: Mapping[str, Any] | None,
    max_tokens: int,
    temperature: float = 0.0,
) -> T:
    """Ask ``llm`` and return ``parse(answer)``; an answer ``parse`` rejects gets one repair.

    ``parse`` raises :class:`ExtractionError` for an invalid answer; the repair call
    repeats ``messages``, adds the rejected answer (:data:`RAW_IN_REPAIR` characters at
    most) and ``repair_request(reason)`` as the next user message. When the repaired
    answer is rejected too, its :class:`ExtractionError` propagates (``raw`` = that answer);
    the caller logs it and decides what a rejection means.
    """
    raw = llm.complete(messages, purpose=purpose, schema=schema, max_tokens=max_tokens,
                       temperature=temperature).text
    try:
        return parse(raw)
    except ExtractionError as first:
        reason = str(first)
    repair: list[Message] = [
        *messages,
        {"role": "assistant", "content": truncate_middle(raw, RAW_IN_REPAIR)},
        {"role": "user", "content": repair_request(reason)},
    ]
    raw = llm.complete(repair, purpose=purpose, schema=schema, max_tokens=max_tokens,
                       temperature=temperature).text
    return parse(raw)


def ask_json(
    llm: LLMClient,
    *,
    role: str,
    purpose: str,
    prompt: str,
    schema: Mapping[str, Any],
    shape: str,
    max_tokens: int = 600,
    system: str = MEMORY_SYSTEM,
    check: Callable[[Any], str | None] | None = None,
    limits_hint: bool = True,
    logger: logging.Logger | None = None,
    temperature: float = 0.0,
) -> Any:
    """One LLM call for a JSON object following ``schema``, with one repair call.

    Args:
        role: names the prompt in messages and logs.
        purpose: the usage bucket (``extract``, ``merge``, ``plan``, ...).
        prompt: the user message (after the ``system`` message).
        shape: the expected object, described in the repair request.
        check: a rule the schema cannot state (e.g. "the subtasks cover the actions in
            order"): ``None`` when the object is fine, else the reason it is not.
        limits_hint: the repair request also asks to stay within the length limits.
        temperature: sampling temperature of the call and of its repair (0: greedy).
        logger: where a rejection is logged (default ``deltamem.memory``, the memories'
            logger).

    Returns the decoded object. When the repaired answer is still invalid, logs a warning
    and raises :class:`ExtractionError` with the last answer in ``raw``.
    """

    def parse(raw: str) -> Any:
        obj = parse_json(role, raw, schema)
        problem = check(obj) if check is not None else None
        if problem is not None:
            raise ExtractionError(f"{role}: {problem}", role=role, raw=raw)
        return obj

    limits = ", within the length limits" if limits_hint else ""
    messages: list[Message] = [{"role": "system", "content": system},
                               {"role": "user", "content": prompt}]
    try:
        return complete_with_repair(
            llm, messages, parse=parse, purpose=purpose, schema=schema, max_tokens=max_tokens,
            temperature=temperature, repair_request=lambda reason: (
                f"Your answer was rejected: {reason}\nReply again with ONLY the corrected JSON "
                f"object ({shape}){limits}. No text before or after it."))
    except ExtractionError as e:
        (logger or logging.getLogger("deltamem.memory")).warning(
            "rejected %s output after one repair: %s; raw output: %r", role, e, e.raw[:RAW_IN_LOG])
        raise ExtractionError(f"output rejected after one repair: {e}", role=role,
                              raw=e.raw) from None
