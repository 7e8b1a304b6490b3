"""``put-away``: things that belong somewhere are put there, in any house.

**What.** When the recalled steps take :data:`TIDYING` or more things the goal does not name
and put each in one place of its own, all different ("put iron on ironing board", "insert milk
carton into fridge": a tidying), that place is where the thing belongs in any house. Then a
thing held is put where it belongs as soon as that is admissible; a thing lying anywhere else
is taken (never from where it belongs, nor taken again); what is closed is opened; and the
moves go toward the room seen holding a held thing's place, else toward a way not tried yet
(:mod:`deltamem.agents.guide.rooms`). Knowledge lines that say where a thing belongs (``-
iron: belongs in/on ironing board``, a placement the game scored, written by DeltaMem's
Env-Tree in TextWorld) count as such placements and win over the steps' where they differ.

**Why.** In the Cleaning game the recalled game's route and the other things it handled are
not this house's, so following the procedure step by step cannot reach them; where each thing
belongs carries over. Things the goal names are left to the procedure rules, and the rule
stays idle unless :data:`TIDYING` other things go to as many different places (a household
procedure puts the goal's object; a ScienceWorld one moves its tools, or gathers things in one
box).

**Where.** Every domain's rule set, asked first (a ``recall`` rule); it answers only for a
tidying recall (TextWorld's Cleaning game).
"""

from __future__ import annotations

from typing import ClassVar

from deltamem.agents.guide.actions import IDLE, MOVES, abstract_action, verb
from deltamem.agents.guide.advice import Advice
from deltamem.agents.guide.knowledge import PLACING, TAKING, held_things
from deltamem.agents.guide.rooms import Rooms
from deltamem.agents.guide.rule import Decision, Scope
from deltamem.text import normalise

#: the rule applies when the recall puts at least this many things the goal does not name
#: each in a place of its own, all different: a procedure that moves its tools (a jug to the
#: sink, soil to a flower pot) or gathers things in one box is not a tidying (chosen on the
#: development streams: with 2, ScienceWorld's grow-plant and find-living-thing recalls
#: turned into searches and 7 wins of 54 were lost)
TIDYING = 3


class PutAway:
    """Things that belong somewhere are put there (module doc). Keeps the episode's rooms."""

    name: ClassVar[str] = "put-away"
    scope: ClassVar[Scope] = "recall"

    def __init__(self) -> None:
        self.rooms = Rooms()

    def advise(self, state: Decision) -> Advice | None:
        homes = {thing: place for thing, place in state.homes.items()
                 if not set(thing.split()) & state.goal_words}
        if len(set(homes.values())) < TIDYING:
            return None
        admissible, done = state.admissible, state.done
        puts: list[str] = []
        takes: list[str] = []
        for a in admissible:
            abstract = abstract_action(a)
            m = PLACING.match(abstract)
            if m and homes.get(m.group(1)) == m.group(2):
                puts.append(a)
                continue
            m = TAKING.match(abstract)
            if (m and m.group(1) in homes and m.group(2) != homes[m.group(1)]
                    and normalise(a) not in done):
                takes.append(a)
        here = self.rooms.arrive(admissible, state.taken)
        if puts:
            return Advice(abstract_action(puts[0]), tuple(puts))
        if takes:
            return Advice(abstract_action(takes[0]), tuple(takes))
        # nothing to take or put back here: look inside what is closed, then move on (the
        # recalled route is another house's; a held thing is never put down elsewhere, and
        # nothing is taken from where it belongs): toward where a held thing belongs when
        # that room was seen, else toward a way not tried yet
        opened = [a for a in admissible if abstract_action(a).split()[:1] == ["open"]
                  and normalise(a) not in done]
        if opened:
            return Advice(abstract_action(opened[0]), tuple(opened))
        moves = [a for a in admissible if verb(a) in MOVES]
        if not moves:
            return None
        wanted = {homes[x] for x in held_things(admissible) if x in homes}
        way = self.rooms.way(here, moves, lambda room: bool(room & wanted))
        if len(way) == len(moves) > 1:
            # the house is seen and nothing known is left to do: wander without touching
            # what is in place (the repeat limit may wear the moves out)
            way = [a for a in admissible if a in moves or verb(a) in IDLE]
        return Advice(abstract_action(way[0]), tuple(way))
