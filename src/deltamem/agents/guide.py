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
4. **Realising a step** (:func:`realises`). An admissible action realises a step
   *exactly* when both read the same with instance numbers dropped ("go to
   microwave" ~ "go to microwave 1"); *loosely* when they share the verb and every
   word that differs is not a word of the current goal ("take tomato from fridge" ~
   "take tomato 1 from countertop 2": where the recalled game's object lay is
   incidental; "put tomato in/on countertop" does not realise "put tomato in/on
   diningtable", since diningtable is in the goal). Exact realisations win when
   there are any.
5. **Back-tracking**. When nothing admissible realises the pointed step (the
   object is not where it was in the recalled game), the guide first opens what
   is closed here (an admissible ``open ...`` not taken yet: the object may be
   inside), then goes back to the nearest earlier step that some admissible
   action *not yet taken* realises loosely — "go to fridge" becomes "go to some
   place not visited yet", "open fridge" becomes "open this cabinet" — so the
   recalled approach is retried elsewhere, which is a search. The search goes
   first where the recalled knowledge found one of the goal's objects (lines
   ``- cup: found in/on cabinet`` put "go to cabinet 3" before "go to shelf 1").

:class:`Advice` carries the hint line (for ``guide=hint``) and the admissible
actions that realise the step (for ``guide=prior``: the constrained choice is made
among them, i.e. they get an unbounded bonus over the rest; with none, the model
chooses among all admissible actions as usual).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

__all__ = [
    "Advice",
    "Guide",
    "abstract_action",
    "goal_bindings",
    "realises",
    "recalled_steps",
]

_NUMBER = re.compile(r"(?<=[a-z-])\s+\d+\b")
_PREFIX = re.compile(r"^\s*(?:[-*+>•]\s*|\d+[.)]\s*|action\s*\d*\s*:\s*)+", re.IGNORECASE)
_WORD = re.compile(r"\{[A-Z]\}|[A-Za-z0-9][A-Za-z0-9/'-]*")
_BAD = ("fail", "warn", "unexplored", "pitfall", "no effect")
_STOP_WORDS = (
    "a an the to in on at of for from with and or into onto some it your you is are be "
    "then put place find look get go two one any all under by"
)
_STOP = frozenset(_STOP_WORDS.split())
LOOKAHEAD = 3
_MOVES = frozenset({"go", "walk", "teleport"})
_FOUND = re.compile(
    r"(?:^|\s)[-*]\s*([A-Za-z][\w-]*):\s*found in/on\s+([A-Za-z][\w -]*?)\s*$", re.MULTILINE)


def _words(text: str) -> list[str]:
    return [w if w.startswith("{") else w.lower() for w in _WORD.findall(text)]


def abstract_action(action: str) -> str:
    """Lower case, instance numbers dropped ("cabinet 3" → "cabinet"), spaces collapsed."""
    return " ".join(_NUMBER.sub("", " ".join(action.lower().split())).split())


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


def goal_bindings(recall_text: str, goal: str, verbs: Iterable[str] = ()) -> dict[str, str]:
    """Substitutions from recalled-goal words to current-goal words (module doc, rule 2).

    Differing spans are bound word for word (spans of equal length only); a recalled word
    that is an action verb (``verbs``: "cool", "heat") is never rewritten, so a recalled
    procedure of another task type keeps its own actions.
    """
    target = _words(goal)
    if not target:
        return {}
    verbs = {v.lower() for v in verbs}
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
                found.setdefault(cand[i1], target[j2 - 1])
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
    return out


def realises(action: str, step: str, goal_words: frozenset[str]) -> str | None:
    """How ``action`` realises ``step``: ``"exact"``, ``"loose"`` or ``None`` (rule 4)."""
    a, s = abstract_action(action), abstract_action(step)
    if a == s:
        return "exact"
    aw, sw = a.split(), s.split()
    if not aw or not sw or aw[0] != sw[0]:
        return None
    sm = SequenceMatcher(None, sw, aw, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        changed = set(sw[i1:i2]) | set(aw[j1:j2])
        if not changed or changed & goal_words or i2 - i1 > 3 or j2 - j1 > 3:
            return None
        if tag != "replace":  # a word added or dropped changes what the action does
            return None
    return "loose"


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
    """The recalled procedure of one episode, followed against the actions taken."""

    def __init__(self, recall_text: str, goal: str) -> None:
        self.recall_text = recall_text
        self.goal = goal
        self.goal_words = frozenset(w for w in _words(goal) if w not in _STOP)

    def known_places(self) -> frozenset[str]:
        """Kinds of places where the recall says one of the goal's objects was found
        (rule 5; knowledge lines ``- <object>: found in/on <place>``)."""
        out = set()
        for m in _FOUND.finditer(self.recall_text):
            if m.group(1).lower() in self.goal_words:
                out.add(abstract_action(m.group(2)))
        return frozenset(out)

    def bindings(self, verbs: Iterable[str]) -> dict[str, str]:
        """The substitutions of rule 2 (``verbs``: the action verbs seen so far)."""
        return goal_bindings(self.recall_text, self.goal, verbs)

    def steps(self, verbs: Iterable[str]) -> list[str]:
        """The recalled steps (rule 1) with the goal's words filled in (rule 2)."""
        verbs = set(verbs)
        raw = recalled_steps(self.recall_text, verbs)
        recalled_verbs = verbs | {s.split()[0].lower() for s in raw}
        bindings = self.bindings(recalled_verbs)
        return [_fill(s, bindings) for s in raw]

    def advise(self, admissible: Sequence[str], taken: Sequence[str],
               offered: Iterable[str] = ()) -> Advice:
        """Advice for the next decision.

        Args:
            admissible: the actions admissible now.
            taken: the valid actions taken so far in this episode, in order.
            offered: every action the environment has offered in this episode (their
                first words are the verbs that make a recall line a step).
        """
        verbs = {a.split()[0].lower() for a in (*offered, *admissible) if a.split()}
        steps = self.steps(verbs)
        if not steps:
            return Advice(None)
        k = self._progress(steps, taken)
        if k >= len(steps):
            return Advice(None)
        exact, loose = self._realisations(steps[k], admissible)
        if exact or loose:
            return Advice(steps[k], tuple(exact or loose))
        for j in range(k + 1, min(k + 1 + LOOKAHEAD, len(steps))):
            # a later goal step is right here (the recalled game needed e.g. an "open" that
            # this one does not): skip to it -- unless it is a move: "go to countertop 1" is
            # admissible from anywhere, so it proves nothing about the skipped steps (going
            # to the goal's receptacle before taking the object is no progress)
            if steps[j].split()[0].lower() in _MOVES:
                continue
            exact, _ = self._realisations(steps[j], admissible)
            if exact and set(_words(steps[j])) & self.goal_words:
                return Advice(steps[j], tuple(exact))
        done = {" ".join(a.lower().split()) for a in taken}
        opened = [a for a in admissible if a.split() and a.split()[0].lower() == "open"
                  and " ".join(a.lower().split()) not in done]
        if opened and k > 0:
            # the step cannot be done here: look inside what is closed here before moving on
            return Advice(steps[k], tuple(opened), backtrack=True, blocked=steps[k])
        places = self.known_places()
        for j in range(k - 1, -1, -1):
            exact, loose = self._realisations(steps[j], admissible)
            fresh = [a for a in (*exact, *loose) if " ".join(a.lower().split()) not in done]
            if fresh:
                liked = [a for a in fresh if places & set(abstract_action(a).split()[1:])]
                return Advice(steps[j], tuple(liked or fresh), backtrack=True,
                              blocked=steps[k])
        return Advice(steps[k])

    def _progress(self, steps: list[str], taken: Sequence[str]) -> int:
        k = 0
        for action in taken:
            for j in range(k, min(k + 1 + LOOKAHEAD, len(steps))):
                if j > k and set(_words(steps[j - 1])) & self.goal_words:
                    break  # a step about the goal's own objects is never skipped
                how = realises(action, steps[j], self.goal_words)
                if how == "exact" or (how == "loose" and j == k):
                    k = j + 1
                    break
        return k

    def _realisations(self, step: str, admissible: Sequence[str]) -> tuple[list[str], list[str]]:
        exact: list[str] = []
        loose: list[str] = []
        for a in admissible:
            how = realises(a, step, self.goal_words)
            if how == "exact":
                exact.append(a)
            elif how == "loose":
                loose.append(a)
        return exact, loose
