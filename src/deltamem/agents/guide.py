"""Making recalled experience reach a small model's choice: recalled steps → concrete actions.

A 135M model shown a whole procedure in its memory block does not follow it; shown
the *next* step right before the action list, it often does (measured in
``docs/results.md``). This module turns any memory system's recall text into that
next step, for the ReAct agent's ``guide`` option (pure text processing, no I/O, no
model). It never reads the current game's solution: only the recall text, the goal,
the admissible actions and the steps taken so far.

1. **Recalled steps** (:func:`recalled_steps`). Every line of the recall text that
   reads as an action, in order: numbering, bullets, ``>`` and ``Action:`` are
   stripped, and a line counts when its first word is the verb of an action the
   environment has offered in this episode (``go``, ``take``, ``heat``, ...), or when
   it is marked as a step (numbered, ``>``, ``Action:``) and holds no ``:``. A marked
   line that heads more-indented marked lines is a sub-goal of a tree (MCMA's plans:
   ``* Heat potato with microwave`` over ``1. go to microwave`` …), not a step.
   Sections and lines about failures are left out (a title or line mentioning
   *fail*, *warn*, *unexplored* or *pitfall*: DeltaMem's failure records,
   ReasoningBank's warnings).
2. **Placeholders filled from the goal** (:func:`goal_bindings`). Lines of the
   recall that read as a goal (DeltaMem's "Tasks of the form: put a hot {A} in {B}",
   Synapse's "Task: put a hot apple in countertop", ReasoningBank's "Strategy for:
   ...") are aligned word by word with the current goal; each differing span of at
   most two words, of equal length on both sides, is bound word for word ({A} →
   tomato, apple → tomato); action verbs are never rewritten. The recalled steps are
   rewritten with them.
3. **Progress** (:meth:`Guide.advise`). A pointer walks the filled steps: an
   action taken that realises the pointed step (or exactly one of the next three,
   skipping only steps that name none of the goal's words) moves it past that step.
   Advice looks ahead too: a later step about the goal realisable right here is
   advised (the recalled game needed a step this one does not), unless it is a
   move ("go ..."), which is admissible from anywhere and so proves nothing.
   A step that picks up a thing already held is done: nothing admissible realises
   "pick up metal pot" and the environment offers "put down metal pot" (the recalled
   game picked it up later than this one did; without this the pointer waits on a
   step that can never be taken here).
4. **Realising a step** (:func:`realises`). An admissible action realises a step
   *exactly* when both read the same with instance numbers dropped ("go to
   microwave" ~ "go to microwave 1"); *loosely* when they share the verb and every
   word that differs is not a word of the current goal ("take tomato from fridge" ~
   "take tomato 1 from countertop 2": where the recalled game's object lay is
   incidental; "put tomato in/on countertop" does not realise "put tomato in/on
   diningtable", since diningtable is in the goal). The place after "from" is
   never pinned by the goal: "take tomato from sinkbasin" is realised by "take
   tomato 1 from diningtable 1" even when this goal puts the tomato in the
   sinkbasin (the recalled game found its object where this one must bring it).
   Exact realisations win when there are any; among loose ones only the nearest (the
   fewest recalled words put aside) are advised. A part of a thing is the same whichever
   way it is named ("anode in battery" / "battery anode").
   **A stand-in keeps its role** (rule 4c): when a taken action realised a step loosely
   by putting one word in place of a recalled one ("connect battery anode to *orange*
   wire terminal 1" for "... to *black* wire terminal"), the rest of the procedure reads
   that word in its place ("connect black wire terminal to cathode in ..." becomes the
   orange wire's), and the word stands in for no other recalled word (the second wire of
   the circuit is not the orange one again). Moves, opening and the place a thing was
   taken from are searches, and bind nothing. Nor does a word of a step already done
   stand in for another (the black wire, here too and used, is not the blue one).
5. **Back-tracking**. When nothing admissible realises the pointed step (the
   object is not where it was in the recalled game), the guide first opens what
   is closed here (an admissible ``open ...`` not taken yet: the object may be
   inside), then goes back to the nearest earlier step that some admissible
   action *not yet taken* realises loosely — "go to fridge" becomes "go to some
   place not visited yet", "open fridge" becomes "open this cabinet" — so the
   recalled approach is retried elsewhere, which is a search. The search goes
   first where the recall saw an object of the goal's kind (knowledge lines
   ``- cup: found in/on cabinet``, or a recalled trajectory's "On the cabinet 2, you
   see a cup 1": "go to cabinet 3" before "go to shelf 1"), then where the
   procedure itself does the blocked step elsewhere (a chain's variants: "take {A}
   from sofa" beside the blocked "take {A} from desk"), then anywhere not visited.
   When no earlier step can be retried here (every cabinet of "go to cabinet" was
   visited), the search goes on to any place not visited yet, in the same order.

7. **Things that belong somewhere** (:func:`placements`; rule 6 is the return to the
   place of a blocked step, :meth:`Guide._return_to_place`). When the recalled steps take
   several things the goal does not name and put each in one place of its own ("put iron
   on ironing board", "insert milk carton into fridge": a tidying, as in the Cleaning game),
   that place is where the thing belongs in any house, while the recalled route and the
   other things the recalled game handled are not this one's. Then, before rules 3--5: a
   thing held is put where it belongs as soon as that is admissible; a thing lying
   anywhere else is taken (never from where it belongs, nor taken again); what is closed
   is opened; and the moves go toward the room seen holding a held thing's place, else
   toward a way not tried yet. Rooms are told apart by what stays in them (what can be
   examined but not taken), and compass moves are known to undo each other. Things the
   goal names are left to rules 3--5, and the rule stays idle unless :data:`TIDYING`
   other things go to as many different places (a household procedure puts the goal's
   object; a ScienceWorld one moves its tools, or gathers things in one box). Knowledge
   lines that say where a thing belongs (:func:`belongings`: ``- iron: belongs in/on
   ironing board``, a placement the game scored, written by DeltaMem's Env-Tree in
   TextWorld) count as such placements and win over the steps' where they differ.

0. **Items, best first** (:func:`procedures`). A recall's items reach the guide as
   items, not as one text: each item that starts a procedure is followed on its own,
   in the order of its system's own score (the prompt order when there is none); a
   ``delta`` item belongs to the chain of the item before it (DeltaMem's root-to-match
   chain, Eq. 7, is one procedure: a delta that edits the chain's steps puts its own
   in their place, :mod:`deltamem.core.residual`), and ``warning`` items are never
   followed (they reach the prompt as text, like insights and lessons that hold no
   steps). The guide follows the best procedure whose next step some admissible action
   realises (rules 3--5) and falls back to the next one when it cannot be realised here. A
   recall without items is one procedure: its text. Knowledge lines (rule 5) are
   read from the whole recall.

:class:`Advice` carries the hint line (for ``guide=hint``) and the admissible
actions that realise the step (for ``guide=prior``: the constrained choice is made
among them, i.e. they get an unbounded bonus over the rest; with none, the model
chooses among all admissible actions as usual).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from itertools import pairwise

from deltamem.core.residual import compose, edits
from deltamem.core.triggers import goal_entities
from deltamem.types import Recall

__all__ = [
    "Advice",
    "Guide",
    "abstract_action",
    "goal_bindings",
    "placements",
    "procedures",
    "realises",
    "recalled_steps",
    "sightings",
    "substitutes",
]

_NUMBER = re.compile(r"(?<=[a-z-])\s+\d+\b")
_LABEL = re.compile(r"(?<=[a-z])\s+[A-Z]\b")  # an instance letter: "unknown substance B"
_PREFIX = re.compile(r"^\s*(?:[-*+>•]\s*|\d+[.)]\s*|action\s*\d*\s*:\s*)+", re.IGNORECASE)
_WORD = re.compile(r"\{[A-Z]\}|[A-Za-z0-9][A-Za-z0-9/'-]*")
_BAD = ("fail", "warn", "unexplored", "pitfall", "no effect")
_STOP_WORDS = (
    "a an the to in on at of for from with and or into onto some it your you is are be "
    "then put place find look get go two one any all under by around"
)
_STOP = frozenset(_STOP_WORDS.split())
LOOKAHEAD = 3
#: rule 7 applies when the recall puts at least this many things the goal does not name each
#: in a place of its own, all different: a procedure that moves its tools (a jug to the sink,
#: soil to a flower pot) or gathers things in one box is not a tidying (chosen on the
#: development streams: with 2, ScienceWorld's grow-plant and find-living-thing recalls
#: turned into searches and 7 wins of 54 were lost)
TIDYING = 3
_INVENTORY = " in inventory"
_MOVES = frozenset({"go", "walk", "teleport"})
_IDLE = frozenset({"look", "inventory", "examine"})  # actions that change nothing
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east",
             "up": "down", "down": "up"}  # compass moves undo each other
#: verbs whose object is where to look (a move, opening a receptacle): realised loosely by
#: another place -- the search; any other verb keeps its direct object (:func:`realises`)
_SEARCHING = _MOVES | {"open"}
_PARTICLES = frozenset({"up", "down", "on", "off", "at", "to"})
_PREPOSITIONS = frozenset({"to", "into", "in", "on", "from", "with", "in/on", "at", "under",
                           "onto", "and"})
#: verbs whose action commits the episode to its object (ScienceWorld's "focus on OBJ":
#: focusing on the wrong object ends the task): realised exactly, never loosely
_COMMITTING = frozenset({"focus"})
# a knowledge line's subject: "- <thing>:" (DeltaMem's Env-Tree), shared by rules 5 and 7
_KNOWN = r"(?:^|\s)[-*]\s*((?:[A-Za-z][\w-]* )*[A-Za-z][\w-]*):\s*"
_FOUND = re.compile(_KNOWN + r"found in/on\s+([A-Za-z][\w -]*?)\s*$", re.MULTILINE)
_SEEN_ON = re.compile(r"\b(?:on|in) the ([a-z][a-z -]*?) \d+, you see ([^.\n]*)", re.IGNORECASE)
_SEEN_IN = re.compile(r"\byou open the ([a-z][a-z -]*?) \d+\.[^\n>]*?in it, you see ([^.\n]*)",
                      re.IGNORECASE)
_LISTED = re.compile(r",\s*|\s+and\s+")
_EXAMPLE = re.compile(r"\{([A-Z])\} = e\.g\. ([A-Za-z][\w -]*?)(?=,\s*\{|\))")


_PLACING = re.compile(r"^(?:put|insert|move) (.+?) (?:on|onto|into|in|to) (.+)$")
_TAKING = re.compile(r"^take (.+?)(?: from (.+))?$")


def placements(steps: Iterable[str]) -> dict[str, str]:
    """Where recalled steps put things (rule 7): ``{thing: place}`` for each thing that the
    steps take (``take X``, ``take X from G``) and that every placing step (``put X on F``,
    ``insert X into F``, ``move X to F``) puts in the same place. A thing only ever moved
    where it is (a ScienceWorld jug to the sink) is a tool of the procedure, and a step
    with a placeholder the goal left unbound names no thing. Kinds are lower case without
    instance numbers."""
    places: dict[str, set[str]] = {}
    taken: set[str] = set()
    for step in steps:
        abstract = abstract_action(step).replace(_INVENTORY, "")
        m = _PLACING.match(abstract)
        if m:
            places.setdefault(m.group(1), set()).add(m.group(2))
        m = _TAKING.match(abstract)
        if m:
            taken.add(m.group(1))
    return {thing: next(iter(p)) for thing, p in places.items()
            if len(p) == 1 and thing in taken  # a thing fetched to be put away
            and "{" not in thing + next(iter(p))}  # no unbound placeholder


_BELONGS = re.compile(_KNOWN + r"belongs in/on\s+([A-Za-z][\w -]*?)\s*(?:\(|$)", re.MULTILINE)


def belongings(text: str) -> dict[str, str]:
    """Where knowledge lines of a recall say things belong (rule 7): ``{thing: place}``
    from ``- iron: belongs in/on ironing board (putting it there scored)`` (DeltaMem's
    Env-Tree in TextWorld: a placement the game scored). Kinds as :func:`placements`."""
    return {abstract_action(m.group(1)): abstract_action(m.group(2))
            for m in _BELONGS.finditer(text)}


def _held_things(admissible: Iterable[str]) -> set[str]:
    """Things the agent holds, read from what it is offered to do with them (put, insert,
    move or drop them)."""
    out: set[str] = set()
    for a in admissible:
        abstract = abstract_action(a)
        m = _PLACING.match(abstract)
        if m:
            out.add(m.group(1))
        elif abstract.startswith("drop "):
            out.add(abstract[5:])
    return out


class _Rooms:
    """The rooms rule 7's search has seen and the moves between them. A room is told apart
    by what stays in it: the things it offers to examine that cannot be taken, put or
    dropped (the furniture). Pure bookkeeping over the admissible actions and the actions
    taken; one per episode (a :class:`Guide`)."""

    def __init__(self) -> None:
        self.exits: dict[frozenset[str], dict[str, frozenset[str] | None]] = {}
        self._last: tuple[frozenset[str], int] | None = None

    def arrive(self, admissible: Sequence[str], taken: Sequence[str]) -> frozenset[str]:
        """The room the admissible actions show; records the move that led here."""
        looks: set[str] = set()
        loose = _held_things(admissible)
        for a in admissible:
            abstract = abstract_action(a)
            if abstract.startswith("examine "):
                looks.add(abstract[8:])
            m = _TAKING.match(abstract)
            if m:
                loose.add(m.group(1))
        room = frozenset(looks - loose)
        ways = self.exits.setdefault(room, {})
        for a in admissible:
            if a.split() and a.split()[0].lower() in _MOVES:
                ways.setdefault(abstract_action(a), None)
        if self._last is not None:
            before, n = self._last
            if (len(taken) == n + 1 and taken[-1].split()
                    and taken[-1].split()[0].lower() in _MOVES and room != before):
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
                words = _NUMBER.sub("", item.strip().lower()).split()
                words = [w for w in words if w not in ("a", "an", "the", "some")]
                if words and words != ["nothing"]:
                    out.append((words[-1], place))
    return out


def _words(text: str) -> list[str]:
    return [w if w.startswith("{") else w.lower() for w in _WORD.findall(text)]


@lru_cache(maxsize=1 << 16)
def abstract_action(action: str) -> str:
    """Lower case, instance numbers and letters dropped ("cabinet 3" → "cabinet", "unknown
    substance B" → "unknown substance"), spaces collapsed. Cached (see :func:`realises`)."""
    text = _LABEL.sub("", " ".join(action.split()))
    return " ".join(_NUMBER.sub("", text.lower()).split())


def _clean_line(line: str) -> str:
    s = _PREFIX.sub("", line.strip()).strip().strip("`'\"").rstrip(".").strip()
    return " ".join(s.split())


def recalled_steps(recall_text: str, verbs: Iterable[str]) -> list[str]:
    """The action-like lines of ``recall_text`` in order (see the module doc, rule 1)."""
    verbs = {v.lower() for v in verbs}
    out: list[str] = []
    skipping = False
    lines = [raw for raw in recall_text.splitlines() if raw.strip()]
    indents = [len(raw) - len(raw.lstrip()) for raw in lines]
    for i, raw in enumerate(lines):
        line = raw.strip()
        if (i + 1 < len(lines) and indents[i + 1] > indents[i] and _PREFIX.match(line)
                and _PREFIX.match(lines[i + 1].strip())):
            continue  # a marked line heading more-indented marked lines: a sub-goal
        low = line.lower()
        if line.startswith(("#", "[")):  # a section title: failure sections are left out
            skipping = any(b in low for b in _BAD)
            if line.startswith("#"):
                continue
        if skipping or any(b in low for b in _BAD):
            continue
        if low.startswith("procedure:"):
            line = line.split(":", 1)[1]
        marked = bool(_PREFIX.match(line)) and ":" not in _PREFIX.sub("", line, count=1)
        step = _clean_line(line)
        words = step.split()
        if not words or len(words) > 12:
            continue
        if words[0].lower() in verbs or (marked and words[0].isalpha() and len(words) > 1):
            out.append(step)
    return out


def _goal_candidates(recall_text: str) -> list[list[str]]:
    """Word lists of every line and of each part after a colon, cut at `` (`` / `` --``."""
    out = []
    for raw in recall_text.splitlines():
        line = raw.strip().lstrip("#").strip()
        if not line or any(b in line.lower() for b in _BAD):
            continue
        parts = line.split(":")
        for i in range(len(parts)):
            text = ":".join(parts[i:])
            text = re.split(r"\s\(|\s--", text, maxsplit=1)[0]
            words = _words(text)
            if words:
                out.append(words)
    return out


def goal_bindings(recall_text: str, goal: str, verbs: Iterable[str] = (),
                  compounds: Iterable[str] = ()) -> dict[str, str]:
    """Substitutions from recalled-goal words to current-goal words (module doc, rule 2).

    Differing spans are bound word for word (spans of equal length only); a recalled word
    that is an action verb (``verbs``: "cool", "heat") is never rewritten, so a recalled
    procedure of another task type keeps its own actions. A placeholder facing two words
    takes the last one ({A} = "cool tomato": the head noun), or both when they are one of
    ``compounds`` (names of several words the environment uses: "living room"); a run of
    placeholders facing fewer words takes them in order, the rest nothing ("{C} {D}" =
    "living room" in the recalled goal, "bedroom" here).
    """
    target = _words(goal)
    if not target:
        return {}
    verbs = {v.lower() for v in verbs}
    compounds = {c.lower() for c in compounds}
    found: dict[str, str] = {}
    for cand in _goal_candidates(recall_text):
        if not cand or abs(len(cand) - len(target)) > 3:
            continue
        sm = SequenceMatcher(None, cand, target, autojunk=False)
        if sm.ratio() < 0.5:
            continue
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if (tag == "replace" and i2 - i1 == 1 and cand[i1].startswith("{")
                    and j2 - j1 == 2):  # {A} = "cool tomato": the head noun comes last
                pair = " ".join(target[j1:j2])
                found.setdefault(cand[i1], pair if pair in compounds else target[j2 - 1])
                continue
            if (tag == "replace" and 0 < j2 - j1 < i2 - i1 <= 3
                    and all(w.startswith("{") for w in cand[i1:i2])):
                for n, src in enumerate(cand[i1:i2]):
                    found.setdefault(src, target[j1 + n] if j1 + n < j2 else "")
                continue
            if (tag == "replace" and i2 - i1 == j2 - j1 <= 4
                    and all(w.startswith("{") for w in cand[i1:i2])):
                # a run of placeholders facing as many words ("turn on the {A} {B} {C}",
                # "turn on the blue light bulb"): each takes its word
                for src, dst in zip(cand[i1:i2], target[j1:j2], strict=True):
                    found.setdefault(src, dst)
                continue
            if tag != "replace" or i2 - i1 != j2 - j1 or i2 - i1 > 2:
                continue
            for src, dst in zip(cand[i1:i2], target[j1:j2], strict=True):
                if src in _STOP or dst in _STOP or src in verbs:
                    continue
                found.setdefault(src, dst)
    return found


def _fill(step: str, bindings: dict[str, str]) -> str:
    out = step
    for src, dst in sorted(bindings.items(), key=lambda kv: -len(kv[0])):
        if src.startswith("{"):
            out = out.replace(src, dst).replace(src.lower(), dst)
        else:
            out = re.sub(rf"(?<![\w-]){re.escape(src)}(?![\w-])", dst, out, flags=re.IGNORECASE)
    return " ".join(out.split())  # a placeholder bound to nothing leaves no gap


def _destination(words: list[str]) -> list[str] | None:
    """The place a move goes to ("teleport to art studio" → ``["art", "studio"]``)."""
    if not words or words[0] not in _MOVES:
        return None
    rest = words[1:]
    return rest[1:] if rest[:1] == ["to"] else rest


def _direct_object(words: list[str]) -> list[str]:
    """The words of what an action handles: after the verb (and its particle: "pick *up*",
    "focus *on*") up to the first preposition ("take *tomato* from fridge", "use
    *thermometer* in inventory on water")."""
    rest = words[1:]
    if rest[:1] and rest[0] in _PARTICLES:
        rest = rest[1:]
    out = []
    for w in rest:
        if w in _PREPOSITIONS:
            break
        out.append(w)
    return out


@lru_cache(maxsize=1 << 16)
def realises(action: str, step: str, goal_words: frozenset[str]) -> str | None:
    """How ``action`` realises ``step``: ``"exact"``, ``"loose"`` or ``None`` (rule 4).

    A pure function of its arguments, cached: ScienceWorld offers 500-3,000 actions a step
    and the guide compares each with a few steps at every decision, mostly the same pairs
    as at the last one (the recalled steps stay, most actions stay).

    A part of a thing may be named either way ("anode in battery" / "battery anode",
    "terminal 1 in yellow wire" / "yellow wire terminal 1": ScienceWorld lists the first
    where a demonstration typed the second); when the texts as given do not match, both
    are compared with every part named the second way (:func:`part_names`)."""
    how = _realises(action, step, goal_words)
    if how is None:
        a, s = part_names(abstract_action(action)), part_names(abstract_action(step))
        if (a, s) != (abstract_action(action), abstract_action(step)):
            how = _realises(a, s, goal_words)
    return how


@lru_cache(maxsize=1 << 16)
def part_names(text: str) -> str:
    """``text`` with each part of a thing named as "<thing> <part>": a one-word noun right
    after the verb (or its particle, or a preposition), followed by ``in`` and the thing's
    words up to the next preposition ("connect anode in battery to cathode in electric
    motor" → "connect battery anode to electric motor cathode"). Only a bare one-word
    noun is moved, so "pour cup containing red paint in art studio" stays as it is."""
    words = text.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        boundary = i == 1 or (i >= 2 and words[i - 1] in _PARTICLES | _PREPOSITIONS)
        if (boundary and i + 2 < len(words) and words[i + 1] == "in"
                and w not in _PREPOSITIONS and words[i + 2] not in _PREPOSITIONS):
            end = i + 2
            while end < len(words) and words[end] not in _PREPOSITIONS:
                end += 1
            out += [*words[i + 2:end], w]
            i = end
            continue
        out.append(w)
        i += 1
    return " ".join(out)


def _realises(action: str, step: str, goal_words: frozenset[str]) -> str | None:
    a, s = abstract_action(action), abstract_action(step)
    if a == s:
        return "exact"
    if _INVENTORY in s or _INVENTORY in a:
        # "focus on thermometer in inventory" is "focus on thermometer": where a carried
        # thing is, is said only when another thing has its name
        a, s = a.replace(_INVENTORY, ""), s.replace(_INVENTORY, "")
        if a == s:
            return "exact"
    aw, sw = a.split(), s.split()
    if not aw or not sw:
        return None
    if _qualified(aw, sw) or _qualified(sw, aw):
        return "exact"
    if aw[0] != sw[0] and aw[0] in _MOVES and sw[0] in _MOVES:
        # moves are one step whatever the way: "teleport to kitchen" realises "go to kitchen"
        aw, sw = ["go", *(_destination(aw) or [])], ["go", *(_destination(sw) or [])]
        if aw == sw:
            return "exact"
    if aw[0] != sw[0] or sw[0] in _COMMITTING:
        return None
    if sw[0] not in _SEARCHING and _direct_object(sw) != _direct_object(aw):
        return None  # "pick up thermometer" is not "pick up bee": the thing handled matters
    # where a thing is taken from ("take {A} from sinkbasin") is where the recalled game found
    # it, never part of the goal: a goal word there (this goal's destination is that game's
    # source) does not pin the place
    fs = sw.index("from") if "from" in sw[1:] else len(sw)
    fa = aw.index("from") if "from" in aw[1:] else len(aw)
    sm = SequenceMatcher(None, sw, aw, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        changed = set(sw[i1:i2]) | set(aw[j1:j2])
        pinned = changed & goal_words if (i1 <= fs or j1 <= fa) else set()
        if not changed or pinned or i2 - i1 > 3 or j2 - j1 > 3:
            return None
        if tag != "replace" or (i2 - i1 != j2 - j1 and sw[0] not in _MOVES):
            # a word added or dropped changes what the action does ("move X to metal pot"
            # is not "move X to bathroom"); a move may go to a place of another length
            return None
    return "loose"


def _qualified(longer: list[str], shorter: list[str]) -> bool:
    """``longer`` is ``shorter`` with its thing's place said: one span ``in <place>``
    inserted right after a word and followed by a preposition or the end ("focus on soap
    *in kitchen*", "move soap *in table* to metal pot"): ScienceWorld names where a thing
    is when two things share its name, so the place only tells them apart."""
    if len(longer) - len(shorter) not in (2, 3, 4) or longer[0] != shorter[0]:
        return False
    for i in range(1, len(shorter) + 1):
        if longer[:i] != shorter[:i]:
            return False
        n = len(longer) - len(shorter)
        if (longer[i] == "in" and longer[i + n:] == shorter[i:]
                and (i == len(shorter) or shorter[i] in _PREPOSITIONS)
                and not set(longer[i + 1:i + n]) & _PREPOSITIONS):
            return True
    return False


def _mentions(action: str, places: Iterable[str]) -> bool:
    """Whether ``action`` names one of ``places`` after its verb, a name of several words
    ("art studio") as a whole."""
    rest = f" {' '.join(abstract_action(action).split()[1:])} "
    return any(f" {p} " in rest for p in places if p)


def _head(words: list[str]) -> tuple[list[str], list[str]]:
    """An action's verb with its particle, and the rest ("pick up" | "egg turtle")."""
    n = 2 if len(words) > 1 and words[1] in _PARTICLES else 1
    return words[:n], words[n:]


def substitutes(action: str, step: str, goal_words: frozenset[str]) -> bool:
    """Whether ``action`` does ``step`` to another thing of the same kind (rule 4b): the
    same verb and the same rest, a direct object that shares a word with the step's
    ("focus on egg turtle" for "focus on egg parrot"; "move egg turtle to green box" for
    "move egg parrot egg in inventory to green box"), and no goal word in either object
    (a thing the goal names is never replaced). The guide uses it only for a step whose
    thing occurs in no action offered in this episode (:meth:`Guide.absent`): the
    recalled variation's instance of a kind the goal does not name."""
    a, s = abstract_action(action), abstract_action(step)
    a, s = a.replace(_INVENTORY, ""), s.replace(_INVENTORY, "")
    (va, ra), (vs, rs) = _head(a.split()), _head(s.split())
    if va != vs or not ra or not rs:
        return False
    ao, so = _direct_object(["", *ra]), _direct_object(["", *rs])
    if not ao or not so or ao == so or (set(ao) | set(so)) & goal_words:
        return False
    if not (set(ao) & set(so)) - _STOP:
        return False
    return ra[len(ao):] == rs[len(so):]


def _replaced(action: str, step: str) -> list[tuple[str, str]]:
    """The recalled words ``action`` puts other words in place of, one for one, where it
    realises ``step`` loosely ("connect battery anode to *orange* wire terminal 1" for
    "... to *black* wire terminal": black → orange). Moves and opening are searches and the
    place a thing is taken from is where the recalled game found it: neither says what
    stands in for what, so they give none (rule 4c)."""
    a, s = part_names(abstract_action(action)).split(), part_names(abstract_action(step)).split()
    if not a or not s or s[0] in _SEARCHING:
        return []
    cut = s.index("from") if "from" in s[1:] else len(s)
    out = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, s, a, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1 and i2 <= cut:
            out += [(x, y) for x, y in zip(s[i1:i2], a[j1:j2], strict=True)
                    if x not in _STOP and y not in _STOP and not x.startswith("{")]
    return out


def _swap(step: str, subs: dict[str, str]) -> str:
    """``step`` with each recalled word of ``subs`` replaced by what stands in for it,
    in one pass (rule 4c)."""
    if not subs:
        return step
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in subs) + r")(?![\w-])",
                         re.IGNORECASE)
    return pattern.sub(lambda m: subs.get(m.group(1).lower(), m.group(1)), step)


