"""What the guide says before one decision: the step aimed at and the actions that do it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Advice:
    """What the guide says before one decision.

    :attr:`hint` is the line shown for ``guide=hint``; :attr:`actions` are the admissible
    actions that realise the step, for ``guide=prior`` (the constrained choice is made among
    them, i.e. they get an unbounded bonus over the rest; with none, the model chooses among
    all admissible actions as usual).

    Attributes:
        step: the recalled step aimed at (filled), or ``None`` when there is none.
        actions: the admissible actions that realise it (empty: no advice).
        backtrack: the step aimed at is not the pointed one: the search of the
            ``open-closed``, ``return-to-place``, ``backtrack`` and ``search-unvisited``
            rules, which retries the procedure elsewhere.
        blocked: the pointed step, when it cannot be done here (back-tracking).
    """

    step: str | None
    actions: tuple[str, ...] = ()
    backtrack: bool = False
    blocked: str | None = None

    @property
    def hint(self) -> str | None:
        """The one-line hint shown right before the action list (``None``: nothing to say)."""
        if self.step is None or not self.actions:
            return None
        shown = self.actions[0] if len(self.actions) == 1 else self.step
        if self.backtrack:
            return (f"From memory: the next step ({self.blocked}) is not possible here; "
                    f"redo an earlier step elsewhere: {shown}")
        return f"From memory, the next step: {shown}"
