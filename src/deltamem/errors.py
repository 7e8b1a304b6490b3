"""Exceptions raised by deltamem.

Every error the library raises on purpose derives from :class:`DeltaMemError`,
so callers can catch one root. The whole tree (each class is importable from here;
the module named in brackets re-exports it where it was first defined)::

    DeltaMemError
    ├── ConfigError            bad configuration value, unknown domain or name
    ├── InvalidInputError      bad episode / task given to a public function (empty
    │   │                      trajectory, NaN reward, ...); nothing was changed
    │   └── ToolInputError          an MCP tool's arguments are invalid
    │                               [integrations.mcp.tools]
    ├── StoreError             a memory bank cannot be opened, read or written
    │   ├── EmbedderMismatchError   bank was built with another embedder (name/dim)
    │   ├── NotABankError           the file is not a deltamem bank (another format)
    │   ├── BankDamagedError        the bank's file is damaged (its pages do not read)
    │   ├── BankReadOnlyError       the bank (file, folder or medium) cannot be written
    │   ├── StorageFullError        the disk (or the bank's size limit) is full
    │   ├── InvalidImportError      an import's records break an invariant; nothing written
    │   │   └── IncompleteExportError   an export's header/trailer say records are missing
    │   │                               or altered (a cut file); nothing written
    │   ├── BankNotFound            a tenant has no bank of that name (HTTP 404)
    │   │                           [service.banks, service]
    │   ├── BankNotEmpty            an import into a bank that has nodes (HTTP 409)
    │   │                           [service.tenants, service]
    │   └── NodeNotFound            no node (or inspector edit) of that id in the bank
    │                               (HTTP 404)
    ├── ReadOnlyError          a write to a read-only service, the local viewer (HTTP 403)
    │                          [service.tenants, service]
    ├── EditConflictError      an inspector edit or undo that would lose data: the node
    │                          changed since, or has children (HTTP 409)
    ├── EmbedderError          an embedder cannot load or run (never a silent fallback)
    ├── LLMError               an LLM backend failed after its retries
    │   └── LLMUnavailableError     backend not installed / model file not found
    │       └── ElfCompatError      llama.cpp's library cannot be re-linked for an older
    │                               glibc (also a ValueError) [llm.elf_compat]
    ├── ExtractionError        LLM output failed validation after the repair retry;
    │                          it was logged and nothing was stored
    └── CellFailed             cells of a sweep or grid failed; the others are kept
                               [bench.cells]

Private control flow stays private where it is used and never leaves its package:
``memories.banked._Replan`` (a learn's write decision was made on a bank that changed under
it: roll back and decide again; raised by DeltaMem's facade, caught by the banked base),
``store.records._Bad`` (why one record of an import is refused; it leaves as
:class:`InvalidImportError`),
``llm.openai_compat._ResponseFormatRejected`` (the server refuses the JSON schema format:
ask again with a plainer one) and ``_NotACompletion`` (a reply that is not a completion:
retried like a transient fault).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class DeltaMemError(Exception):
    """Root of every error deltamem raises on purpose."""


class ConfigError(DeltaMemError, ValueError):
    """A configuration value, domain or registered name is not valid."""


class InvalidInputError(DeltaMemError, ValueError):
    """Input to a public function is malformed; no state was changed."""


class StoreError(DeltaMemError):
    """A memory bank cannot be opened, read or written."""


class ToolInputError(InvalidInputError):
    """A tool's arguments are invalid (the message names the field); nothing changed."""


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


class IncompleteExportError(InvalidImportError):
    """An export's header and trailer (:mod:`deltamem.store.frames`) say it is not whole:
    no trailer (a cut file), records missing or a checksum that disagrees. The message names
    what is missing; nothing was written (``--partial`` imports what is there)."""


class BankNotFound(StoreError):
    """The tenant has no bank of that name (the service answers 404)."""


class BankNotEmpty(StoreError):
    """An import into a bank that already has nodes (an import needs an empty bank)."""


class NodeNotFound(StoreError):
    """The bank has no node (or inspector edit) of that id (the service answers 404)."""


class EditConflictError(DeltaMemError):
    """An inspector edit or undo (:mod:`deltamem.memories.deltamem.inspector`) refused
    because it would lose something: the node changed after the edit being undone, or a
    node to delete has children and the subtree was not asked for. Nothing was changed."""


class ReadOnlyError(DeltaMemError):
    """A write (learn, import, delete) to a read-only service (the local viewer)."""


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


class ElfCompatError(LLMUnavailableError, ValueError):
    """The file is not a little-endian ELF64 library :mod:`deltamem.llm.elf_compat` can
    rewrite (so llama.cpp's library cannot be re-linked for this glibc)."""


class ExtractionError(DeltaMemError):
    """LLM output stayed invalid after the repair retry; it was rejected and logged."""

    def __init__(self, message: str, *, role: str = "", raw: str = "") -> None:
        super().__init__(message)
        self.role = role
        self.raw = raw


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class CellFailed(DeltaMemError):
    """Cells that failed (their own error, or their worker died more than ``retries``
    times); the others finished and are kept: run again to resume. ``failures`` lists
    ``(cell, error)`` (a :class:`~deltamem.bench.cells.Cell` has a ``name``); ``total``
    the cells of the call."""

    def __init__(self, failures: Sequence[tuple[_Named, BaseException]], total: int) -> None:
        self.failures = list(failures)
        self.total = total
        super().__init__(str(self))

    def __str__(self) -> str:
        first = self.failures[0] if self.failures else None
        head = (f"{len(self.failures)} of {self.total} cells failed "
                f"({', '.join(c.name for c, _ in self.failures)}); finished cells are kept, "
                "run again to resume")
        return head + (f"; {first[0].name}: {first[1]}" if first else "")


def explain_validation(error: ValueError, *, what: str = "option") -> str:
    """A pydantic ``ValidationError`` as one line, one clause per setting it names:
    ``option tau_task: expected a valid number or 'auto', got 'high'``.

    The alternatives of a union (``float | Literal['auto']``) are one clause; pydantic's URLs
    and type tags are left out. Any other ``ValueError`` is its text.
    """
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    by_field: dict[str, list[dict[str, object]]] = {}
    for err in errors(include_url=False):
        loc = [str(p) for p in err.get("loc", ())]
        by_field.setdefault(loc[0] if loc else "", []).append(err)
    clauses = []
    for name, errs in by_field.items():
        head = f"{what} {name}" if name else what
        if any(e.get("type") == "extra_forbidden" for e in errs):
            clauses.append(f"{head}: no such {what}")
            continue
        expected: list[str] = []
        others: list[str] = []
        for e in errs:
            msg = str(e.get("msg", ""))
            if msg.startswith("Input should be "):
                exp = msg[len("Input should be "):].split(", unable to")[0]
                if exp.startswith(("greater ", "less ", "at ")):
                    exp = "a value " + exp
                if exp not in expected:
                    expected.append(exp)
            else:
                msg = msg.removeprefix("Value error, ")
                if msg not in others:
                    others.append(msg)
        got = errs[0].get("input")
        if expected and not others:
            clauses.append(f"{head}: expected {' or '.join(expected)}, got {got!r}")
        else:
            clauses.append(f"{head}: {'; '.join(others + [f'expected {x}' for x in expected])}")
    return "; ".join(clauses)
