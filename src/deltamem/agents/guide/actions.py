"""Reading an action or a recalled step: its abstract form, its verb, what it handles and
where it goes.

Every comparison the guide makes goes through :func:`abstract_action` (lower case, instance
numbers and letters dropped: "go to cabinet 3" and "go to cabinet" read the same), and the
word sets here say which words of an action are its verb, its particle, its prepositions.
Pure functions of their arguments; :func:`abstract_action` is cached, since ScienceWorld
offers 500-3,000 actions a step and the guide reads each of them at every decision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from deltamem.text import GUIDE_STOP_WORDS

#: the words that are never a goal word, never bound to a placeholder and never stand in
#: for another word (:data:`deltamem.text.GUIDE_STOP_WORDS`)
STOP = GUIDE_STOP_WORDS
NUMBER = re.compile(r"(?<=[a-z-])\s+\d+\b")
_LABEL = re.compile(r"(?<=[a-z])\s+[A-Z]\b")  # an instance letter: "unknown substance B"
_WORD = re.compile(r"\{[A-Z]\}|[A-Za-z0-9][A-Za-z0-9/'-]*")
#: how ScienceWorld says a thing is carried ("thermometer in inventory")
INVENTORY = " in inventory"
MOVES = frozenset({"go", "walk", "teleport"})
#: actions that change nothing
IDLE = frozenset({"look", "inventory", "examine"})
#: verbs whose object is where to look (a move, opening a receptacle): realised loosely by
#: another place -- the search; any other verb keeps its direct object
#: (:func:`~deltamem.agents.guide.realise.realises`)
SEARCHING = MOVES | {"open"}
PARTICLES = frozenset({"up", "down", "on", "off", "at", "to"})
PREPOSITIONS = frozenset({"to", "into", "in", "on", "from", "with", "in/on", "at", "under",
                          "onto", "and"})
#: verbs whose action commits the episode to its object (ScienceWorld's "focus on OBJ":
#: focusing on the wrong object ends the task): realised exactly, never loosely
COMMITTING = frozenset({"focus"})


@lru_cache(maxsize=1 << 16)
def abstract_action(action: str) -> str:
    """Lower case, instance numbers and letters dropped ("cabinet 3" → "cabinet", "unknown
    substance B" → "unknown substance"), spaces collapsed. Cached (see
    :func:`~deltamem.agents.guide.realise.realises`)."""
    text = _LABEL.sub("", " ".join(action.split()))
    return " ".join(NUMBER.sub("", text.lower()).split())


def words(text: str) -> list[str]:
    """The words of ``text`` in lower case, placeholders ("{A}") as written."""
    return [w if w.startswith("{") else w.lower() for w in _WORD.findall(text)]


def verb(action: str) -> str:
    """The first word of ``action`` in lower case ("" for an empty action)."""
    parts = action.split(maxsplit=1)
    return parts[0].lower() if parts else ""


def destination(words: list[str]) -> list[str] | None:
    """The place a move goes to ("teleport to art studio" → ``["art", "studio"]``)."""
    if not words or words[0] not in MOVES:
        return None
    rest = words[1:]
    return rest[1:] if rest[:1] == ["to"] else rest


def direct_object(words: list[str]) -> list[str]:
    """The words of what an action handles: after the verb (and its particle: "pick *up*",
    "focus *on*") up to the first preposition ("take *tomato* from fridge", "use
    *thermometer* in inventory on water")."""
    rest = words[1:]
    if rest[:1] and rest[0] in PARTICLES:
        rest = rest[1:]
    out = []
    for w in rest:
        if w in PREPOSITIONS:
            break
        out.append(w)
    return out


def head(words: list[str]) -> tuple[list[str], list[str]]:
    """An action's verb with its particle, and the rest ("pick up" | "egg turtle")."""
    n = 2 if len(words) > 1 and words[1] in PARTICLES else 1
    return words[:n], words[n:]


def mentions(action: str, places: Iterable[str]) -> bool:
    """Whether ``action`` names one of ``places`` after its verb, a name of several words
    ("art studio") as a whole."""
    rest = f" {' '.join(abstract_action(action).split()[1:])} "
    return any(f" {p} " in rest for p in places if p)
