"""A deterministic, LLM-free extractor (the zero-cost option and the tests' default).

It follows the paper's extraction rules (§3.4) with plain text processing:

* task roots abstract the episode: instance numbers are dropped ("cabinet 3" →
  "cabinet") and goal entities become placeholders ({A}, {B}, ...);
* residual successes hold what turns the steps the retrieved chain composes to into this
  episode's abstract steps (``skill_deltas="exact"``, the default: :func:`deltamem.core.
  residual.delta`): the steps that follow the chain's, or which of the chain's steps its
  own stand instead of and where its other steps go; failure records in the chain hold no
  steps, so under a failed root the delta is the episode's whole procedure; *skip* when the
  chain already composes to the episode's steps. The two earlier forms stay for banks
  written with them: ``additions`` (the steps not found anywhere in the chain's text,
  failure records included, appended) and ``edits`` (as ``exact``, but steps the episode
  left out stay);
* failure records list the failed actions with the environment's answers
  ([FAILED]) and admissible actions never tried ([UNEXPLORED]); a residual
  failure skips when the chain already records exactly those failures;
* environment knowledge collects object → place facts read from observations
  ("On the countertop 1, you see a apple 1, ...") and receptacle behaviour
  ("The fridge 1 is closed."); residuals keep only new facts;
* consolidation (Eq. 8) concatenates the chain, dropping repeated lines.

ScienceWorld (domain ``scienceworld``) adds what the paper's prompts ask of its skills and
knowledge (App. C.6: "which room each item is found in, the full action sequence in order";
C.7: "specific room -> item mappings"), still with plain text processing:

* skills leave out steps that changed nothing in the recalled game (the engine's "The
  door is already open.", "No known action matches that input.", the bare ``0`` that
  answered an ambiguity), and words of the action templates ("look *around*", "pick
  *up*") never become placeholders, so ``look around`` stays an action;
* skills end with the rooms where the items the procedure handled were found
  (``- thermometer: found in/on kitchen``), read from the room the agent was in when it
  first picked up, focused on, moved or used each item;
* knowledge lists every item of every room the episode saw (``This room is called the
  kitchen. In it, you see: ...``, items on or in others included) as
  ``item: found in/on room``, the items the episode handled first.

TextWorld (domain ``textworld``) writes where things are in prose the household patterns do
not read ("On the desk you can make out a laptop", "The fridge contains a milk carton"), so its
knowledge adds, before what those patterns find:

* the placements the game scored (a ``put``/``insert`` step with a positive reward:
  ``iron: belongs in/on ironing board (putting it there scored)``), an interaction rule of
  the world in the sense of App. C.5 (B);
* ``item: found in/on place`` for every thing the prose shows on or in another (or on the
  floor of a room: the room).

Every other domain is extracted exactly as before these rules (a test compares household
payloads byte for byte).

A domain whose goals are paraphrased from game to game (TextWorld's generator writes
each instruction anew) can keep a skill's words literal instead (``skill_words``,
:attr:`deltamem.domains.DomainPreset.skill_words`): a placeholder helps only when the
next goal binds it back, and the guide binds by aligning the recalled goal with the
current one word by word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

from deltamem.core.payload import ChainEntry, Payload, TreeName
from deltamem.core.residual import (
    EDITS_HEADER,
    edit_lines,
    is_edit_line,
)
from deltamem.core.triggers import goal_entities
from deltamem.domains import get_domain
from deltamem.errors import ConfigError
from deltamem.extract.base import Role
from deltamem.extract.residual import chain_steps, fit_lines, residual_skill
from deltamem.text import NO_EFFECT_PHRASES, normalise
from deltamem.text import SKILL_STOP_WORDS as _STOP
from deltamem.types import Episode, Step

MAX_ACTIVATION = 400
MAX_PROCEDURE = 2000
MAX_STEPS_LISTED = 40
SKILL_DELTAS: tuple[str, ...] = ("exact", "additions", "edits")
"""The forms a residual skill can take (:class:`StructuralExtractor`, ``skill_deltas``)."""

_NUM = re.compile(r"\b([A-Za-z][\w-]*) \d+\b")
_SEE = re.compile(r"(?:on|in) (?:the )?([a-z][a-z -]*?)(?: \d+)?, you see ([^.]*)", re.IGNORECASE)
_AROUND = re.compile(r"around you, you see ([^.]*)", re.IGNORECASE)
_STEP_NO = re.compile(r"^\s*\d+\.\s*")
_IN_IT = re.compile(r"in it, you see ([^.]*)", re.IGNORECASE)
_TARGET = re.compile(r"^(?:go to|open|teleport to|move to|look in|examine) (?:the )?(.+)$")
_STATE = re.compile(r"the ([a-z][a-z -]*?)(?: \d+)? is (closed|open|locked|on|off)\b", re.I)
# TextWorld's text generator writes where things are in prose ("On the desk you can make out
# a laptop and a stapler, so there's that.", "You see a pillow on the bed.", "The fridge
# contains a milk carton.", "There is a coin on the floor."), under a room heading "-= Office =-"
_TW_ROOM = re.compile(r"-= (.+?) =-")
_TW_ON = re.compile(
    r"\bon the ([a-z][a-z -]*?),? (?:you (?:can )?(?:see|make out)|is|are) ([^.!?]*)", re.I)
_TW_SEEN_ON = re.compile(
    r"\byou (?:can )?(?:see|make out) ([^.!?]*?) on the ([a-z][a-z -]*?)(?=[,.!?]|$)", re.I)
_TW_CONTAINS = re.compile(r"\bthe ([a-z][a-z -]*?) contains ([^.!?]*)", re.I)
_TW_FLOOR = re.compile(r"\bthere is ([^.!?]*?) on the floor\b", re.I)
_TW_FLAVOUR = re.compile(r",\s*so there's that\s*$", re.I)
_TW_PLACING = re.compile(r"^(?:put|insert) (.+?) (?:on|onto|into|in) (.+)$")


def abstract_text(text: str) -> str:
    """Drop instance numbers ("cabinet 3" → "cabinet") and collapse spaces."""
    return " ".join(_NUM.sub(r"\1", text).split())


def _split_items(listing: str) -> list[str]:
    items = re.split(r",\s*|\s+and\s+", listing)
    out = []
    for it in items:
        it = re.sub(r"^(?:and\s+)?(?:an?|the|some)\s+", "", it.strip(), flags=re.I)
        it = abstract_text(it).strip(" .")
        if it and it.lower() not in {"nothing", "none"}:
            out.append(it.lower())
    return out


_SEARCH = re.compile(r"^(?:go to|open) (.+)$")
#: what a household visit does when it only looks: the visit is a detour of the search
_LOOKING = frozenset({"go", "open", "close", "examine", "look", "inventory"})


def _without_detours(actions: Sequence[str]) -> list[str]:
    """A household episode's actions without its search detours: a visit (``go to X`` and
    what follows it up to the next ``go to``) that only looked (opened, closed, examined)
    is left out, unless it is the last. Where the object was found is the Env-Tree's
    knowledge and the failure record's "searched in vain" line, not a step of the skill: a
    skill learned from the agent's own play keeps the procedure (go where the object was,
    take it, ... ), not the tour of the places it was not in."""
    visits: list[list[str]] = [[]]
    for a in actions:
        if a.lower().startswith("go to ") and visits[-1]:
            visits.append([])
        visits[-1].append(a)
    kept = [v for n, v in enumerate(visits)
            if n == len(visits) - 1 or not v or not v[0].lower().startswith("go to ")
            or any(a.split()[0].lower() not in _LOOKING for a in v[1:] if a.split())]
    return [a for v in kept for a in v]


def _searched_in_vain(ep: Episode) -> str | None:
    """A failure record's line ``searched in vain for <object>: <places>``: the kinds of the
    places gone to or opened before the goal's object was first held whose answer did not
    name it (a warning the guide reads as places to try last,
    :mod:`deltamem.agents.guide.warnings`); ``None`` when there are none."""
    entities = goal_entities(ep.task.goal)
    if not entities:
        return None
    thing = entities[0]
    named = re.compile(rf"\b{re.escape(thing)}\b")
    places: list[str] = []
    for s in ep.steps:
        act = abstract_text(s.action).lower()
        if act.startswith(("take ", "pick up ")) and named.search(act) and not _is_invalid(s):
            break  # held: the search is over
        m = _SEARCH.match(act)
        if (m and not _is_invalid(s) and not named.search(s.observation.lower())
                and m.group(1) not in places):
            places.append(m.group(1))
    return f"searched in vain for {thing}: {', '.join(places[:8])}" if places else None


#: answers that mark a step the environment accepted as having had no effect. Older than
#: :data:`deltamem.text.NO_EFFECT_PHRASES` and without its "nothing happens" (a step marked
#: valid whose answer is "Nothing happens." is not a pitfall here): kept as it is so that the
#: banks, and every table built from them, stay what they were.
_INVALID_HINTS = tuple(p for p in NO_EFFECT_PHRASES if p != "nothing happens")


def _is_invalid(step: Step) -> bool:
    if not step.valid:
        return True
    obs = step.observation.strip().lower()
    return any(obs.startswith(h) for h in _INVALID_HINTS)


class _Placeholders:
    """Goal entities → {A}, {B}, ... (entities are goal words used in actions)."""

    def __init__(self, goal: str, actions: Sequence[str],
                 fixed: frozenset[str] = frozenset()) -> None:
        used = " ".join(actions).lower()
        words = re.findall(r"[a-z][a-z-]+", goal.lower())
        self.mapping: dict[str, str] = {}
        for w in words:
            if w in _STOP or w in fixed or w in self.mapping or len(w) < 3:
                continue
            if re.search(rf"\b{re.escape(w)}\b", used) and not _is_verb(w, actions):
                self.mapping[w] = "{" + chr(ord("A") + len(self.mapping)) + "}"
            if len(self.mapping) == 6:
                break

    def apply(self, text: str) -> str:
        out = abstract_text(text)
        for w, ph in self.mapping.items():
            out = re.sub(rf"\b{re.escape(w)}s?\b", ph, out, flags=re.I)
        return out

    def legend(self) -> str:
        return ", ".join(f"{ph} = e.g. {w}" for w, ph in self.mapping.items())


def _is_verb(word: str, actions: Sequence[str]) -> bool:
    return any(a.lower().split()[:1] == [word] for a in actions if a.strip())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _numbered(lines: Sequence[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


def _strip_number(line: str) -> str:
    return re.sub(r"^\s*(?:\d+\.|[-+*])\s*", "", line).strip().lower()


def _edit_groups(base: Sequence[str], steps: Sequence[str]) -> list[str] | None:
    """The lines of an edits delta turning the chain's ``base`` steps into ``steps``
    (:mod:`deltamem.core.residual`), or ``None`` when the episode only added steps or left
    some out (then additions say it, as the paper's residual prompt asks)."""
    ops = SequenceMatcher(None, [b.lower() for b in base], [s.lower() for s in steps],
                          autojunk=False).get_opcodes()
    if not any(tag == "replace" for tag, *_ in ops):
        return None
    lines: list[str] = []
    n = 1
    for tag, i1, i2, j1, j2 in ops:
        if tag == "replace":
            lines += edit_lines("instead", i1 + 1, i2, base[i1], base[i2 - 1], steps[j1:j2], n)
        elif tag == "insert" and i1 > 0:
            lines += edit_lines("after", i1, i1, base[i1 - 1], base[i1 - 1], steps[j1:j2], n)
        elif tag == "insert":
            lines += edit_lines("before", 1, 1, base[0], base[0], steps[j1:j2], n)
        else:
            continue
        n += j2 - j1
    return lines


def _success_lines(chain: Sequence[ChainEntry]) -> set[str]:
    """The lines of the chain's SUCCESS entries (what a residual is written against)."""
    return _chain_lines([e for e in chain if e.label == "SUCCESS"])


def _chain_lines(chain: Sequence[ChainEntry]) -> set[str]:
    lines: set[str] = set()
    for e in chain:
        for part in (e.payload.procedure, e.payload.activation):
            for line in part.splitlines():
                s = _strip_number(line)
                if s:
                    lines.add(s)
    return lines


# -- ScienceWorld ------------------------------------------------------------------------

#: words of ScienceWorld's action templates ("look around", "pick up OBJ", "move OBJ to
#: inventory"): a goal word among them is never made a placeholder
_SW_TEMPLATE_TEXT = (
    "around up down inventory look focus teleport move pick pour mix open close activate "
    "deactivate connect disconnect use examine read wait wait1 eat flush dunk")
_SW_TEMPLATE_WORDS = frozenset(_SW_TEMPLATE_TEXT.split())
_SW_NOOP = ("already", "no known action", "nothing happens", "ambiguous request",
            "you can't", "i'm not sure")
_SW_ROOM = re.compile(r"(?:this room is called the|you (?:teleport|move) to the) ([a-z][a-z ]*?)"
                      r"[.\n]", re.IGNORECASE)
_SW_LOOK = re.compile(r"This room is called the ([a-z][a-z ]*?)\. In it, you see:(.*?)"
                      r"(?:\n\s*You also see:|$)", re.IGNORECASE | re.DOTALL)
_SW_HANDLE = re.compile(r"^(?:pick up|focus on|move|use|pour|connect|mix|open|activate) "
                        r"(.+?)(?: (?:to|into|on|in)\b.*)?$")
_SW_SKIP_ITEMS = frozenset({"agent", "air", "substance called air", "nothing", "inventory"})


def _sw_noop(step: Step) -> bool:
    """A ScienceWorld step that changed nothing: invalid, a no-op answer, or a bare number
    (the answer to an ambiguity the adapter already resolves)."""
    if _is_invalid(step) or step.action.strip().isdigit():
        return True
    obs = step.observation.strip().lower()
    return any(h in obs for h in _SW_NOOP)


def _sw_item(text: str) -> str:
    """An item's name from a listing entry: article and "substance called" dropped."""
    t = re.sub(r"^(?:and\s+)?(?:an?|the|some)\s+", "", text.strip(), flags=re.IGNORECASE)
    t = re.sub(r"^substance called\s+", "", t.strip(), flags=re.IGNORECASE)
    return abstract_text(t).strip(" .").lower()


_SW_STATE = re.compile(r",\s*(?:which is|currently|that is)[^,.()]*|The [^.]*? door is \w+\.?",
                       re.IGNORECASE)
_SW_NEST = re.compile(r"\(containing|\b(?:On|In) the [^:.]*?(?:is|are):|\)", re.IGNORECASE)


def _sw_room_items(text: str) -> list[tuple[str, str]]:
    """``(item, room)`` for everything a "look around" text lists, nested items (on a table,
    in a cupboard, in a jar) included, states ("which is turned off") left out."""
    out: list[tuple[str, str]] = []
    for room, listing in _SW_LOOK.findall(text):
        room = room.strip().lower()
        flat = _SW_NEST.sub(",", _SW_STATE.sub("", listing))
        for part in re.split(r"[,.\n\t]", flat):
            item = _sw_item(part)
            if item and item not in _SW_SKIP_ITEMS and not item.startswith("door to"):
                out.append((item, room))
    return out


def _sw_handled(ep: Episode) -> list[tuple[str, str]]:
    """``(item, room)`` for each item the episode first picked up, focused on, moved or
    used, with the room it was in at the time (rooms read from the observations)."""
    room = ""
    m = _SW_ROOM.search(ep.task.observation or ep.task.scene)
    if m:
        room = m.group(1).strip().lower()
    out: dict[str, str] = {}
    for step in ep.steps:
        if not _sw_noop(step):
            act = normalise(step.action)
            h = _SW_HANDLE.match(act)
            if h and room and not act.startswith(("teleport", "go to")):
                item = abstract_text(h.group(1)).strip()
                if item and item not in _SW_SKIP_ITEMS and not item.startswith("door to"):
                    out.setdefault(item, room)
        m = _SW_ROOM.search(step.observation)
        if m and not _is_invalid(step):
            room = m.group(1).strip().lower()
    return list(out.items())


def _sw_item_rooms(ep: Episode) -> list[str]:
    return [f"{item}: found in/on {room}" for item, room in _sw_handled(ep)]


def _where(facts: Sequence[str], known: set[str]) -> str:
    new = [f for f in dict.fromkeys(facts) if f.lower() not in known]
    return ("\nWhere the items were:\n" + "\n".join(f"- {f}" for f in new)) if new else ""


def _sw_facts(ep: Episode) -> list[str]:
    """ScienceWorld knowledge: ``item: found in/on room`` for every item seen, those the
    episode handled first, then device states and no-op pitfalls."""
    handled = [f"{item}: found in/on {room}" for item, room in _sw_handled(ep)]
    seen: list[str] = []
    texts = [ep.task.observation or ep.task.scene, *(s.observation for s in ep.steps)]
    for text in texts:
        seen.extend(f"{item}: found in/on {room}" for item, room in _sw_room_items(text))
    names = {f.split(":", 1)[0] for f in handled}
    first = [f for f in seen if f.split(":", 1)[0] in names]
    facts = [*handled, *first, *seen]
    for step in ep.steps:
        if step.action and _sw_noop(step) and not step.action.strip().isdigit():
            facts.append(f"pitfall: '{abstract_text(step.action)}' had no effect")
    return list(dict.fromkeys(facts))


class StructuralExtractor:
    """Deterministic :class:`~deltamem.extract.base.Extractor` (no LLM, no cost).

    Args:
        skill_words: how a skill writes its steps: ``"slots"`` (the goal's words become
            placeholders, §3.4), ``"literal"`` (the steps as played, instance numbers
            dropped: for a domain whose goals are paraphrased, so a slot could not be
            bound back), or ``None`` (default): the domain's setting
            (:attr:`deltamem.domains.DomainPreset.skill_words`).
        skill_deltas: what a residual success writes: ``"exact"`` (what turns the chain's
            composed steps into the episode's, :func:`deltamem.core.residual.delta`, so the
            new node's chain composes to the episode's steps), the earlier forms
            ``"additions"`` (the steps found nowhere in the chain's text, appended) and
            ``"edits"`` (as exact, but the chain's steps the episode left out stay), or
            ``None`` (default): the domain's setting
            (:attr:`deltamem.domains.DomainPreset.skill_deltas`).
    """

    name = "structural"

    def __init__(self, skill_words: str | None = None, skill_deltas: str | None = None
                 ) -> None:
        if skill_words not in (None, "slots", "literal"):
            raise ConfigError(f"skill_words must be 'slots' or 'literal', got {skill_words!r}")
        if skill_deltas not in (None, *SKILL_DELTAS):
            raise ConfigError(f"skill_deltas must be one of {', '.join(SKILL_DELTAS)}, "
                              f"got {skill_deltas!r}")
        self.skill_words = skill_words
        self.skill_deltas = skill_deltas

    def extract(
        self, role: Role, episode: Episode, chain: Sequence[ChainEntry], domain: str
    ) -> Payload | None:
        preset = get_domain(domain)
        sw = domain == "scienceworld"
        tw = domain == "textworld"
        literal = (self.skill_words or preset.skill_words) == "literal"
        form = self.skill_deltas or preset.skill_deltas
        household = domain == "alfworld"
        if role == "task_root_success":
            return self._skill(episode, chain=(), sw=sw, literal=literal, detours=household)
        if role == "task_residual_success":
            return self._skill(episode, chain=chain, sw=sw, literal=literal, form=form,
                               detours=household)
        if role == "task_root_failure":
            return self._failure(episode, chain=())
        if role == "task_residual_failure":
            return self._failure(episode, chain=chain)
        if role == "env_root":
            return self._knowledge(episode, chain=(), sw=sw, tw=tw)
        if role == "env_residual":
            return self._knowledge(episode, chain=chain, sw=sw, tw=tw)
        raise ValueError(f"unknown extraction role {role!r}")

    # -- task tree -----------------------------------------------------------
    def skill_steps(self, episode: Episode, domain: str) -> list[str]:
        """The abstract steps a skill learned from ``episode`` holds (§3.4: instance numbers
        dropped, the goal's words as placeholders unless ``skill_words`` is ``literal``;
        steps that changed nothing left out, repeats in a row once): what the chain of a
        SUCCESS node written from it composes to (Eq. 7, :mod:`deltamem.core.residual`)."""
        preset = get_domain(domain)
        literal = (self.skill_words or preset.skill_words) == "literal"
        return self._steps(episode, domain == "scienceworld", literal,
                           detours=domain == "alfworld")[0]

    @staticmethod
    def _steps(ep: Episode, sw: bool, literal: bool,
               detours: bool = False) -> tuple[list[str], _Placeholders]:
        if sw:
            valid = [s.action for s in ep.steps if not _sw_noop(s)]
            ph = _Placeholders(ep.task.goal, () if literal else valid, fixed=_SW_TEMPLATE_WORDS)
        else:
            valid = [s.action for s in ep.steps if not _is_invalid(s)]
            if detours:
                valid = _without_detours(valid)
            ph = _Placeholders(ep.task.goal, () if literal else valid)
        steps: list[str] = []
        for a in valid:
            line = ph.apply(a)
            if not steps or steps[-1] != line:
                steps.append(line)
        return steps[:MAX_STEPS_LISTED], ph

    def _skill(self, ep: Episode, chain: Sequence[ChainEntry], sw: bool = False,
               literal: bool = False, form: str = "exact",
               detours: bool = False) -> Payload | None:
        steps, ph = self._steps(ep, sw, literal, detours)
        goal = ph.apply(ep.task.goal)
        legend = ph.legend()
        activation = f"Tasks of the form: {goal}" + (f" ({legend})" if legend else "")
        last = steps[-1] if steps else "the final action"
        termination = f"The environment reports the task done after: {last}"
        where = [ph.apply(f) for f in _sw_item_rooms(ep)] if sw else []
        if chain and form == "exact":
            return self._exact(chain, steps, goal, activation, termination, where)
        if chain:  # against the chain's SUCCESS entries: a failure record holds no steps
            known = _success_lines(chain)
            groups = _edit_groups(chain_steps(chain), steps) if form == "edits" else None
            if groups:  # the episode did something else where the chain has steps
                return Payload(
                    _clip(f"Variant of the base skill: {goal}", MAX_ACTIVATION),
                    _clip(EDITS_HEADER + "\n" + "\n".join(groups) + _where(where, known),
                          MAX_PROCEDURE),
                    termination,
                )
            new = [s for s in steps if s.lower() not in known]
            if not new:
                return None  # the chain already covers every step: skip
            return Payload(
                _clip(f"Variant of the base skill: {goal}", MAX_ACTIVATION),
                _clip("Extra steps not in the base:\n" + _numbered(new)
                      + _where(where, known), MAX_PROCEDURE),
                termination,
            )
        return Payload(
            _clip(activation, MAX_ACTIVATION),
            _clip((_numbered(steps) or "(no valid action)") + _where(where, set()),
                  MAX_PROCEDURE),
            termination,
        )

    @staticmethod
    def _exact(chain: Sequence[ChainEntry], steps: list[str], goal: str, activation: str,
               termination: str, where: list[str]) -> Payload | None:
        """A residual success whose chain composes to ``steps`` exactly
        (:func:`deltamem.extract.residual.residual_skill`), written against the chain's
        SUCCESS entries only: failure records hold no steps."""
        return residual_skill(chain, steps, activation=activation,
                              variant=f"Variant of the base skill: {goal}",
                              termination=termination,
                              notes=_where(where, _success_lines(chain)))

    def _failure(self, ep: Episode, chain: Sequence[ChainEntry]) -> Payload | None:
        tried = {abstract_text(s.action).lower() for s in ep.steps}
        failed = [
            f"{abstract_text(s.action)} -> {abstract_text(s.observation)[:120]}"
            for s in ep.steps
            if _is_invalid(s)
        ]
        tail = [
            f"{abstract_text(s.action)} -> {abstract_text(s.observation)[:120]}"
            for s in ep.steps[-3:]
        ]
        failed_lines = list(dict.fromkeys(failed[:6] + tail))
        vain = _searched_in_vain(ep)
        if vain:
            failed_lines.append(vain)
        if chain:
            known = _chain_lines(chain)
            if all(_strip_number(f) in known for f in failed_lines):
                return None  # exactly the same failure is already recorded: skip
        unexplored: list[str] = []
        for s in ep.steps:
            for a in s.admissible:
                aa = abstract_text(a).lower()
                if aa not in tried and aa not in unexplored:
                    unexplored.append(aa)
        procedure = "[FAILED]:\n" + "\n".join(f"- {f}" for f in failed_lines)
        procedure += "\n[UNEXPLORED]:\n" + (
            "\n".join(f"- {u}" for u in unexplored[:6]) or "- (no alternatives were listed)"
        )
        reached = len(ep.steps)
        activation = (
            f"Attempts at: {abstract_text(ep.task.goal)} -- failed after {reached} steps "
            f"(reward {ep.reward:g})"
        )
        return Payload(_clip(activation, MAX_ACTIVATION), _clip(procedure, MAX_PROCEDURE), "")

    # -- env tree --------------------------------------------------------------
    def _tw_facts(self, ep: Episode) -> list[str]:
        """TextWorld knowledge, read from the generator's prose: the placements the game
        scored first (``iron: belongs in/on ironing board (putting it there scored)``, a put
        or insert step whose reward was positive: an interaction rule of the world, App.
        C.5 (B)), then ``item: found in/on place`` for every thing seen on or in another
        (or on the floor of a room: the room). The household patterns of :meth:`_facts`
        find nothing in TextWorld's prose: before these, every TextWorld Env-Tree node
        said "(no object locations were observed)"."""
        scored: list[str] = []
        seen: list[str] = []
        first = ep.task.observation or ep.task.scene
        room = ""
        for step in [Step(action="", observation=first), *ep.steps]:
            m = _TW_PLACING.match(abstract_text(step.action).lower())
            if m and step.reward > 0 and not _is_invalid(step):
                scored.append(f"{m.group(1)}: belongs in/on {m.group(2)} "
                              "(putting it there scored)")
            obs = step.observation
            heading = _TW_ROOM.search(obs)
            if heading:
                room = heading.group(1).strip().lower()
            pairs: list[tuple[str, str]] = []
            for rx, place_first in ((_TW_ON, True), (_TW_CONTAINS, True), (_TW_SEEN_ON, False)):
                for a, b in rx.findall(obs):
                    place, listing = (a, b) if place_first else (b, a)
                    pairs.append((place, _TW_FLAVOUR.sub("", listing)))
            if room:
                pairs += [(room, listing) for listing in _TW_FLOOR.findall(obs)]
            for place, listing in pairs:
                place = abstract_text(place).lower().strip()
                for item in _split_items(listing):
                    seen.append(f"{item}: found in/on {place}")
        return list(dict.fromkeys(scored + seen))

    def _facts(self, ep: Episode) -> list[str]:
        facts: list[str] = []
        first = ep.task.observation or ep.task.scene
        texts = [("", first)] + [(s.action, s.observation) for s in ep.steps]
        for action, obs in texts:
            target = None
            m = _TARGET.match(abstract_text(action).lower())
            if m:
                target = m.group(1)
            for place, listing in _SEE.findall(obs):
                place = abstract_text(place).lower().strip()
                if place in ("it", "there", "here"):
                    continue  # "In it, you see ..." is handled with the action's target
                if place.startswith("middle of"):
                    items = _split_items(listing)
                    if items:
                        facts.append("places here: " + ", ".join(dict.fromkeys(items)))
                    continue
                for item in _split_items(listing):
                    facts.append(f"{item}: found in/on {place}")
            for listing in _AROUND.findall(obs):
                items = _split_items(listing)
                if items:
                    facts.append("places here: " + ", ".join(dict.fromkeys(items)))
            if target:
                for listing in _IN_IT.findall(obs):
                    for item in _split_items(listing):
                        facts.append(f"{item}: found in/on {target}")
            for place, state in _STATE.findall(obs):
                if state.lower() in ("closed", "locked"):
                    facts.append(
                        f"{abstract_text(place).lower()}: starts {state.lower()}; "
                        "open it before taking or putting things"
                    )
            if action and _is_invalid(Step(action=action, observation=obs)):
                facts.append(f"pitfall: '{abstract_text(action)}' had no effect")
        return list(dict.fromkeys(facts))

    def _knowledge(self, ep: Episode, chain: Sequence[ChainEntry], sw: bool = False,
                   tw: bool = False) -> Payload | None:
        if sw:
            facts = _sw_facts(ep)
        elif tw:  # TextWorld's own prose first, then what the household patterns find
            facts = list(dict.fromkeys(self._tw_facts(ep) + self._facts(ep)))
        else:
            facts = self._facts(ep)
        scene = abstract_text(ep.task.scene_text)[:240]
        if chain:
            known = _chain_lines(chain)
            facts = [f for f in facts if f.lower() not in known]
            if not facts:
                return None
            facts = facts[:8]
        if not facts:
            facts = ["(no object locations were observed)"]
        procedure = "\n".join(f"- {f}" for f in facts[:30])
        return Payload(
            _clip(f"Applicable in scenes like: {scene}", MAX_ACTIVATION),
            _clip(procedure, MAX_PROCEDURE),
            "When the needed objects and places are known.",
        )

    # -- consolidation (Eq. 8) -----------------------------------------------------
    def consolidate(self, tree: TreeName, chain: Sequence[ChainEntry], domain: str) -> Payload:
        """Eq. 8 without an LLM: one payload holding the chain's composed steps (Eq. 7,
        :func:`chain_steps`: a consolidated skill composes to what its chain did), then the
        chain's other lines once each (where things were; a failure record's lines marked
        ``[WARN]``). Step lines are never clipped; the other lines are, from the end."""
        get_domain(domain)
        if not chain:
            raise ValueError("cannot consolidate an empty chain")
        seen: set[str] = set()
        steps: list[str] = []
        for n, line in enumerate(chain_steps(chain), 1):
            seen.add(line.lower())
            steps.append(f"{n}. {line}")
        rest: list[str] = []
        for e in chain:
            for line in e.payload.procedure.splitlines():
                key = _strip_number(line)
                if (not key or key in seen or key.startswith("extra steps not in")
                        or _STEP_NO.match(line) or is_edit_line(line)):
                    continue
                seen.add(key)
                prefix = "[WARN] " if e.label == "FAILURE" and not line.startswith("[") else ""
                rest.append(prefix + line.strip())
        activation = next((e.payload.activation for e in chain if e.label == "SUCCESS"),
                          chain[0].payload.activation)
        termination = next(
            (e.payload.termination for e in reversed(chain) if e.payload.termination), ""
        )
        body = "\n".join(steps)
        more = fit_lines("\n".join(rest), MAX_PROCEDURE - len(body) - 1)
        return Payload(_clip(activation, MAX_ACTIVATION),
                       "\n".join(x for x in (body, more) if x), termination)
