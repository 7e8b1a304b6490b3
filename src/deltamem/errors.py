"""Exceptions raised by deltamem.

Every error the library raises on purpose derives from :class:`DeltaMemError`,
so callers can catch one root. The tree::

    DeltaMemError
    ├── ConfigError            bad configuration value, unknown domain or name
    ├── InvalidInputError      bad episode / task given to a public function (empty
    │                          trajectory, NaN reward, ...); nothing was changed
    ├── StoreError             a memory bank cannot be opened or written
    │   └── EmbedderMismatchError   bank was built with another embedder (name/dim)
    ├── EmbedderError          an embedder cannot load or run (never a silent fallback)
    ├── LLMError               an LLM backend failed after its retries
    │   └── LLMUnavailableError     backend not installed / model file not found
    └── ExtractionError        LLM output failed validation after the repair retry;
                               it was logged and nothing was stored
"""

from __future__ import annotations


class DeltaMemError(Exception):
    """Root of every error deltamem raises on purpose."""


class ConfigError(DeltaMemError, ValueError):
    """A configuration value, domain or registered name is not valid."""


class InvalidInputError(DeltaMemError, ValueError):
    """Input to a public function is malformed; no state was changed."""


class StoreError(DeltaMemError):
    """A memory bank cannot be opened, read or written."""


class EmbedderMismatchError(StoreError):
    """The bank records another embedder (name or dimension) than the one given."""


class EmbedderError(DeltaMemError):
    """An embedder cannot be loaded or fails to embed."""


class LLMError(DeltaMemError):
    """An LLM call failed after all retries."""


class LLMUnavailableError(LLMError):
    """The LLM backend (package or model file) is not available on this machine."""


class ExtractionError(DeltaMemError):
    """LLM output stayed invalid after the repair retry; it was rejected and logged."""

    def __init__(self, message: str, *, role: str = "", raw: str = "") -> None:
        super().__init__(message)
        self.role = role
        self.raw = raw
