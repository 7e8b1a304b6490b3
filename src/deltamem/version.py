"""The package version, on the ground floor so any layer may report it (``deltamem.__version__``
re-exports it)."""

__version__ = "0.1.0"
