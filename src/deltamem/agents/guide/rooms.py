"""The rooms the ``put-away`` rule's search has seen and the moves between them.

A room is told apart by what stays in it: the things it offers to examine that cannot be
taken, put or dropped (the furniture). Compass moves are known to undo each other. Pure
bookkeeping over the admissible actions and the actions taken; one per episode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from deltamem.agents.guide.actions import MOVES, abstract_action, verb
from deltamem.agents.guide.knowledge import TAKING, held_things

#: compass moves undo each other
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east",
             "up": "down", "down": "up"}


class Rooms:
    """The rooms seen in one episode and the known moves between them (module doc)."""

    def __init__(self) -> None:
        self.exits: dict[frozenset[str], dict[str, frozenset[str] | None]] = {}
        self._last: tuple[frozenset[str], int] | None = None

    def arrive(self, admissible: Sequence[str], taken: Sequence[str]) -> frozenset[str]:
        """The room the admissible actions show; records the move that led here."""
        looks: set[str] = set()
        loose = held_things(admissible)
        for a in admissible:
            abstract = abstract_action(a)
            if abstract.startswith("examine "):
                looks.add(abstract[8:])
            m = TAKING.match(abstract)
            if m:
                loose.add(m.group(1))
        room = frozenset(looks - loose)
        ways = self.exits.setdefault(room, {})
        for a in admissible:
            if verb(a) in MOVES:
                ways.setdefault(abstract_action(a), None)
        if self._last is not None:
            before, n = self._last
            if len(taken) == n + 1 and verb(taken[-1]) in MOVES and room != before:
                move = abstract_action(taken[-1])
                self.exits.setdefault(before, {})[move] = room
                back = " ".join(_OPPOSITE.get(w, w) for w in move.split())
                if back != move and back in ways:  # the way back, when it is offered
                    ways[back] = before
        self._last = (room, len(taken))
        return room

    def way(self, room: frozenset[str], moves: Sequence[str],
            wanted: Callable[[frozenset[str]], bool]) -> list[str]:
        """The admissible ``moves`` to advise from ``room``: the first move of a shortest
        known path to a room ``wanted`` accepts, else to the nearest room with a way not
        tried yet (that way itself when it is here), else every move."""
        paths: dict[frozenset[str], str | None] = {room: None}
        queue = [room]
        for goal in (wanted, lambda r: None in self.exits.get(r, {}).values()):
            for r in queue:
                if goal(r):
                    first = paths[r]
                    if first is None:  # this room: a way not tried yet from here
                        untried = [m for m in moves
                                   if self.exits[room].get(abstract_action(m)) is None]
                        if untried and goal is not wanted:
                            return untried[:1]
                        continue
                    return [m for m in moves if abstract_action(m) == first] or list(moves)
                for move, nxt in self.exits.get(r, {}).items():
                    if nxt is not None and nxt not in paths:
                        paths[nxt] = paths[r] if paths[r] is not None else move
                        queue.append(nxt)
        return list(moves)