def _compounds(actions: Iterable[str], verbs: set[str]) -> frozenset[str]:
    """Two-word names the actions use ("teleport to living room" → "living room"): word
    pairs after the verb whose first word is no verb, particle or preposition."""
    out: set[str] = set()
    skip = verbs | _PARTICLES | _PREPOSITIONS | _STOP
    for a in actions:
        words = abstract_action(a).split()[1:]
        for x, y in pairwise(words):
            if x not in skip and y not in skip and x.isalpha() and y.isalpha():
                out.add(f"{x} {y}")
    return frozenset(out)


def procedures(recall: Recall | str) -> list[str]:
    """The texts the guide may follow, best first (module doc, rule 0)."""
    return ["\n".join(parts) for parts in _procedure_items(recall)]


def _procedure_items(recall: Recall | str) -> list[list[str]]:
    """Each procedure of :func:`procedures` as its items' texts (a chain: base, deltas)."""
    if isinstance(recall, str):
        return [[recall]] if recall.strip() else []
    if not recall.items:
        return [[recall.text]] if recall.text.strip() else []
    units: list[tuple[float, int, list[str]]] = []
    last_source: str | None = None
    for n, item in enumerate(recall.items):
        if item.role == "warning":
            continue
        score = -math.inf if item.score is None else float(item.score)
        if item.role == "delta" and units and item.source == last_source:
            best, first, texts = units[-1]
            units[-1] = (max(best, score), first, [*texts, item.text])
        else:
            units.append((score, n, [item.text]))
            last_source = item.source
    units.sort(key=lambda u: (-u[0], u[1]))
    return [texts for _, _, texts in units if any(t.strip() for t in texts)]


