"""Goal bindings: a recalled procedure's placeholders and entities filled from the goal.

Lines of the recall that read as a goal (DeltaMem's "Tasks of the form: put a hot {A} in
{B}", Synapse's "Task: put a hot apple in countertop", ReasoningBank's "Strategy for: ...")
are aligned word by word with the current goal; each differing span of at most two words, of
equal length on both sides, is bound word for word ({A} → tomato, apple → tomato); action
verbs are never rewritten. The recalled steps are rewritten with them (:func:`fill`).

**Example values**: a placeholder the goal left unbound is filled by its recorded example
value ("({E} = e.g. coin)" in the trigger) when that value names a thing offered in this
episode (:func:`examples`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from difflib import SequenceMatcher
from itertools import pairwise

from deltamem.agents.guide.actions import (
    MOVES,
    PARTICLES,
    PREPOSITIONS,
    STOP,
    abstract_action,
    verb,
    words,
)
from deltamem.agents.guide.steps import BAD
from deltamem.text import normalise

_EXAMPLE = re.compile(r"\{([A-Z])\} = e\.g\. ([A-Za-z][\w -]*?)(?=,\s*\{|\))")


def _goal_candidates(recall_text: str) -> list[list[str]]:
    """Word lists of every line and of each part after a colon, cut at `` (`` / `` --``."""
    out = []
    for raw in recall_text.splitlines():
        line = raw.strip().lstrip("#").strip()
        if not line or any(b in line.lower() for b in BAD):
            continue
        parts = line.split(":")
        for i in range(len(parts)):
            text = ":".join(parts[i:])
            text = re.split(r"\s\(|\s--", text, maxsplit=1)[0]
            found = words(text)
            if found:
                out.append(found)
    return out


def goal_bindings(recall_text: str, goal: str, verbs: Iterable[str] = (),
                  compounds: Iterable[str] = ()) -> dict[str, str]:
    """Substitutions from recalled-goal words to current-goal words (module doc).

    Differing spans are bound word for word (spans of equal length only); a recalled word
    that is an action verb (``verbs``: "cool", "heat") is never rewritten, so a recalled
    procedure of another task type keeps its own actions. A placeholder facing two words
    takes the last one ({A} = "cool tomato": the head noun), or both when they are one of
    ``compounds`` (names of several words the environment uses: "living room"); a run of
    placeholders facing fewer words takes them in order, the rest nothing ("{C} {D}" =
    "living room" in the recalled goal, "bedroom" here).
    """
    target = words(goal)
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
                if src in STOP or dst in STOP or src in verbs:
                    continue
                found.setdefault(src, dst)
    return found


def fill(step: str, bindings: dict[str, str]) -> str:
    """``step`` with each bound word or placeholder of ``bindings`` replaced (the longest
    first); a placeholder bound to nothing leaves no gap."""
    out = step
    for src, dst in sorted(bindings.items(), key=lambda kv: -len(kv[0])):
        if src.startswith("{"):
            out = out.replace(src, dst).replace(src.lower(), dst)
        else:
            out = re.sub(rf"(?<![\w-]){re.escape(src)}(?![\w-])", dst, out, flags=re.IGNORECASE)
    return " ".join(out.split())  # a placeholder bound to nothing leaves no gap


def compounds(actions: Iterable[str], verbs: set[str]) -> frozenset[str]:
    """Two-word names the actions use ("teleport to living room" → "living room"): word
    pairs after the verb whose first word is no verb, particle or preposition."""
    out: set[str] = set()
    skip = verbs | PARTICLES | PREPOSITIONS | STOP
    for a in actions:
        found = abstract_action(a).split()[1:]
        for x, y in pairwise(found):
            if x not in skip and y not in skip and x.isalpha() and y.isalpha():
                out.add(f"{x} {y}")
    return frozenset(out)


def examples(step: str, text: str, seen: frozenset[str]) -> str:
    """``step`` with a placeholder the goal left unbound filled by its recorded example
    value ("({E} = e.g. coin)" in ``text``'s trigger), when that value names a thing in an
    action offered in this episode (``seen``: those actions, abstracted; the same thing is
    here) and the step is not a move (a recalled route is not this game's). A goal
    paraphrased by the game's text generator ("take a trip east ... lift the coin" vs "go
    east ... take the coin") cannot be aligned word by word, and "take {E}" could then never
    be realised."""
    if "{" not in step or verb(step) in MOVES:
        return step
    for ph, value in _EXAMPLE.findall(text):
        value = normalise(value)
        if f"{{{ph}}}" in step and any(f" {value} " in f" {a} " for a in seen):
            step = step.replace(f"{{{ph}}}", value)
    return step
