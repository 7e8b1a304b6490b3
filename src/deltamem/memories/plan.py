"""What one ``learn`` will do, decided before its transaction: :class:`Plan`.

Every memory system learns in two steps: plan (validate, match, call the LLM: slow,
outside any lock), then apply the plan inside one store transaction (fast,
self-contained writes). A :class:`Plan` is the hand-over between the two: the
:class:`~deltamem.types.Change` list ``learn`` returns, the queued writes, and the
LLM outputs that stayed invalid and must be logged in the bank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from deltamem.errors import ExtractionError
from deltamem.types import Change

__all__ = ["Plan", "Rejection"]


@dataclass(frozen=True)
class Rejection:
    """An LLM output that stayed invalid after its repair call (logged, never stored).

    ``source`` is where it would have gone (a tree of DeltaMem, a baseline's name),
    ``role`` the prompt that produced it, ``raw`` the rejected answer.
    """

    source: str
    role: str
    reason: str
    raw: str


@dataclass
class Plan:
    """What one ``learn`` will do: its changes, queued writes and rejections to log.

    Writes run inside the learn transaction, in order.
    """

    changes: list[Change] = field(default_factory=list)
    writes: list[Callable[[], object]] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)

    def reject(self, source: str, error: ExtractionError, *, role: str | None = None,
               id: str | None = None) -> None:
        """Record an LLM output that stayed invalid: Change ``rejected`` + a log row.

        ``role`` defaults to the error's; ``id`` names the node the output was about.
        """
        role = error.role if role is None else role
        self.changes.append(Change("rejected", source, f"{role}: {error}", id))
        self.rejections.append(Rejection(source, role, str(error), error.raw))

    def extend(self, other: Plan) -> None:
        """Append ``other``'s changes, writes and rejections after this plan's."""
        self.changes += other.changes
        self.writes += other.writes
        self.rejections += other.rejections

    @classmethod
    def join(cls, plans: Iterable[Plan]) -> Plan:
        """One plan doing ``plans`` in order."""
        out = cls()
        for p in plans:
            out.extend(p)
        return out
