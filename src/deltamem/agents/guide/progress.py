"""Progress: where the actions taken have brought a procedure.

A pointer walks the filled steps: an action taken that realises the pointed step (or exactly
one of the next :data:`LOOKAHEAD`, skipping only steps that name none of the goal's words)
moves it past that step (:func:`walk`). A loose realisation taken binds its stand-ins for the
rest of the procedure (:func:`~deltamem.agents.guide.realise.replaced`). A step that picks up
a thing already held is done (:func:`held`): nothing admissible realises "pick up metal pot"
and the environment offers "put down metal pot" (the recalled game picked it up later than
this one did; without this the pointer waits on a step that can never be taken here).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deltamem.agents.guide.actions import INVENTORY, abstract_action, head, words
from deltamem.agents.guide.realise import realises, replaced, substitutes, swap

#: how many steps past the pointed one an action taken (and the ``look-ahead`` rule's
#: advice) may realise
LOOKAHEAD = 3


def walk(steps: Sequence[str], taken: Sequence[str], goal_words: frozenset[str],
         absent: Callable[[str], bool]) -> tuple[int, dict[int, int], dict[str, str]]:
    """The pointer after ``taken``; for each value it took, the index of the action that
    moved it there (0 for the start); and the stand-ins the loose realisations taken put in
    place of recalled words (``{recalled word: its stand-in}``). ``absent(step)``: whether
    the thing ``step`` handles occurs in no action offered in this episode (then another
    thing of its kind may stand in for it, :func:`~deltamem.agents.guide.realise.substitutes`)."""
    k = 0
    reached = {0: 0}
    subs: dict[str, str] = {}
    for n, action in enumerate(taken):
        for j in range(k, min(k + 1 + LOOKAHEAD, len(steps))):
            if j > k and set(words(steps[j - 1])) & goal_words:
                break  # a step about the goal's own objects is never skipped
            step = swap(steps[j], subs)
            how = realises(action, step, goal_words)
            if (how is None and j == k and absent(step)
                    and substitutes(action, step, goal_words)):
                how = "loose"
            if how == "exact" or (how == "loose" and j == k):
                if how == "loose":
                    for src, dst in replaced(action, step):
                        if src not in subs and dst not in subs.values():
                            subs[src] = dst
                k = j + 1
                reached[k] = n
                break
    return k, reached, subs


def held(step: str, admissible: Sequence[str], goal_words: frozenset[str]) -> bool:
    """Whether ``step`` picks up a thing the agent already holds: nothing admissible
    realises it and the environment offers to put that thing down."""
    verb, thing = head(abstract_action(step).replace(INVENTORY, "").split())
    if verb != ["pick", "up"] or not thing:
        return False
    if any(realises(a, step, goal_words) for a in admissible):
        return False
    down = "put down " + " ".join(thing)
    return any(abstract_action(a) == down for a in admissible)
