"""Turning observations into triplets and finding the triplets they make outdated (paper §2).

Two implementations of each step:

* :class:`RuleTripletExtractor` / :class:`RuleOutdatedDetector`: deterministic,
  for tests and the ``deterministic`` mode. They read TextWorld's phrasing
  (``On the table you see a knife``, ``There is an exit to the east``,
  ``You take the key``, ``You are carrying: ...``) and apply fixed exclusivity
  rules (an item is in one place; open/closed/locked are exclusive states).
* :class:`LLMTripletExtractor` / :class:`LLMOutdatedDetector`: the paper's
  method with our own prompts (``prompts/arigraph/extract_triplets.txt`` and
  ``outdated.txt``), JSON answers validated against a schema with bounded
  strings, one repair call, then :class:`~deltamem.errors.ExtractionError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from deltamem.errors import ExtractionError, InvalidInputError
from deltamem.llm.base import LLMClient
from deltamem.llm.structured import ask_json
from deltamem.memories.arigraph.navigation import DIRECTIONS, locate
from deltamem.memories.arigraph.prompts import render
from deltamem.memories.arigraph.triplets import Triplet, normalize_entity, unique

__all__ = [
    "LLMOutdatedDetector",
    "LLMTripletExtractor",
    "OutdatedDetector",
    "RuleOutdatedDetector",
    "RuleTripletExtractor",
    "TripletExtractor",
    "strip_status",
]

ENTITY_MAX = 40
"""Longest accepted subject/relation/object from the LLM (characters). The prompt asks for
at most four words; a tight bound keeps a small model's constrained output short."""
REPLACE_MAX = 10
"""Most replacement pairs accepted from one outdated-detection answer."""


class TripletExtractor(Protocol):
    """Reads the triplets an observation states.

    ``location`` is where the agent is (``None``: unknown), ``action`` the
    action that produced the observation (``""`` for the opening one),
    ``known`` triplets already in the graph (for consistent naming). Raises
    :class:`ExtractionError` when it cannot produce valid triplets.
    """

    def extract(self, observation: str, *, action: str, location: str | None,
                known: Sequence[Triplet]) -> list[Triplet]: ...


class OutdatedDetector(Protocol):
    """Picks the ``existing`` triplets (the 1-hop neighbourhood of the new ones) that the
    ``new`` triplets make outdated. Raises :class:`ExtractionError` on invalid LLM output."""

    def outdated(self, existing: Sequence[Triplet], new: Sequence[Triplet]) -> list[Triplet]: ...


def strip_status(observation: str) -> str:
    """The observation without TextWorld's prompt/status lines (lines starting with ``>``)."""
    return "\n".join(ln for ln in observation.splitlines() if not ln.lstrip().startswith(">"))


# -- rule-based -------------------------------------------------------------------------------

_SEE = r"(?:you\s+)?(?:can\s+)?(?:see|make\s+out|spot|notice|find)s?"
_LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+")
_TAIL = re.compile(r"\s+(?:close by|here|there|nearby|over there|in the corner|"
                   r"in one corner|on the floor|on the ground)$")
_STATE_WORDS = {"closed": "closed", "open": "open", "opened": "open", "locked": "locked"}
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")

_ON = re.compile(rf"^on (?:the )?(?P<s>[\w' -]+?),? {_SEE} (?P<list>.+)$")
_IN = re.compile(rf"^(?:in|inside) (?:the )?(?P<s>[\w' -]+?),? {_SEE} (?P<list>.+)$")
_CONTAINS = re.compile(r"^the (?P<s>[\w' -]+?) contains (?P<list>.+)$")
_REVEAL = re.compile(r"^you open (?:the )?(?P<s>[\w' -]+?), revealing (?P<list>.+)$")
_FLOOR = re.compile(r"^there (?:is|are) (?P<list>.+?) on the (?:floor|ground)$")
_SEE_ROOM = re.compile(r"(?:^|\byou )(?:can )?(?:see|make out|spot|notice|find)s? "
                       r"(?P<list>(?:a|an|some) .+)$")
_CARRY = re.compile(r"^you are carrying:? (?P<list>.+)$")
_TAKE = re.compile(r"^you (?:pick up|take) (?:the )?(?P<x>[\w' -]+?)"
                   r"(?: from (?:the )?(?P<s>[\w' -]+?))?$")
_PUT_ON = re.compile(r"^you (?:put|place) (?:the )?(?P<x>[\w' -]+?) on (?:the )?(?P<s>[\w' -]+)$")
_PUT_IN = re.compile(r"^you (?:put|insert|place) (?:the )?(?P<x>[\w' -]+?) "
                     r"(?:in|into|inside) (?:the )?(?P<s>[\w' -]+)$")
_DROP = re.compile(r"^you drop (?:the )?(?P<x>[\w' -]+?)(?: on the (?:floor|ground))?$")
_STATE = re.compile(r"^you (?P<verb>open|close|unlock|lock) (?:the )?(?P<x>[\w' -]+?)"
                    r"(?: with (?:the )?[\w' -]+)?$")
