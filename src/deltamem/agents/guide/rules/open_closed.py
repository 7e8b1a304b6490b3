"""``open-closed``: a blocked step first looks inside what is closed here.

**What.** When the pointed step (not the first) cannot be done here, the admissible
``open ...`` actions not taken yet are advised, before the search moves on.

**Why.** The object is not where it was in the recalled game, and it may be inside a
receptacle right here; opened once is enough.

**Where.** Every domain, after ``return-to-place``.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.rule import Position, Scope
from deltamem.text import normalise


class OpenClosed:
    """Open what is closed here before searching elsewhere (module doc)."""

    name: ClassVar[str] = "open-closed"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        opened = [a for a in state.admissible if verb(a) == "open"
                  and normalise(a) not in state.done]
        if opened and state.k > 0:
            return Advice(state.step, tuple(opened), backtrack=True, blocked=state.step)
        return None
