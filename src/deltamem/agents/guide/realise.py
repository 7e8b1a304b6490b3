"""Realising a recalled step: which admissible actions do it, exactly or loosely.

An admissible action realises a step *exactly* when both read the same with instance
numbers dropped ("go to microwave" ~ "go to microwave 1"); *loosely* when they share the
verb and every word that differs is not a word of the current goal ("take tomato from
fridge" ~ "take tomato 1 from countertop 2": where the recalled game's object lay is
incidental; "put tomato in/on countertop" does not realise "put tomato in/on diningtable",
since diningtable is in the goal). The place after "from" is never pinned by the goal: "take
tomato from sinkbasin" is realised by "take tomato 1 from diningtable 1" even when this goal
puts the tomato in the sinkbasin (the recalled game found its object where this one must
bring it). Exact realisations win when there are any; among loose ones only the nearest (the
fewest recalled words put aside) are advised. A part of a thing is the same whichever way it
is named ("anode in battery" / "battery anode": ScienceWorld's circuits).

**A stand-in for an absent thing** (:func:`substitutes`): a step whose thing occurs in no
action offered in this episode (the recalled variation's instance of a kind the goal does not
name) is realised by the same action on another thing sharing a word of its name ("focus on
egg turtle" for "focus on egg parrot").

**A stand-in keeps its role** (:func:`replaced`, :func:`swap`): when a taken action realised a
step loosely by putting one word in place of a recalled one ("connect battery anode to
*orange* wire terminal 1" for "... to *black* wire terminal"), the rest of the procedure reads
that word in its place ("connect black wire terminal to cathode in ..." becomes the orange
wire's), and the word stands in for no other recalled word (the second wire of the circuit is
not the orange one again). Moves, opening and the place a thing was taken from are searches,
and bind nothing. Nor does a word of a step already done stand in for another (the black
wire, here too and used, is not the blue one).

A committing step (ScienceWorld's "focus on OBJ": focusing on the wrong object ends the task)
is realised exactly or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from functools import lru_cache

from deltamem.agents.guide.actions import (
    COMMITTING,
    INVENTORY,
    MOVES,
    PARTICLES,
    PREPOSITIONS,
    SEARCHING,
    STOP,
    abstract_action,
    destination,
    direct_object,
    head,
    verb,
)


@lru_cache(maxsize=1 << 16)
def realises(action: str, step: str, goal_words: frozenset[str]) -> str | None:
    """How ``action`` realises ``step``: ``"exact"``, ``"loose"`` or ``None`` (module doc).

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
        boundary = i == 1 or (i >= 2 and words[i - 1] in PARTICLES | PREPOSITIONS)
        if (boundary and i + 2 < len(words) and words[i + 1] == "in"
                and w not in PREPOSITIONS and words[i + 2] not in PREPOSITIONS):
            end = i + 2
            while end < len(words) and words[end] not in PREPOSITIONS:
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
    if INVENTORY in s or INVENTORY in a:
        # "focus on thermometer in inventory" is "focus on thermometer": where a carried
        # thing is, is said only when another thing has its name
        a, s = a.replace(INVENTORY, ""), s.replace(INVENTORY, "")
        if a == s:
            return "exact"
    aw, sw = a.split(), s.split()
    if not aw or not sw:
        return None
    if _qualified(aw, sw) or _qualified(sw, aw):
        return "exact"
    if aw[0] != sw[0] and aw[0] in MOVES and sw[0] in MOVES:
        # moves are one step whatever the way: "teleport to kitchen" realises "go to kitchen"
        aw, sw = ["go", *(destination(aw) or [])], ["go", *(destination(sw) or [])]
        if aw == sw:
            return "exact"
    if aw[0] != sw[0] or sw[0] in COMMITTING:
        return None
    if sw[0] not in SEARCHING and direct_object(sw) != direct_object(aw):
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
        if tag != "replace" or (i2 - i1 != j2 - j1 and sw[0] not in MOVES):
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
                and (i == len(shorter) or shorter[i] in PREPOSITIONS)
                and not set(longer[i + 1:i + n]) & PREPOSITIONS):
            return True
    return False