_EXIT_WORDS = re.compile(r"\b(?:exit|exits|door|doorway|entrance|entranceway|passage|"
                         r"passageway|path|going|leading|head)\b")
_DIR_WORD = re.compile(r"\b(" + "|".join(DIRECTIONS) + r")\b")
_VERB_STATE = {"open": "open", "close": "closed", "unlock": "unlocked", "lock": "locked"}


def _items(text: str) -> list[str]:
    out = []
    for part in _LIST_SPLIT.split(text.strip()):
        part = _TAIL.sub("", part.strip())
        if part.startswith(("nothing", "anything")):
            continue
        name = normalize_entity(part)
        if name and len(name.split()) <= 5:
            out.append(name)
    return out


def _state_split(name: str) -> tuple[str, str | None]:
    first, _, rest = name.partition(" ")
    if rest and first in _STATE_WORDS:
        return rest, _STATE_WORDS[first]
    return name, None


@dataclass
class RuleTripletExtractor:
    """Deterministic extraction from TextWorld-style text (see the module docstring).

    Containment in the room becomes ``(location, contains, item)``; supporters
    and containers ``(item, is on|is in, holder)``; inventory
    ``(item, is in, inventory)``; exits ``(location, has exit, direction)``;
    states ``(thing, is, open|closed|locked|unlocked)``.
    """

    def extract(self, observation: str, *, action: str = "", location: str | None = None,
                known: Sequence[Triplet] = ()) -> list[Triplet]:
        text = strip_status(observation)
        loc = locate(text) or location
        out: list[Triplet] = []
        for raw in _SENT.split(text):
            s = " ".join(raw.split()).strip().rstrip(".!?").casefold()
            if not s or s.startswith("-="):
                continue
            out.extend(self._sentence(s, loc))
        return unique(out)

    def _sentence(self, s: str, loc: str | None) -> list[Triplet]:
        out: list[Triplet] = []
        if m := _REVEAL.match(s):
            holder = normalize_entity(m["s"])
            out.append(Triplet(holder, "is", "open"))
            out += [Triplet(x, "is in", holder) for x in _items(m["list"])]
            return out
        for pattern, rel in ((_ON, "is on"), (_IN, "is in"), (_CONTAINS, "is in")):
            if m := pattern.match(s):
                holder = normalize_entity(m["s"])
                return [Triplet(x, rel, holder) for x in _items(m["list"])]
        if m := _CARRY.match(s):
            return [Triplet(x, "is in", "inventory") for x in _items(m["list"])]
        if m := _TAKE.match(s):
            return [Triplet(m["x"], "is in", "inventory")]
        if m := _PUT_IN.match(s):
            return [Triplet(m["x"], "is in", m["s"])]
        if m := _PUT_ON.match(s):
            return [Triplet(m["x"], "is on", m["s"])]
        if m := _DROP.match(s):
            return [Triplet(loc, "contains", m["x"])] if loc else []
        if m := _STATE.match(s):
            return [Triplet(m["x"], "is", _VERB_STATE[m["verb"]])]
        if loc and (m := _FLOOR.match(s)):
            return [Triplet(loc, "contains", x) for x in _items(m["list"])]
        if loc and (m := _SEE_ROOM.search(s)):
            for x in _items(m["list"]):
                name, state = _state_split(x)
                out.append(Triplet(loc, "contains", name))
                if state:
                    out.append(Triplet(name, "is", state))
            return out
        if loc and _EXIT_WORDS.search(s):
            out += [Triplet(loc, "has exit", d) for d in _DIR_WORD.findall(s)]
        return out


_LOCATION_RELATIONS = frozenset({"is in", "is on", "is at", "is inside", "is located in"})
_EXCLUSIVE_STATES = frozenset({"open", "closed", "locked", "unlocked"})


@dataclass
class RuleOutdatedDetector:
    """Deterministic replacement rules.

    An existing triplet is outdated by a new one when (1) both place the same
    item (``is in``/``is on``/... ) in different holders; (2) the existing one
    says a holder ``contains`` an item that the new one places elsewhere (or a
    new ``contains`` places an item elsewhere than where the existing one put
    it); (3) both give the same thing different exclusive states
    (open/closed/locked/unlocked).
    """

    def outdated(self, existing: Sequence[Triplet], new: Sequence[Triplet]) -> list[Triplet]:
        new_set = set(new)
        out: list[Triplet] = []
        for e in existing:
            if e in new_set:
                continue
            if any(self._replaces(n, e) for n in new):
                out.append(e)
        return out

    @staticmethod
    def _where(t: Triplet) -> tuple[str, str] | None:
        """``(item, holder)`` when ``t`` states where an item is."""
        if t.relation in _LOCATION_RELATIONS:
            return t.subject, t.object
        if t.relation == "contains":
            return t.object, t.subject
        return None

    def _replaces(self, n: Triplet, e: Triplet) -> bool:
        wn, we = self._where(n), self._where(e)
        if wn and we and wn[0] == we[0] and wn[1] != we[1]:
            return True
        return (n.relation == e.relation == "is" and n.subject == e.subject
                and n.object in _EXCLUSIVE_STATES and e.object in _EXCLUSIVE_STATES
                and n.object != e.object)