@dataclass(frozen=True)
class Advice:
    """What the guide says before one decision.

    Attributes:
        step: the recalled step aimed at (filled), or ``None`` when there is none.
        actions: the admissible actions that realise it (empty: no advice).
        backtrack: the step aimed at is an earlier one, retried elsewhere (rule 5).
        blocked: the pointed step, when it cannot be done here (back-tracking).
    """

    step: str | None
    actions: tuple[str, ...] = ()
    backtrack: bool = False
    blocked: str | None = None

    @property
    def hint(self) -> str | None:
        """The one-line hint shown right before the action list (``None``: nothing to say)."""
        if self.step is None or not self.actions:
            return None
        shown = self.actions[0] if len(self.actions) == 1 else self.step
        if self.backtrack:
            return (f"From memory: the next step ({self.blocked}) is not possible here; "
                    f"redo an earlier step elsewhere: {shown}")
        return f"From memory, the next step: {shown}"


class Guide:
    """The recalled procedures of one episode, followed against the actions taken.

    ``recall``: the memory's :class:`~deltamem.types.Recall` (its items are the
    procedures, rule 0) or a recall text (one procedure).
    """

    def __init__(self, recall: Recall | str, goal: str) -> None:
        self.recall_text = recall if isinstance(recall, str) else recall.text
        self._items = {"\n".join(parts): parts for parts in _procedure_items(recall)}
        self.procedures = list(self._items)
        self.compounds: frozenset[str] = frozenset()
        self.goal = goal
        self.goal_words = frozenset(w for w in _words(goal) if w not in _STOP)
        entities = goal_entities(goal)
        self.goal_object = entities[0] if entities else None
        self._seen: frozenset[str] = frozenset()  # every action offered so far, abstracted
        self._absent_for: frozenset[str] | None = None  # the _seen that _absent answers for
        self._absent: dict[str, bool] = {}
        self._subs: dict[str, str] = {}  # rule 4c, set by _walk
        self._named: frozenset[str] = frozenset()  # words of the steps done (rule 4c)
        self._rooms = _Rooms()  # rule 7's search
        self._belongs = belongings(self.recall_text)  # rule 7: knowledge lines

    def absent(self, step: str) -> bool:
        """Whether the thing ``step`` handles occurs in no action offered so far in this
        episode (rule 4b: then another thing of its kind may stand in for it)."""
        _, rest = _head(abstract_action(step).replace(_INVENTORY, "").split())
        thing = " ".join(_direct_object(["", *rest]))
        if not thing or not self._seen:
            return False
        if self._absent_for is not self._seen:  # answers hold while the offers stay
            self._absent_for, self._absent = self._seen, {}
        if thing not in self._absent:
            pattern = re.compile(rf"(?<![\w-]){re.escape(thing)}(?![\w-])")
            self._absent[thing] = not any(pattern.search(a) for a in self._seen)
        return self._absent[thing]

    def known_places(self) -> frozenset[str]:
        """Kinds of places where the recall says an object of the goal's kind was found
        (rule 5): knowledge lines (``- <object>: found in/on <place>``) and the
        observations of recalled trajectories alike (:func:`sightings`)."""
        return frozenset(place for obj, place in sightings(self.recall_text)
                         if obj in self.goal_words)

    def bindings(self, verbs: Iterable[str], text: str | None = None) -> dict[str, str]:
        """The substitutions of rule 2 (``verbs``: the action verbs seen so far) read
        from ``text`` (default: the best procedure)."""
        if text is None:
            text = self.procedures[0] if self.procedures else ""
        return goal_bindings(text, self.goal, verbs, self.compounds)

    def steps(self, verbs: Iterable[str], text: str | None = None) -> list[str]:
        """The recalled steps (rule 1) of ``text`` (default: the best procedure) with the
        goal's words filled in (rule 2). Each item of a chain is filled with the bindings
        of its own goal line first (a delta's placeholders need not be the base's: the
        base's {C} {D} was "living room", the delta's {C} "bedroom"), then the chain's."""
        if text is None:
            text = self.procedures[0] if self.procedures else ""
        verbs = set(verbs)
        parts = self._items.get(text, [text])
        raws = [recalled_steps(part, verbs) for part in parts]
        recalled_verbs = verbs | {s.split()[0].lower() for raw in raws for s in raw}
        chain = self.bindings(recalled_verbs, text)
        if len(parts) == 1:
            return [self._examples(_fill(s, chain), text) for s in raws[0]]
        groups = [edits(part) if n else None for n, part in enumerate(parts)]
        for g in groups:  # an edits delta's steps are read as any other step line is
            for n, e in enumerate(g or ()):
                g[n] = e._replace(steps=tuple(
                    x for s in e.steps for x in recalled_steps(f"1. {s}", recalled_verbs)))
        own = [goal_bindings(part, self.goal, recalled_verbs, self.compounds) for part in parts]
        return [self._examples(_fill(s, {**chain, **own[n]}), text)
                for n, s in compose(list(zip(groups, raws, strict=True)))]

    def _examples(self, step: str, text: str) -> str:
        """``step`` with a placeholder the goal left unbound filled by its recorded example
        value (rule 2b: "({E} = e.g. coin)" in the trigger), when that value names a thing in
        an action offered in this episode (the same thing is here) and the step is not a
        move (a recalled route is not this game's). A goal paraphrased by the game's text
        generator ("take a trip east ... lift the coin" vs "go east ... take the coin")
        cannot be aligned word by word, and "take {E}" could then never be realised."""
        if "{" not in step or step.split()[0].lower() in _MOVES:
            return step
        for ph, value in _EXAMPLE.findall(text):
            value = " ".join(value.lower().split())
            if f"{{{ph}}}" in step and any(f" {value} " in f" {a} " for a in self._seen):
                step = step.replace(f"{{{ph}}}", value)
        return step

    def advise(self, admissible: Sequence[str], taken: Sequence[str],
               offered: Iterable[str] = (), refused: Iterable[str] = ()) -> Advice:
        """Advice for the next decision: that of the best procedure with a step realisable
        here (rule 0); the best procedure's (without actions) when none has one.

        Args:
            admissible: the actions admissible now.
            taken: the valid actions taken so far in this episode, in order.
            offered: every action the environment has offered in this episode (their
                first words are the verbs that make a recall line a step).
            refused: actions the environment refused in this episode although it listed
                them (ScienceWorld lists some it cannot parse). They are left out of the
                advice unless every advised action was refused: advising one again only
                repeats the refusal to the step cap.
        """
        advice = self._advise(admissible, taken, offered)
        refused = {" ".join(a.lower().split()) for a in refused}
        kept = tuple(a for a in advice.actions if " ".join(a.lower().split()) not in refused)
        if kept and len(kept) < len(advice.actions):
            return Advice(advice.step, kept, advice.backtrack, advice.blocked)
        return advice

    def _advise(self, admissible: Sequence[str], taken: Sequence[str],
                offered: Iterable[str]) -> Advice:
        verbs = {a.split()[0].lower() for a in (*offered, *admissible) if a.split()}
        self.compounds = _compounds((*offered, *admissible), verbs)
        self._seen = frozenset(abstract_action(a) for a in (*offered, *admissible))
        filled = [(text, self.steps(verbs, text)) for text in self.procedures]
        homes = placements(s for _, steps in filled for s in steps)
        homes.update(self._belongs)
        back = self._put_back(homes, admissible, taken)
        if back is not None:
            return back
        first: Advice | None = None
        for _text, steps in filled:
            if not steps:
                continue
            advice = self._advise_steps(steps, admissible, taken)
            if advice.actions:
                return advice
            first = first or advice
        return first or Advice(None)

    def _put_back(self, homes: dict[str, str], admissible: Sequence[str],
                  taken: Sequence[str]) -> Advice | None:
        """Rule 7, things that belong somewhere: when the recall takes :data:`TIDYING` or
        more things the goal does not name and puts each in a place of its own, all different (a
        tidying: "put iron on ironing board", "insert milk carton into fridge"), that place
        is where the thing belongs, in any house. A thing held is put where it belongs as
        soon as that is admissible; a thing lying anywhere else is taken (never from where
        it belongs, and not again after it was taken once). The recalled game's route and
        the other things it handled are not this game's, so rules 3--5 could not reach
        them."""
        homes = {thing: place for thing, place in homes.items()
                 if not set(thing.split()) & self.goal_words}
        if len(set(homes.values())) < TIDYING:
            return None
        done = {" ".join(a.lower().split()) for a in taken}
        puts: list[str] = []
        takes: list[str] = []
        for a in admissible:
            abstract = abstract_action(a)
            m = _PLACING.match(abstract)
            if m and homes.get(m.group(1)) == m.group(2):
                puts.append(a)
                continue
            m = _TAKING.match(abstract)
            if (m and m.group(1) in homes and m.group(2) != homes[m.group(1)]
                    and " ".join(a.lower().split()) not in done):
                takes.append(a)
        here = self._rooms.arrive(admissible, taken)
        if puts:
            return Advice(abstract_action(puts[0]), tuple(puts))
        if takes:
            return Advice(abstract_action(takes[0]), tuple(takes))
        # nothing to take or put back here: look inside what is closed, then move on (the
        # recalled route is another house's; a held thing is never put down elsewhere, and
        # nothing is taken from where it belongs): toward where a held thing belongs when
        # that room was seen, else toward a way not tried yet
        opened = [a for a in admissible if abstract_action(a).split()[:1] == ["open"]
                  and " ".join(a.lower().split()) not in done]
        if opened:
            return Advice(abstract_action(opened[0]), tuple(opened))
        moves = [a for a in admissible if a.split() and a.split()[0].lower() in _MOVES]
        if not moves:
            return None
        wanted = {homes[x] for x in _held_things(admissible) if x in homes}
        way = self._rooms.way(here, moves, lambda room: bool(room & wanted))
        if len(way) == len(moves) > 1:
            # the house is seen and nothing known is left to do: wander without touching
            # what is in place (the repeat limit may wear the moves out)
            way = [a for a in admissible
                   if a in moves or (a.split() and a.split()[0].lower() in _IDLE)]
        return Advice(abstract_action(way[0]), tuple(way))

    def _advise_steps(self, steps: list[str], admissible: Sequence[str],
                      taken: Sequence[str]) -> Advice:
        """Rules 3--5 for one procedure's filled ``steps``."""
        k = self._progress(steps, taken)
        steps = [*steps[:k], *(_swap(s, self._subs) for s in steps[k:])]
        self._named = frozenset(w for s in steps[:k] for w in abstract_action(s).split())
        while k < len(steps) and self._held(steps[k], admissible):
            k += 1  # "pick up X" with X already held: done (rule 3)
        if k >= len(steps):
            return Advice(None)
        done = {" ".join(a.lower().split()) for a in taken}
        exact, loose = self._realisations(steps[k], admissible)
        if exact:
            return Advice(steps[k], tuple(exact))
        if loose:
            if steps[k].split()[0].lower() in _MOVES:
                # the recalled place is not here: a place not visited yet first
                loose = [a for a in loose if " ".join(a.lower().split()) not in done] or loose
            return Advice(steps[k], tuple(loose))
        for j in range(k + 1, min(k + 1 + LOOKAHEAD, len(steps))):
            # a later goal step is right here (the recalled game needed e.g. an "open" that
            # this one does not): skip to it -- unless it is a move: "go to countertop 1" is
            # admissible from anywhere, so it proves nothing about the skipped steps (going
            # to the goal's receptacle before taking the object is no progress) -- and never
            # past a step about the goal's own objects (using the lamp does not make taking
            # the object unnecessary)
            if self.goal_object and self.goal_object in _words(steps[j - 1]):
                break
            if steps[j].split()[0].lower() in _MOVES:
                continue
            exact, _ = self._realisations(steps[j], admissible)
            # once taken, a looked-ahead step is not advised again: the pointer stays at
            # the step it skipped (using the lamp is still to do after taking the object),
            # and a repeatable step ("focus on X") would otherwise be advised to the cap
            exact = [a for a in exact if " ".join(a.lower().split()) not in done]
            if exact and set(_words(steps[j])) & self.goal_words:
                return Advice(steps[j], tuple(exact))
        back = self._return_to_place(steps, k, admissible, taken)
        if back is not None:
            return back
        opened = [a for a in admissible if a.split() and a.split()[0].lower() == "open"
                  and " ".join(a.lower().split()) not in done]
        if opened and k > 0:
            # the step cannot be done here: look inside what is closed here before moving on
            return Advice(steps[k], tuple(opened), backtrack=True, blocked=steps[k])
        known = self.known_places()
        other = self.alternative_places(steps, k) - known
        for j in range(k - 1, -1, -1):
            exact, loose = self._realisations(steps[j], admissible)
            fresh = [a for a in (*exact, *loose) if " ".join(a.lower().split()) not in done]
            if fresh:
                for places in (known, other):
                    liked = [a for a in fresh if _mentions(a, places)]
                    if liked:
                        return Advice(steps[j], tuple(liked), backtrack=True,
                                      blocked=steps[k])
                return Advice(steps[j], tuple(fresh), backtrack=True, blocked=steps[k])
        # nothing earlier can be retried here (e.g. every cabinet was searched, and the
        # places of another kind do not realise "go to cabinet" since cabinet is the goal's
        # destination): keep searching anywhere not visited yet
        moves = [a for a in admissible if a.split() and a.split()[0].lower() in _MOVES
                 and " ".join(a.lower().split()) not in done]
        for places in (known, other):
            liked = [a for a in moves if _mentions(a, places)]
            if liked:
                return Advice(steps[k], tuple(liked), backtrack=True, blocked=steps[k])
        if moves:
            return Advice(steps[k], tuple(moves), backtrack=True, blocked=steps[k])
        return Advice(steps[k])

    def alternative_places(self, steps: Sequence[str], k: int) -> frozenset[str]:
        """Places where the procedure itself does the blocked step ``steps[k]`` elsewhere
        (rule 5): other steps with the same verb and the same goal words, e.g. "take
        apple from sofa" beside "take apple from desk" -- the variants a chain's deltas
        recorded (DeltaMem's residual successes found the object there)."""
        blocked = _words(steps[k])
        if not blocked:
            return frozenset()
        mine = set(blocked) & self.goal_words
        if not mine:
            return frozenset()
        out: set[str] = set()
        for j, step in enumerate(steps):
            words = _words(step)
            if (j == k or not words or words[0] != blocked[0]
                    or set(words) & self.goal_words != mine):
                continue
            out.update(w for w in words[1:] if w not in blocked and w not in _STOP
                       and w[0].isalpha())
        return frozenset(out)

    def _return_to_place(self, steps: list[str], k: int, admissible: Sequence[str],
                         taken: Sequence[str]) -> Advice | None:
        """Back to where the procedure does the blocked ``steps[k]`` (rule 6): the place of
        the last move before it, when the agent is not there now and has not been there
        since it reached ``steps[k]`` (a search took it elsewhere, e.g. to find the
        substance, and the stove is where the recalled game used it)."""
        m = next((j for j in range(k - 1, -1, -1)
                  if steps[j].split() and steps[j].split()[0].lower() in _MOVES), None)
        if m is None:
            return None
        exact, _ = self._realisations(steps[m], admissible)
        if not exact:
            return None
        since = self._reached_at(steps, taken, k)
        moves = [i for i, a in enumerate(taken) if a.split() and a.split()[0].lower() in _MOVES]
        here = [i for i in moves if i < since]
        visits = ([here[-1]] if here else []) + [i for i in moves if i >= since]
        if any(realises(taken[i], steps[m], self.goal_words) == "exact" for i in visits):
            return None
        return Advice(steps[m], tuple(exact), backtrack=True, blocked=steps[k])

    def _reached_at(self, steps: list[str], taken: Sequence[str], k: int) -> int:
        """The index in ``taken`` of the action after which the pointer reached ``k``
        (``len(taken)`` when it never did)."""
        return self._walk(steps, taken)[1].get(k, len(taken))

    def _progress(self, steps: list[str], taken: Sequence[str]) -> int:
        return self._walk(steps, taken)[0]

    def _walk(self, steps: list[str], taken: Sequence[str]) -> tuple[int, dict[int, int]]:
        """The pointer after ``taken`` (rule 3), and for each value it took, the index of
        the action that moved it there (0 for the start). Sets :attr:`_subs`, the words
        the loose realisations taken so far put in place of recalled ones (rule 4c)."""
        k = 0
        reached = {0: 0}
        subs: dict[str, str] = {}
        for n, action in enumerate(taken):
            for j in range(k, min(k + 1 + LOOKAHEAD, len(steps))):
                if j > k and set(_words(steps[j - 1])) & self.goal_words:
                    break  # a step about the goal's own objects is never skipped
                step = _swap(steps[j], subs)
                how = realises(action, step, self.goal_words)
                if (how is None and j == k and self.absent(step)
                        and substitutes(action, step, self.goal_words)):
                    how = "loose"
                if how == "exact" or (how == "loose" and j == k):
                    if how == "loose":
                        for src, dst in _replaced(action, step):
                            if src not in subs and dst not in subs.values():
                                subs[src] = dst
                    k = j + 1
                    reached[k] = n
                    break
        self._subs = subs
        return k, reached

    def _held(self, step: str, admissible: Sequence[str]) -> bool:
        """Whether ``step`` picks up a thing the agent already holds: nothing admissible
        realises it and the environment offers to put that thing down."""
        verb, thing = _head(abstract_action(step).replace(_INVENTORY, "").split())
        if verb != ["pick", "up"] or not thing:
            return False
        if any(realises(a, step, self.goal_words) for a in admissible):
            return False
        down = "put down " + " ".join(thing)
        return any(abstract_action(a) == down for a in admissible)

    def _realisations(self, step: str, admissible: Sequence[str]) -> tuple[list[str], list[str]]:
        exact: list[str] = []
        loose: list[str] = []
        for a in admissible:
            how = realises(a, step, self.goal_words)
            if how == "exact":
                exact.append(a)
            elif how == "loose":
                loose.append(a)
        if not exact and not loose and self.absent(step):
            loose = [a for a in admissible if substitutes(a, step, self.goal_words)]
        if len(loose) > 1 and step.split()[0].lower() not in _MOVES:
            # the nearest only: the fewest recalled words put aside ("... to orange wire
            # terminal 1" for "... to black wire terminal", not "... to anode in nuclear
            # generator"; a whole name may still go when nothing nearer is here: "move ice
            # cream to glass jar" for "... to metal pot"); moves keep the search's own order
            far = {a: len(_replaced(a, step)) or len(step.split()) for a in loose}
            loose = [a for a in loose if far[a] == min(far.values())]
        if loose:
            # a word that already stands in for another recalled word, or that a step
            # already done names, stands in for no other (rule 4c): the second wire of a
            # circuit is not the first one again
            owner = {dst: src for src, dst in self._subs.items()}
            owner.update((w, w) for w in self._named if w not in owner)
            loose = [a for a in loose
                     if all(owner.get(dst, src) == src for src, dst in _replaced(a, step))]
        return exact, loose
