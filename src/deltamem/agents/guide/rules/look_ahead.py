"""``look-ahead``: a later step about the goal, realisable right here, is advised.

**What.** When the pointed step cannot be done here, one of the next
:data:`~deltamem.agents.guide.progress.LOOKAHEAD` steps that names a goal word and that an
admissible action not taken yet realises exactly is advised. Never a move ("go to ..." is
admissible from anywhere, so it proves nothing about the skipped steps: going to the goal's
receptacle before taking the object is no progress), and never past a step about the goal's
own object (using the lamp does not make taking the object unnecessary).

**Why.** The recalled game needed a step this one does not (an "open" of a receptacle that
is open here). Once taken, a looked-ahead step is not advised again: the pointer stays at the
step it skipped (using the lamp is still to do after taking the object), and a repeatable
step ("focus on X") was otherwise advised to the step cap.

**Where.** Every domain, right after ``follow``.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import MOVES, verb, words
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.progress import LOOKAHEAD
from deltamem.agents.guide.rule import Position, Scope
from deltamem.text import normalise


class LookAhead:
    """A later goal step realisable here (module doc)."""

    name: ClassVar[str] = "look-ahead"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        steps, k = state.steps, state.k
        for j in range(k + 1, min(k + 1 + LOOKAHEAD, len(steps))):
            if state.goal_object and state.goal_object in words(steps[j - 1]):
                break
            if verb(steps[j]) in MOVES:
                continue
            exact, _ = state.realisations(steps[j])
            exact = [a for a in exact if normalise(a) not in state.done]
            if exact and set(words(steps[j])) & state.goal_words:
                return Advice(steps[j], tuple(exact))
        return None
