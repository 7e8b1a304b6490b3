"""``search-unvisited``: when no earlier step can be retried, any place not visited yet.

**What.** The admissible moves not taken yet are advised, in the ``backtrack`` rule's order:
where the recall saw an object of the goal's kind, then where the procedure does the blocked
step elsewhere, then all of them.

**Why.** Every place of the recalled kind was visited (every cabinet of "go to cabinet"), and
places of another kind do not realise "go to cabinet" when a cabinet is the goal's
destination: the search must still go on.

**Where.** Every domain, the last rule.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import MOVES, mentions, verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.rule import Position, Scope
from deltamem.text import normalise


class SearchUnvisited:
    """Search any place not visited yet (module doc)."""

    name: ClassVar[str] = "search-unvisited"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        step = state.step
        moves = [a for a in state.admissible if verb(a) in MOVES
                 and normalise(a) not in state.done]
        for places in (state.known_places, state.other_places):
            liked = [a for a in moves if mentions(a, places)]
            if liked:
                return Advice(step, tuple(liked), backtrack=True, blocked=step)
        if moves:
            return Advice(step, tuple(moves), backtrack=True, blocked=step)
        return None