# -- LLM-based --------------------------------------------------------------------------------

def _triplet_schema(max_items: int) -> dict[str, Any]:
    field = {"type": "string", "minLength": 1, "maxLength": ENTITY_MAX}
    return {
        "type": "object",
        "properties": {"triplets": {"type": "array", "maxItems": max_items, "items": {
            "type": "object",
            "properties": {"subject": field, "relation": field, "object": field},
            "required": ["subject", "relation", "object"],
            "additionalProperties": False,
        }}},
        "required": ["triplets"],
        "additionalProperties": False,
    }


_REPLACE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"replace": {"type": "array", "maxItems": REPLACE_MAX, "items": {
        "type": "object",
        "properties": {"old": {"type": "integer", "minimum": 1},
                       "new": {"type": "integer", "minimum": 1}},
        "required": ["old", "new"],
        "additionalProperties": False,
    }}},
    "required": ["replace"],
    "additionalProperties": False,
}

_BAD_ENTITIES = frozenset({"you", "i", "player", "none", "nothing", "null"})


@dataclass
class LLMTripletExtractor:
    """The paper's LLM extraction (usage purpose ``extract``).

    Args:
        llm: the model.
        max_triplets: most triplets accepted from one observation (schema ``maxItems``).
        known_shown: how many known triplets are shown for consistent naming.
        max_tokens: completion budget; the default covers the schema's worst case
            (12 triplets of three 40-character strings) so an answer is not cut short.

    Triplets naming the player (``you``, ``player``) or ``none`` are dropped
    (the prompt forbids them); an answer that is not valid JSON of the schema
    after one repair raises :class:`ExtractionError`.
    """

    llm: LLMClient
    max_triplets: int = 12
    known_shown: int = 30
    max_tokens: int = 700

    def extract(self, observation: str, *, action: str = "", location: str | None = None,
                known: Sequence[Triplet] = ()) -> list[Triplet]:
        prompt = render(
            "extract_triplets",
            observation=strip_status(observation).strip() or "(empty)",
            action=action or "(none: this is the first observation)",
            location=location or "(unknown)",
            known="; ".join(t.text for t in list(known)[-self.known_shown:]) or "(none yet)",
            max_triplets=self.max_triplets,
        )
        obj = ask_json(self.llm, role="arigraph_extract", purpose="extract", prompt=prompt,
                       schema=_triplet_schema(self.max_triplets),
                       shape='{"triplets": [{"subject", "relation", "object"}]}',
                       max_tokens=self.max_tokens)
        out: list[Triplet] = []
        for d in obj["triplets"]:
            try:
                t = Triplet.from_obj(d)
            except InvalidInputError:
                continue
            if t.subject in _BAD_ENTITIES or t.object in _BAD_ENTITIES:
                continue
            out.append(t)
        return unique(out)


@dataclass
class LLMOutdatedDetector:
    """The paper's LLM outdated-triplet selection (usage purpose ``extract``).

    Existing and new triplets are numbered; the model answers pairs of
    numbers; a number out of range raises :class:`ExtractionError` (like
    output that stays invalid after the repair call). With no existing or no
    new triplets no call is made.
    """

    llm: LLMClient
    max_existing: int = 60
    max_tokens: int = 300

    def outdated(self, existing: Sequence[Triplet], new: Sequence[Triplet]) -> list[Triplet]:
        new_set = set(new)
        existing = [t for t in existing if t not in new_set][: self.max_existing]
        if not existing or not new:
            return []
        prompt = render(
            "outdated",
            existing="\n".join(f"{i}. {t.text}" for i, t in enumerate(existing, 1)),
            new="\n".join(f"{i}. {t.text}" for i, t in enumerate(new, 1)),
        )
        obj = ask_json(self.llm, role="arigraph_outdated", purpose="extract", prompt=prompt,
                       schema=_REPLACE_SCHEMA, shape='{"replace": [{"old": int, "new": int}]}',
                       max_tokens=self.max_tokens)
        out: list[Triplet] = []
        for pair in obj["replace"]:
            old, nw = pair["old"], pair["new"]
            if old > len(existing) or nw > len(new):
                raise ExtractionError(
                    f"arigraph_outdated: replacement {old}->{nw} is out of range "
                    f"({len(existing)} existing, {len(new)} new)",
                    role="arigraph_outdated", raw=str(obj))
            out.append(existing[old - 1])
        return unique(out)
