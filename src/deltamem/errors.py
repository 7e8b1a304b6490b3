"""Exceptions raised by deltamem.

Every error the library raises on purpose derives from :class:`DeltaMemError`,
so callers can catch one root. The tree::

    DeltaMemError
    ├── ConfigError            bad configuration value, unknown domain or name
    ├── InvalidInputError      bad episode / task given to a public function (empty
    │                          trajectory, NaN reward, ...); nothing was changed
    ├── StoreError             a memory bank cannot be opened, read or written
    │   ├── EmbedderMismatchError   bank was built with another embedder (name/dim)
    │   ├── NotABankError           the file is not a deltamem bank (another format)
    │   ├── BankDamagedError        the bank's file is damaged (its pages do not read)
    │   ├── BankReadOnlyError       the bank (file, folder or medium) cannot be written
    │   ├── StorageFullError        the disk (or the bank's size limit) is full
    │   └── InvalidImportError      an import's records break an invariant; nothing written
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


class NotABankError(StoreError):
    """The location holds something that is not a deltamem bank (another file format,
    another memory system's bank)."""


class BankDamagedError(StoreError):
    """The bank's file is damaged: SQLite reports a malformed page or image."""


class BankReadOnlyError(StoreError):
    """The bank cannot be written: a read-only file, folder or file system."""


class StorageFullError(StoreError):
    """The disk holding the bank is full (or the bank reached its page limit)."""


class InvalidImportError(StoreError, ValueError):
    """Records of an import break an invariant of the bank (which record and why);
    the whole import was refused and nothing was written."""


class EmbedderError(DeltaMemError):
    """An embedder cannot be loaded or fails to embed."""


class LLMError(DeltaMemError):
    """An LLM call failed after all retries.

    ``attempts`` (requests sent) and ``retry_wait`` (seconds slept between them) let the
    caller count what the failed call cost (0 when the backend does not say).
    """

    def __init__(self, message: str = "", *, attempts: int = 0, retry_wait: float = 0.0
                 ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.retry_wait = retry_wait


class LLMUnavailableError(LLMError):
    """The LLM backend (package or model file) is not available on this machine."""


class ExtractionError(DeltaMemError):
    """LLM output stayed invalid after the repair retry; it was rejected and logged."""

    def __init__(self, message: str, *, role: str = "", raw: str = "") -> None:
        super().__init__(message)
        self.role = role
        self.raw = raw
