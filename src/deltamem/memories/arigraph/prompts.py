"""Prompt templates of AriGraph and its baselines (``deltamem/prompts/arigraph/*.txt``).

:func:`render` fills one and refuses unknown or missing variables
(:func:`deltamem.templates.render_prompt`). The Ariadne agent's own prompts are
``deltamem/prompts/ariadne``.
"""

from __future__ import annotations

from deltamem.templates import render_prompt

__all__ = ["render"]


def render(name: str, **values: object) -> str:
    """Fill template ``name``; :class:`~deltamem.errors.ConfigError` when the variables do not
    match exactly."""
    return render_prompt("arigraph", name, **values)
