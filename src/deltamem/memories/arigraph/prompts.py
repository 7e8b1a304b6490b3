"""Prompt templates of AriGraph, the Ariadne agent and its baselines.

Templates are ``string.Template`` files under ``deltamem/prompts/arigraph``;
:func:`render` fills one and refuses unknown or missing variables, so a
template and its caller cannot drift apart silently.
"""

from __future__ import annotations

import string
from functools import cache
from importlib import resources

from deltamem.errors import ConfigError
from deltamem.templates import read_template

__all__ = ["load_template", "render"]


@cache
def load_template(name: str) -> string.Template:
    """The template ``deltamem/prompts/arigraph/<name>.txt`` (:class:`ConfigError` if missing
    or malformed)."""
    path = resources.files("deltamem").joinpath("prompts", "arigraph", f"{name}.txt")
    return read_template(path, None, "arigraph prompt")


def render(name: str, **values: object) -> str:
    """Fill template ``name``; :class:`ConfigError` when the variables do not match exactly."""
    template = load_template(name)
    wanted = set(template.get_identifiers())
    given = set(values)
    if wanted != given:
        raise ConfigError(f"prompt {name!r} takes {sorted(wanted)}, got {sorted(given)}")
    return template.substitute({k: str(v) for k, v in values.items()})
