"""Output schemas of the extraction prompts and the validator that enforces them.

Every extraction or consolidation call must answer with one JSON object::

    {"activation_condition": "...", "execution_procedure": "...", "termination_condition": "..."}

or, for the roles in :data:`~deltamem.extract.base.SKIPPABLE` only, ``{"skip": true}``.

:func:`schema_for` gives the JSON schema (passed to the LLM so constrained
backends can enforce it); :func:`parse_output` checks a raw answer against it
and against the rules a JSON schema cannot state portably:

* no control characters other than ``\\n`` and ``\\t`` and no lone surrogates;
* ``activation_condition`` and ``execution_procedure`` are not blank;
* failure records (``task_root_failure``, ``task_residual_failure``) contain a
  ``[FAILED]`` section and an empty ``termination_condition``;
* ``{"skip": true}`` only for skippable roles;
* no duplicate keys, no ``NaN``/``Infinity``.

The only leniency is surrounding whitespace and one Markdown code fence
(```` ```json ... ``` ```` or ```` ``` ... ``` ````) around the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from deltamem.core.payload import Payload
from deltamem.errors import ConfigError, ExtractionError
from deltamem.extract.base import CONSOLIDATION_ROLES, EXTRACTION_ROLES, SKIPPABLE
from deltamem.llm.structured import bad_char, decode_object, describe_schema_error

__all__ = [
    "ACTIVATION_MAX",
    "ALL_ROLES",
    "EXEMPLAR_PROCEDURE_MAX",
    "FAILURE_ROLES",
    "PROCEDURE_MAX",
    "TERMINATION_MAX",
    "parse_output",
    "schema_for",
    "validate_object",
]

ACTIVATION_MAX = 400
"""Longest accepted ``activation_condition`` (characters)."""
PROCEDURE_MAX = 2000
"""Longest accepted ``execution_procedure`` (characters)."""
EXEMPLAR_PROCEDURE_MAX = 3000
"""Longest accepted procedure of a WebShop exemplar (root success and skill consolidation)."""
TERMINATION_MAX = 300
"""Longest accepted ``termination_condition`` (characters)."""

ALL_ROLES: tuple[str, ...] = (*EXTRACTION_ROLES, *CONSOLIDATION_ROLES)
"""Every role an extraction template and a schema exist for."""
FAILURE_ROLES: frozenset[str] = frozenset({"task_root_failure", "task_residual_failure"})
"""Roles whose output is a failure record: ``[FAILED]`` section, empty termination."""
_EXEMPLAR_ROLES: frozenset[str] = frozenset({"task_root_success", "consolidate_skill"})

_KEYS = ("activation_condition", "execution_procedure", "termination_condition")


def _check_role(role: str) -> None:
    if role not in ALL_ROLES:
        raise ConfigError(f"unknown extraction role {role!r}; known roles: {', '.join(ALL_ROLES)}")


def _procedure_max(role: str, domain: str) -> int:
    if domain == "webshop" and role in _EXEMPLAR_ROLES:
        return EXEMPLAR_PROCEDURE_MAX
    return PROCEDURE_MAX


def _payload_schema(role: str, domain: str) -> dict[str, Any]:
    termination_max = 0 if role in FAILURE_ROLES else TERMINATION_MAX
    return {
        "type": "object",
        "properties": {
            "activation_condition": {"type": "string", "minLength": 1,
                                     "maxLength": ACTIVATION_MAX},
            "execution_procedure": {"type": "string", "minLength": 1,
                                    "maxLength": _procedure_max(role, domain)},
            "termination_condition": {"type": "string", "maxLength": termination_max},
        },
        "required": list(_KEYS),
        "additionalProperties": False,
    }


_SKIP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"skip": {"const": True}},
    "required": ["skip"],
    "additionalProperties": False,
}


def schema_for(role: str, domain: str = "generic") -> dict[str, Any]:
    """The JSON schema an answer for ``role`` in ``domain`` must follow.

    Skippable roles get ``oneOf`` the payload object and ``{"skip": true}``.
    A fresh dict is returned each time (callers may mutate it).
    Raises :class:`ConfigError` for an unknown role.
    """
    _check_role(role)
    payload = _payload_schema(role, domain)
    if role in SKIPPABLE:
        return {"oneOf": [payload, dict(_SKIP_SCHEMA)]}
    return payload


def _reject(role: str, raw: str, reason: str) -> ExtractionError:
    return ExtractionError(f"{role}: {reason}", role=role, raw=raw)


def validate_object(role: str, obj: Any, domain: str = "generic", raw: str = "") -> Payload | None:
    """Check a decoded answer; return its :class:`Payload`, or ``None`` for a valid skip.

    Raises :class:`ExtractionError` (``role`` and ``raw`` set, message = reason)
    when ``obj`` breaks the schema or the extra rules in the module docstring,
    :class:`ConfigError` for an unknown role. Payload fields are stripped of
    surrounding whitespace.
    """
    _check_role(role)
    if not isinstance(obj, Mapping):
        raise _reject(role, raw, f"expected a JSON object, got {type(obj).__name__}")
    if "skip" in obj and role not in SKIPPABLE:
        raise _reject(role, raw, f'"skip" is not allowed for role {role}; write the entry')
    errors = sorted(
        jsonschema.Draft202012Validator(schema_for(role, domain)).iter_errors(obj),
        key=lambda e: list(e.path),
    )
    if errors:
        raise _reject(role, raw, describe_schema_error(errors[0], obj))
    if "skip" in obj:
        return None
    for key in _KEYS:
        bad = bad_char(obj[key])
        if bad:
            raise _reject(role, raw, f"{key} contains a {bad}")
    for key in _KEYS[:2]:
        if not obj[key].strip():
            raise _reject(role, raw, f"{key} is empty or only whitespace")
    if role in FAILURE_ROLES and "[FAILED]" not in obj["execution_procedure"]:
        raise _reject(role, raw, "execution_procedure of a failure record needs a [FAILED] section")
    return Payload(
        activation=obj["activation_condition"].strip(),
        procedure=obj["execution_procedure"].strip(),
        termination=obj["termination_condition"].strip(),
    )


def parse_output(role: str, text: str, *, domain: str = "generic") -> Payload | None:
    """Parse a raw LLM answer for ``role``; :class:`Payload`, or ``None`` for a valid skip.

    Accepts exactly one JSON object, optionally surrounded by whitespace and one
    Markdown code fence. Anything else (prose around it, several objects,
    trailing commas, ...) raises :class:`ExtractionError` whose message says
    precisely what is wrong; ``error.raw`` holds ``text``.
    """
    _check_role(role)
    return validate_object(role, decode_object(role, text), domain, raw=text)
