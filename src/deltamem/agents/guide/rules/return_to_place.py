"""``return-to-place``: after a search, back to where the procedure does the blocked step.

**What.** When the pointed step cannot be done here, the place of the last move before it in
the procedure is advised, when the agent is not there now and has not been there since the
pointer reached the step.

**Why.** A search took the agent elsewhere (to find the substance), and the stove is where
the recalled game used it: without this rule the blocked "move metal pot to stove" was
searched for in the workshop.

**Where.** Every domain, after ``look-ahead``; it answers where a procedure moves between
places (ScienceWorld's rooms, the household's receptacles).
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import MOVES, verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.realise import realises
from deltamem.agents.guide.rule import Position, Scope


class ReturnToPlace:
    """Back to the place of the blocked step (module doc)."""

    name: ClassVar[str] = "return-to-place"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        steps, k, taken = state.steps, state.k, state.taken
        m = next((j for j in range(k - 1, -1, -1) if verb(steps[j]) in MOVES), None)
        if m is None:
            return None
        exact, _ = state.realisations(steps[m])
        if not exact:
            return None
        since = state.reached_at()
        moves = [i for i, a in enumerate(taken) if verb(a) in MOVES]
        here = [i for i in moves if i < since]
        visits = ([here[-1]] if here else []) + [i for i in moves if i >= since]
        if any(realises(taken[i], steps[m], state.goal_words) == "exact" for i in visits):
            return None
        return Advice(steps[m], tuple(exact), backtrack=True, blocked=steps[k])
