"""MCMA's prompt templates (``deltamem/prompts/mcma/*.txt``) and its validated JSON calls.

:func:`ask_validated` is :func:`deltamem.memories.baseline.ask_json` plus a semantic
check the JSON schema cannot state (e.g. "the subtasks cover the actions in order"):
one call, one repair request carrying the reason, then the answer is rejected, logged
on ``deltamem.memory`` and :class:`~deltamem.errors.ExtractionError` is raised. Nothing
invalid reaches a bank.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from deltamem.errors import ExtractionError
from deltamem.extract.llm import truncate_middle
from deltamem.llm.base import LLMClient, Message
from deltamem.memories.baseline import parse_json
from deltamem.templates import read_template

__all__ = ["VARIABLES", "ask_validated", "load"]

log = logging.getLogger("deltamem.memory")

#: the placeholders each template may use
VARIABLES: dict[str, frozenset[str]] = {
    "segment": frozenset({"goal", "actions", "n_actions"}),
    "knowledge_success": frozenset({"alpha", "alpha_guide", "input_data", "max_items"}),
    "knowledge_failure": frozenset({"alpha", "alpha_guide", "input_data", "max_items"}),
    "knowledge_compact": frozenset({"role", "alpha", "input_data"}),
    "fuse": frozenset({"entries", "level"}),
    "expel_insights": frozenset({"insights", "task", "result", "trajectory"}),
}

_SYSTEM = ("You are the memory copilot of an agent that plays text-based tasks. "
           "Answer with one JSON object and nothing else.")


def load(name: str) -> string.Template:
    """The template ``prompts/mcma/<name>.txt`` with its placeholders checked."""
    path = resources.files("deltamem").joinpath("prompts", "mcma", f"{name}.txt")
    return read_template(path, VARIABLES[name], "MCMA prompt")


def ask_validated(
    llm: LLMClient,
    *,
    role: str,
    purpose: str,
    prompt: str,
    schema: Mapping[str, Any],
    shape: str,
    extra_check: Callable[[Any], str | None] | None = None,
    max_tokens: int = 600,
    system: str = _SYSTEM,
) -> Any:
    """One schema-constrained call + one repair; the decoded object or ExtractionError."""
    messages: list[Message] = [{"role": "system", "content": system},
                               {"role": "user", "content": prompt}]
    raw = ""
    for attempt in range(2):
        raw = llm.complete(messages, purpose=purpose, schema=schema, max_tokens=max_tokens).text
        try:
            obj = parse_json(role, raw, schema)
            problem = extra_check(obj) if extra_check else None
            if problem is None:
                return obj
            reason = f"{role}: {problem}"
        except ExtractionError as e:
            reason = str(e)
        if attempt == 0:
            messages = [*messages,
                        {"role": "assistant", "content": truncate_middle(raw, 2000)},
                        {"role": "user", "content": (
                            f"Your answer was rejected: {reason}\nReply again with ONLY the "
                            f"corrected JSON object ({shape}). No text before or after it.")}]
    log.warning("rejected %s output after one repair: %s; raw output: %r", role, reason,
                raw[:300])
    raise ExtractionError(f"output rejected after one repair: {reason}", role=role, raw=raw)
