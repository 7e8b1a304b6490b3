"""matplotlib access for the analyses: the ``Figure`` class, or a clear error.

Figures are drawn on :class:`matplotlib.figure.Figure` objects directly (no
pyplot, no global state), so drawing is safe in worker processes and tests.
"""

from __future__ import annotations

from typing import Any

from deltamem.errors import ConfigError

__all__ = ["figure_class"]

MATPLOTLIB_MISSING = (
    "this analysis draws PNG figures and needs matplotlib: pip install 'deltamem[plots]' "
    "(or pass --no-plots / plots=False for the Markdown only)"
)


def figure_class() -> Any:
    """``matplotlib.figure.Figure``; raises :class:`ConfigError` when matplotlib is missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ConfigError(MATPLOTLIB_MISSING) from e
    return Figure
