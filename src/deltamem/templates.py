"""Prompt template files: read one and check its ``$placeholders`` (one loader for every prompt).

:func:`read_template` reads any template file; :func:`render_prompt` fills
``deltamem/prompts/<family>/<name>.txt`` and refuses unknown or missing variables, so a
template and its caller cannot drift apart silently.
"""

from __future__ import annotations

import string
from collections.abc import Set
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from deltamem.errors import ConfigError


def read_template(
    path: Path | Traversable, variables: Set[str] | None, what: str
) -> string.Template:
    """The template at ``path``; only ``variables`` may appear as placeholders (``None``: any).

    ``what`` names the prompt family in errors ("extraction prompt", ...).
    Raises :class:`ConfigError` for a missing file, a malformed ``$`` placeholder
    or an unknown variable.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{what} not found: {path}") from None
    template = string.Template(text)
    if not template.is_valid():
        raise ConfigError(f"malformed $placeholder in {path} (write a literal $ as $$)")
    unknown = set(template.get_identifiers()) - set(variables or ())
    if variables is not None and unknown:
        raise ConfigError(
            f"{path} uses unknown variables {sorted(unknown)}; allowed: {sorted(variables)}"
        )
    return template


@cache
def _packaged(family: str, name: str) -> string.Template:
    path = resources.files("deltamem").joinpath("prompts", family, f"{name}.txt")
    return read_template(path, None, f"{family} prompt")


def render_prompt(family: str, name: str, **values: object) -> str:
    """Fill the template ``deltamem/prompts/<family>/<name>.txt`` with ``values``.

    Raises :class:`ConfigError` when the template is missing or malformed, or when the
    variables given are not exactly those it uses.
    """
    template = _packaged(family, name)
    wanted = set(template.get_identifiers())
    given = set(values)
    if wanted != given:
        raise ConfigError(f"prompt {name!r} takes {sorted(wanted)}, got {sorted(given)}")
    return template.substitute({k: str(v) for k, v in values.items()})
