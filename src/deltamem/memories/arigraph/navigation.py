"""Spatial knowledge in the semantic graph: locations, exits, routes (paper §3, Appendix B).

The expert knowledge the paper's agent uses about what represents a location
and an exit lives here:

* a **spatial triplet** says where one location lies from another:
  ``(hall, is east of, kitchen)`` — going ``east`` from the kitchen reaches the
  hall (and ``west`` from the hall reaches the kitchen). Relations ``east of``,
  ``is east of``, ``is to the east of`` and ``is located east of`` are read
  the same way (:func:`spatial_direction`);
* an **exit triplet** is ``(kitchen, has exit, east)`` (also ``has an
  unexplored exit``, ``exit``);
* the current location is read from the observation (:func:`locate`):
  TextWorld's ``-= Kitchen =-`` header, else ``You are in the X`` /
  ``You arrive at the X`` / ``You enter the X``.

:func:`shortest_path` finds the move commands along known spatial triplets, and
:func:`goto_routes` offers them as ``go to <place>`` actions;
:func:`unexplored_exits` is Algorithm 3 (exits of a location minus those
whose neighbour is known, looking at spatial triplets in both directions).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from deltamem.memories.arigraph.graph import networkx
from deltamem.memories.arigraph.triplets import Triplet, normalize_entity

__all__ = [
    "DIRECTIONS",
    "OPPOSITE",
    "all_unexplored_exits",
    "exit_direction",
    "goto_routes",
    "known_locations",
    "locate",
    "move_direction",
    "shortest_path",
    "spatial_direction",
    "spatial_triplet",
    "unexplored_exits",
]

OPPOSITE: dict[str, str] = {
    "north": "south", "south": "north", "east": "west", "west": "east",
    "up": "down", "down": "up",
    "northeast": "southwest", "southwest": "northeast",
    "northwest": "southeast", "southeast": "northwest",
}
DIRECTIONS: tuple[str, ...] = tuple(OPPOSITE)

_DIR = "|".join(sorted(DIRECTIONS, key=len, reverse=True))
_SPATIAL = re.compile(rf"^(?:is\s+)?(?:located\s+)?(?:to\s+the\s+)?({_DIR})\s+(?:of|from)$")
_EXIT_REL = re.compile(r"^(?:has|have)\s+(?:an?\s+)?(?:unexplored\s+|open\s+)?exits?(?:\s+to)?$"
                       r"|^exits?(?:\s+to)?$")
_MOVE = re.compile(rf"^(?:go\s+|walk\s+|move\s+|head\s+)?(?:to\s+the\s+)?({_DIR})$")
_HEADER = re.compile(r"-=\s*(.+?)\s*=-")
_PLAIN = re.compile(r"\byou (?:are (?:now )?in|arrive (?:at|in)|enter|have entered|'ve entered)"
                    r"\s+(?:the|a|an)\s+([a-z][a-z' -]{1,40}?)(?=[.,!\n]|$)", re.IGNORECASE)


def spatial_direction(relation: str) -> str | None:
    """``"is east of"`` → ``"east"``; ``None`` when the relation is not spatial."""
    m = _SPATIAL.match(normalize_entity(relation))
    return m.group(1) if m else None


def exit_direction(t: Triplet) -> str | None:
    """The direction of an exit triplet ``(loc, has exit, east)``, else ``None``."""
    if _EXIT_REL.match(t.relation) and t.object in OPPOSITE:
        return t.object
    return None


def move_direction(action: str) -> str | None:
    """``"go east"`` / ``"east"`` → ``"east"``; ``None`` for any other action."""
    m = _MOVE.match(" ".join(action.casefold().split()))
    return m.group(1) if m else None


def spatial_triplet(action: str, before: str | None, after: str | None) -> Triplet | None:
    """The triplet a move teaches: ``go east`` from ``before`` to ``after`` →
    ``(after, is east of, before)``; ``None`` when it was not a move between two places."""
    d = move_direction(action)
    if d is None or not before or not after or before == after:
        return None
    return Triplet(after, f"is {d} of", before)


def locate(observation: str) -> str | None:
    """The location an observation puts the agent in (see the module docstring), if any."""
    m = _HEADER.search(observation)
    if m:
        return normalize_entity(m.group(1)) or None
    m = _PLAIN.search(observation)
    return normalize_entity(m.group(1)) or None if m else None


def _moves(triplets: Iterable[Triplet]) -> list[tuple[str, str, str]]:
    """``(from, direction, to)`` for every spatial triplet, both ways."""
    out = []
    for t in triplets:
        d = spatial_direction(t.relation)
        if d is None:
            continue
        out.append((t.object, d, t.subject))
        out.append((t.subject, OPPOSITE[d], t.object))
    return out


def known_locations(triplets: Iterable[Triplet]) -> list[str]:
    """Locations named by spatial or exit triplets, sorted."""
    triplets = list(triplets)
    out = {a for a, _, b in _moves(triplets)} | {b for _, _, b in _moves(triplets)}
    out |= {t.subject for t in triplets if exit_direction(t)}
    return sorted(out)


def shortest_path(triplets: Iterable[Triplet], start: str, goal: str) -> list[str] | None:
    """The ``go <direction>`` commands of a shortest known route, ``[]`` when already there,
    ``None`` when no route is known. Ties: the lexicographically smallest route."""
    nx = networkx()
    start, goal = normalize_entity(start), normalize_entity(goal)
    if start == goal:
        return []
    g = nx.DiGraph()
    for a, d, b in sorted(_moves(triplets)):
        if not g.has_edge(a, b):
            g.add_edge(a, b, direction=d)
    if start not in g or goal not in g:
        return None
    try:
        paths = list(nx.all_shortest_paths(g, start, goal))
    except nx.NetworkXNoPath:
        return None
    routes = sorted([f"go {g.edges[a, b]['direction']}" for a, b in itertools.pairwise(p)]
                    for p in paths)
    return routes[0]


def goto_routes(details: Mapping[str, Any]) -> dict[str, list[str]]:
    """``"go to <place>"`` → its move commands, for every known place reachable from the
    current location over the spatial triplets in a recall's ``details`` (``location``,
    ``spatial``: what AriGraph's recall carries; ``{}`` without them).

    >>> goto_routes({"location": "hall", "spatial": [["kitchen", "is east of", "hall"]]})
    {'go to kitchen': ['go east']}
    """
    here = details.get("location")
    spatial = [Triplet.from_obj(t) for t in details.get("spatial") or ()]
    if not here or not spatial:
        return {}
    places = sorted({t.subject for t in spatial} | {t.object for t in spatial})
    out: dict[str, list[str]] = {}
    for place in places:
        route = shortest_path(spatial, here, place)
        if route:
            out[f"go to {place}"] = route
    return out


def unexplored_exits(triplets: Sequence[Triplet], location: str) -> list[Triplet]:
    """Algorithm 3: the exit triplets of ``location`` whose neighbour is not yet known.

    Exits are the outgoing ``(location, has exit, dir)`` edges; an exit is
    explored when a spatial triplet places another location in that direction
    (``(x, is dir of, location)`` or ``(location, is opposite-dir of, x)``).
    """
    loc = normalize_entity(location)
    exits = [t for t in triplets if t.subject == loc and exit_direction(t)]
    explored = {d for a, d, _ in _moves(triplets) if a == loc}
    return [t for t in exits if exit_direction(t) not in explored]


def all_unexplored_exits(triplets: Sequence[Triplet]) -> list[Triplet]:
    """:func:`unexplored_exits` of every location that has exit triplets."""
    locs = dict.fromkeys(t.subject for t in triplets if exit_direction(t))
    return [t for loc in locs for t in unexplored_exits(triplets, loc)]
