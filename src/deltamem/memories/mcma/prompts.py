"""MCMA's prompt templates (``deltamem/prompts/mcma/*.txt``) and its validated JSON calls.

:func:`ask_validated` is :func:`deltamem.llm.structured.ask_json` with the copilot's system
message, plus a semantic check the JSON schema cannot state (e.g. "the subtasks cover the
actions in order"): one call, one repair request carrying the reason, then the answer is
rejected, logged on ``deltamem.memory`` and :class:`~deltamem.errors.ExtractionError` is
raised. Nothing invalid reaches a bank.
"""

from __future__ import annotations

import string
from functools import partial
from importlib import resources

from deltamem.llm.structured import ask_json
from deltamem.templates import read_template

__all__ = ["SYSTEM", "VARIABLES", "ask_validated", "load"]

#: the placeholders each template may use
VARIABLES: dict[str, frozenset[str]] = {
    "segment": frozenset({"goal", "actions", "n_actions"}),
    "knowledge_success": frozenset({"alpha", "alpha_guide", "input_data", "max_items"}),
    "knowledge_failure": frozenset({"alpha", "alpha_guide", "input_data", "max_items"}),
    "knowledge_compact": frozenset({"role", "alpha", "input_data"}),
    "fuse": frozenset({"entries", "level"}),
    "expel_insights": frozenset({"insights", "task", "result", "trajectory"}),
}

SYSTEM = ("You are the memory copilot of an agent that plays text-based tasks. "
          "Answer with one JSON object and nothing else.")
"""The copilot's system message (its training pairs use it too, so training and use match)."""


def load(name: str) -> string.Template:
    """The template ``prompts/mcma/<name>.txt`` with its placeholders checked."""
    path = resources.files("deltamem").joinpath("prompts", "mcma", f"{name}.txt")
    return read_template(path, VARIABLES[name], "MCMA prompt")


ask_validated = partial(ask_json, system=SYSTEM, limits_hint=False)
""":func:`~deltamem.llm.structured.ask_json` with the copilot's system message (``check=``:
the semantic rule the schema cannot state)."""
