"""``follow``: the step the actions taken point at, done by the admissible actions that
realise it.

**What.** The pointer (:mod:`deltamem.agents.guide.progress`) names the next recalled step;
the admissible actions that realise it exactly are advised, else those that realise it
loosely (:mod:`deltamem.agents.guide.realise`). A move realised only loosely (the recalled
place is not here) goes first to places not visited yet.

**Why.** A 135M model shown a whole procedure in its memory block does not follow it; shown
the *next* step right before the action list, it often does (``docs/results.md``).

**Where.** Every domain: the first ``procedure`` rule.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import MOVES, verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.rule import Position, Scope
from deltamem.text import normalise


class Follow:
    """The pointed step, realised here (module doc)."""

    name: ClassVar[str] = "follow"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        step = state.step
        exact, loose = state.realisations(step)
        if exact:
            return Advice(step, tuple(exact))
        if loose:
            if verb(step) in MOVES:
                # the recalled place is not here: a place not visited yet first
                loose = [a for a in loose if normalise(a) not in state.done] or loose
            return Advice(step, tuple(loose))
        return None
