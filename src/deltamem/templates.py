"""Prompt template files: read one and check its ``$placeholders`` (one loader for every prompt)."""

from __future__ import annotations

import string
from collections.abc import Set
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