def substitutes(action: str, step: str, goal_words: frozenset[str]) -> bool:
    """Whether ``action`` does ``step`` to another thing of the same kind (a stand-in for an
    absent thing): the same verb and the same rest, a direct object that shares a word with
    the step's ("focus on egg turtle" for "focus on egg parrot"; "move egg turtle to green
    box" for "move egg parrot egg in inventory to green box"), and no goal word in either
    object (a thing the goal names is never replaced). The guide uses it only for a step
    whose thing occurs in no action offered in this episode
    (:meth:`~deltamem.agents.guide.Guide.absent`): the recalled variation's instance of a
    kind the goal does not name."""
    a, s = abstract_action(action), abstract_action(step)
    a, s = a.replace(INVENTORY, ""), s.replace(INVENTORY, "")
    (va, ra), (vs, rs) = head(a.split()), head(s.split())
    if va != vs or not ra or not rs:
        return False
    ao, so = direct_object(["", *ra]), direct_object(["", *rs])
    if not ao or not so or ao == so or (set(ao) | set(so)) & goal_words:
        return False
    if not (set(ao) & set(so)) - STOP:
        return False
    return ra[len(ao):] == rs[len(so):]


def replaced(action: str, step: str) -> list[tuple[str, str]]:
    """The recalled words ``action`` puts other words in place of, one for one, where it
    realises ``step`` loosely ("connect battery anode to *orange* wire terminal 1" for
    "... to *black* wire terminal": black → orange). Moves and opening are searches and the
    place a thing is taken from is where the recalled game found it: neither says what
    stands in for what, so they give none (a stand-in keeps its role)."""
    a, s = part_names(abstract_action(action)).split(), part_names(abstract_action(step)).split()
    if not a or not s or s[0] in SEARCHING:
        return []
    cut = s.index("from") if "from" in s[1:] else len(s)
    out = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, s, a, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1 and i2 <= cut:
            out += [(x, y) for x, y in zip(s[i1:i2], a[j1:j2], strict=True)
                    if x not in STOP and y not in STOP and not x.startswith("{")]
    return out


def swap(step: str, subs: dict[str, str]) -> str:
    """``step`` with each recalled word of ``subs`` replaced by what stands in for it,
    in one pass (a stand-in keeps its role)."""
    if not subs:
        return step
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in subs) + r")(?![\w-])",
                         re.IGNORECASE)
    return pattern.sub(lambda m: subs.get(m.group(1).lower(), m.group(1)), step)


def realisations(step: str, admissible: Sequence[str], goal_words: frozenset[str],
                 subs: dict[str, str], named: frozenset[str],
                 absent: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """The admissible actions that realise ``step``: ``(exact, loose)``, in the admissible
    order. Without any, a stand-in for an absent thing (``absent(step)``) realises it
    loosely; of several loose ones only the nearest are kept (moves keep the search's own
    order), and none that puts a word in a place another recalled word's stand-in, or a word
    of a step done (``named``), already holds (``subs``: a stand-in keeps its role)."""
    exact: list[str] = []
    loose: list[str] = []
    for a in admissible:
        how = realises(a, step, goal_words)
        if how == "exact":
            exact.append(a)
        elif how == "loose":
            loose.append(a)
    if not exact and not loose and absent(step):
        loose = [a for a in admissible if substitutes(a, step, goal_words)]
    if len(loose) > 1 and verb(step) not in MOVES:
        # the nearest only: the fewest recalled words put aside ("... to orange wire
        # terminal 1" for "... to black wire terminal", not "... to anode in nuclear
        # generator"; a whole name may still go when nothing nearer is here: "move ice
        # cream to glass jar" for "... to metal pot"); moves keep the search's own order
        far = {a: len(replaced(a, step)) or len(step.split()) for a in loose}
        loose = [a for a in loose if far[a] == min(far.values())]
    if loose:
        # a word that already stands in for another recalled word, or that a step
        # already done names, stands in for no other: the second wire of a circuit is not
        # the first one again
        owner = {dst: src for src, dst in subs.items()}
        owner.update((w, w) for w in named if w not in owner)
        loose = [a for a in loose
                 if all(owner.get(dst, src) == src for src, dst in replaced(a, step))]
    return exact, loose
