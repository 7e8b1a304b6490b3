"""``backtrack``: an earlier step retried elsewhere, where the recall points first.

**What.** When nothing admissible realises the pointed step, the guide goes back to the
nearest earlier step that some admissible action *not yet taken* realises — "go to fridge"
becomes "go to some place not visited yet", "open fridge" becomes "open this cabinet" — so
the recalled approach is retried elsewhere, which is a search. The search goes first where
the recall saw an object of the goal's kind (knowledge lines ``- cup: found in/on cabinet``,
or a recalled trajectory's "On the cabinet 2, you see a cup 1": "go to cabinet 3" before "go
to shelf 1"), then where the procedure itself does the blocked step elsewhere (a chain's
variants: "take {A} from sofa" beside the blocked "take {A} from desk"), then anywhere.

**Why.** The object is not where it was in the recalled game; without a search the pointer
waits on a step that cannot be taken here.

**Where.** Every domain, after ``open-closed``.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import mentions
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.rule import Position, Scope
from deltamem.text import normalise


class Backtrack:
    """Retry the nearest earlier step elsewhere (module doc)."""

    name: ClassVar[str] = "backtrack"
    scope: ClassVar[Scope] = "procedure"

    def advise(self, state: Position) -> Advice | None:
        steps, k = state.steps, state.k
        for j in range(k - 1, -1, -1):
            exact, loose = state.realisations(steps[j])
            fresh = [a for a in (*exact, *loose) if normalise(a) not in state.done]
            if fresh:
                for places in (state.known_places, state.other_places):
                    liked = [a for a in fresh if mentions(a, places)]
                    if liked:
                        return Advice(steps[j], tuple(liked), backtrack=True,
                                      blocked=steps[k])
                return Advice(steps[j], tuple(fresh), backtrack=True, blocked=steps[k])
        return None
