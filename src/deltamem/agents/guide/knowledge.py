"""What a recall says about places: where things were seen, where they belong, where the
procedure does a step elsewhere.

* :func:`sightings`: where an object of a kind was found, from knowledge lines (``- cup:
  found in/on shelf``, DeltaMem's Env-Tree) and raw observations of recalled trajectories;
  the search of the ``backtrack`` and ``search-unvisited`` rules goes there first.
* :func:`placements` and :func:`belongings`: where the recalled steps put things, and where
  knowledge lines say they belong; the ``put-away`` rule's homes.
* :func:`alternative_places`: where the procedure itself does a blocked step elsewhere (a
  chain's variants); the search's second choice.

Kinds are lower case without instance numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from deltamem.agents.guide.actions import INVENTORY, NUMBER, STOP, abstract_action, words
from deltamem.text import ARTICLES

# a knowledge line's subject: "- <thing>:" (DeltaMem's Env-Tree)
_KNOWN = r"(?:^|\s)[-*]\s*((?:[A-Za-z][\w-]* )*[A-Za-z][\w-]*):\s*"
_FOUND = re.compile(_KNOWN + r"found in/on\s+([A-Za-z][\w -]*?)\s*$", re.MULTILINE)
_BELONGS = re.compile(_KNOWN + r"belongs in/on\s+([A-Za-z][\w -]*?)\s*(?:\(|$)", re.MULTILINE)
_SEEN_ON = re.compile(r"\b(?:on|in) the ([a-z][a-z -]*?) \d+, you see ([^.\n]*)", re.IGNORECASE)
_SEEN_IN = re.compile(r"\byou open the ([a-z][a-z -]*?) \d+\.[^\n>]*?in it, you see ([^.\n]*)",
                      re.IGNORECASE)
_LISTED = re.compile(r",\s*|\s+and\s+")
#: a step that puts a thing somewhere: ``(thing, place)``
PLACING = re.compile(r"^(?:put|insert|move) (.+?) (?:on|onto|into|in|to) (.+)$")
#: a step that takes a thing: ``(thing, place taken from or None)``
TAKING = re.compile(r"^take (.+?)(?: from (.+))?$")


def sightings(text: str) -> list[tuple[str, str]]:
    """``(object kind, place kind)`` pairs a recall text reports, in order: knowledge lines
    (``- cup: found in/on shelf``, DeltaMem's Env-Tree) and raw observations of a recalled
    trajectory (``On the countertop 1, you see a cup 2, ...``; ``You open the fridge 1. ...
    In it, you see a cup 1``). Kinds are lower case without instance numbers."""
    out: list[tuple[str, str]] = []
    for m in _FOUND.finditer(text):  # "metal pot: found in/on kitchen": a pot
        out.append((m.group(1).lower().split()[-1], abstract_action(m.group(2))))
    for rx in (_SEEN_ON, _SEEN_IN):
        for m in rx.finditer(text):
            place = abstract_action(m.group(1))
            for item in _LISTED.split(m.group(2)):
                found = NUMBER.sub("", item.strip().lower()).split()
                found = [w for w in found if w not in ARTICLES]
                if found and found != ["nothing"]:
                    out.append((found[-1], place))
    return out


def known_places(text: str, goal_words: frozenset[str]) -> frozenset[str]:
    """Kinds of places where ``text`` says an object of the goal's kind was found: knowledge
    lines and the observations of recalled trajectories alike (:func:`sightings`)."""
    return frozenset(place for obj, place in sightings(text) if obj in goal_words)


def placements(steps: Iterable[str]) -> dict[str, str]:
    """Where recalled steps put things: ``{thing: place}`` for each thing that the steps take
    (``take X``, ``take X from G``) and that every placing step (``put X on F``, ``insert X
    into F``, ``move X to F``) puts in the same place. A thing only ever moved where it is (a
    ScienceWorld jug to the sink) is a tool of the procedure, and a step with a placeholder
    the goal left unbound names no thing. Kinds are lower case without instance numbers."""
    places: dict[str, set[str]] = {}
    taken: set[str] = set()
    for step in steps:
        abstract = abstract_action(step).replace(INVENTORY, "")
        m = PLACING.match(abstract)
        if m:
            places.setdefault(m.group(1), set()).add(m.group(2))
        m = TAKING.match(abstract)
        if m:
            taken.add(m.group(1))
    return {thing: next(iter(p)) for thing, p in places.items()
            if len(p) == 1 and thing in taken  # a thing fetched to be put away
            and "{" not in thing + next(iter(p))}  # no unbound placeholder


def belongings(text: str) -> dict[str, str]:
    """Where knowledge lines of a recall say things belong: ``{thing: place}`` from ``- iron:
    belongs in/on ironing board (putting it there scored)`` (DeltaMem's Env-Tree in
    TextWorld: a placement the game scored). Kinds as :func:`placements`."""
    return {abstract_action(m.group(1)): abstract_action(m.group(2))
            for m in _BELONGS.finditer(text)}


def held_things(admissible: Iterable[str]) -> set[str]:
    """Things the agent holds, read from what it is offered to do with them (put, insert,
    move or drop them)."""
    out: set[str] = set()
    for a in admissible:
        abstract = abstract_action(a)
        m = PLACING.match(abstract)
        if m:
            out.add(m.group(1))
        elif abstract.startswith("drop "):
            out.add(abstract[5:])
    return out


def alternative_places(steps: Sequence[str], k: int, goal_words: frozenset[str]
                       ) -> frozenset[str]:
    """Places where the procedure itself does the blocked step ``steps[k]`` elsewhere: other
    steps with the same verb and the same goal words, e.g. "take apple from sofa" beside
    "take apple from desk" -- the variants a chain's deltas recorded (DeltaMem's residual
    successes found the object there)."""
    blocked = words(steps[k])
    if not blocked:
        return frozenset()
    mine = set(blocked) & goal_words
    if not mine:
        return frozenset()
    out: set[str] = set()
    for j, step in enumerate(steps):
        found = words(step)
        if (j == k or not found or found[0] != blocked[0]
                or set(found) & goal_words != mine):
            continue
        out.update(w for w in found[1:] if w not in blocked and w not in STOP
                   and w[0].isalpha())
    return frozenset(out)
