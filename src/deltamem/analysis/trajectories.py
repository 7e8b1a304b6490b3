"""Where the steps of an episode went: searching for the goal's object, then using it.

Read from a run's ``trajectories.jsonl`` (:func:`deltamem.bench.results.read_trajectories`),
for environments whose actions pick objects up with ``take OBJ from PLACE`` or
``pick up OBJ`` (household, ALFWorld, ScienceWorld):

* :func:`~deltamem.core.triggers.goal_entities` -- the goal's object and place words,
  in order (the words :func:`deltamem.core.triggers.abstract_goal` turns into
  placeholders);
* :func:`search_steps` -- how many steps the agent took before it first picked up the
  goal's object (the first entity), i.e. the steps spent finding it; ``None`` when it
  never did. Steps to success minus search steps is the work done with the object.

The Env-Tree's knowledge of where things are (DeltaMem §3.1) can only act on the first
part, the Task-Tree's procedure on both; reading the two apart is what Table 3's
ablation needs to say *where* a tree acts.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltamem.core.triggers import goal_entities

__all__ = ["goal_entities", "search_steps"]

_PICK = ("take ", "pick up ", "get ")


def search_steps(goal: str, actions: Sequence[str]) -> int | None:
    """Steps taken before the goal's object was first picked up (``None``: never)."""
    entities = goal_entities(goal)
    if not entities:
        return None
    target = entities[0]
    for n, action in enumerate(actions):
        low = " ".join(action.lower().split())
        if low.startswith(_PICK):
            obj = low.split(" from ", 1)[0].split(" ", 1)[1] if " " in low else ""
            if target in obj.replace("-", " ").split() or obj.startswith(target):
                return n
    return None
