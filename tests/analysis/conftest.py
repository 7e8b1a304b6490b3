"""Run directories for the analysis tests: the ``make_run`` fixture (tests/cli uses it too)."""

from .analysis_toys import make_run

__all__ = ["make_run"]
