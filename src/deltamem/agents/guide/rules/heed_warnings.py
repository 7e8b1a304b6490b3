"""``heed-warnings``: what failed before is tried last.

**What.** A ``review`` rule: once the advice is chosen, its actions that the recall's
warning items (:mod:`deltamem.agents.guide.warnings`) name are left out, while other
advised actions remain: commands that had no effect in a failed episode, and, while the
goal's object is not held yet, moves to and openings of the places where it was searched
for in vain. When every advised action is named, the advice stays as it was: a warning
orders the choice, it never blocks the only way forward.

**Why.** Failure records were written and never read: a failed first attempt's lesson
("heat {A} with microwave -> Nothing happens", "searched in vain for apple: cabinet,
drawer") reached no decision, so the memories that keep failures (DeltaMem's FAILURE nodes,
ReasoningBank's preventive strategies, failed episodes' lessons) could only lose to those
that keep successes only (issue "DeltaMem where it should win", item 2).

**Where.** Every domain, after every other rule.
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import MOVES, mentions, verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.rule import Review, Scope


class HeedWarnings:
    """Leave out the advised actions the warnings name (module doc)."""

    name: ClassVar[str] = "heed-warnings"
    scope: ClassVar[Scope] = "review"

    def advise(self, state: Review) -> Advice | None:
        advice, warnings = state.advice, state.warnings
        if not warnings or len(advice.actions) < 2:
            return None
        vain = frozenset()
        thing = state.goal_object
        if thing and not any(a.startswith(("take ", "pick up ")) and thing in a.split()
                             for a in state.done):
            vain = warnings.searched(thing)
        kept = tuple(a for a in advice.actions if not warnings.failed(a)
                     and not (vain and verb(a) in {*MOVES, "open"} and mentions(a, vain)))
        if kept and len(kept) < len(advice.actions):
            return Advice(advice.step, kept, advice.backtrack, advice.blocked)
        return None
