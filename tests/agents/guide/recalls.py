"""Recalls, goals and actions the guide's tests share."""

from __future__ import annotations

from deltamem.agents.guide import Decision
from deltamem.types import RecallItem

DELTAMEM_RECALL = """Relevant experience from memory:

## Task skill
[Base Skill]
Trigger: Tasks of the form: put a hot {A} in {B} ({A} = e.g. apple, {B} = e.g. countertop)
Procedure: 1. go to fridge
2. open fridge
3. take {A} from fridge
4. go to microwave
5. heat {A} with microwave
6. go to {B}
7. put {A} in/on {B}
Done when: The environment reports the task done after: put {A} in/on {B}
[Failure Record / WARN]
Trigger: Attempts at: put a hot apple in countertop -- failed after 30 steps (reward 0)
Procedure: [FAILED]:
- go to garbagecan -> Nothing happens.
"""


SYNAPSE_RECALL = """## Solved example 1 (similarity 0.81)
Task: put a hot apple in countertop
You are in the middle of a room. Looking quickly around you, you see a fridge 1.
> go to fridge 1
The fridge 1 is closed.
> open fridge 1
You open the fridge 1. In it, you see a apple 1.
> take apple 1 from fridge 1
"""


GOAL = "put a hot tomato in diningtable"


VERBS = ("go", "take", "open", "heat", "put", "examine", "look")


HEAT_RECALL = ("Trigger: Tasks of the form: heat some {A} and put it in {B}\n"
               "Procedure: 1. go to sinkbasin\n2. take {A} from sinkbasin\n3. go to microwave\n"
               "4. heat {A} with microwave\n5. go to {B}\n6. move {A} to {B}\n")


HEAT_GOAL = "heat some cup and put it in countertop"


PLACES = ["go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to microwave 1",
          "go to shelf 1", "go to sinkbasin 1"]


def item(text: str, score: float | None, role: str = "strategy",
         source: str = "lessons") -> RecallItem:
    """A recall item of ``text`` (its id from the text)."""
    return RecallItem(source, f"id{abs(hash(text)) % 997}", text, score, role)


TIDY_GOAL = ("The house is a mess. Find the items that are out of place and put each one back "
              "where it belongs.")


TIDY_RECALL = (f"Tasks of the form: {TIDY_GOAL}\n"
                "1. go south\n2. take iron\n3. go north\n4. put iron on ironing board\n"
                "5. take milk carton from desk\n6. go east\n7. insert milk carton into fridge\n"
                "8. take raincoat from sofa\n9. go west\n10. put raincoat on coat hook\n")


def decision(admissible: list[str], taken: list[str], goal_words: frozenset[str],
             absent: frozenset[str] = frozenset()) -> Decision:
    """A decision with nothing recalled about places (``absent``: the steps whose thing was
    never offered)."""
    return Decision(admissible=admissible, taken=taken,
                    done=frozenset(a.lower() for a in taken), goal_words=goal_words,
                    goal_object=None, homes={}, known_places=frozenset(),
                    absent=lambda step: step in absent)
