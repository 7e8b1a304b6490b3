"""Recalled steps: the lines of a recall that read as actions, in order.

Numbering, bullets, ``>`` and ``Action:`` are stripped, and a line counts when its first word
is the verb of an action the environment has offered in this episode (``go``, ``take``,
``heat``, ...), or when it is marked as a step (numbered, ``>``, ``Action:``) and holds no
``:``. A marked line that heads more-indented marked lines is a sub-goal of a tree (MCMA's
plans: ``* Heat potato with microwave`` over ``1. go to microwave`` …), not a step. Sections
and lines about failures are left out (a title or line mentioning *fail*, *warn*,
*unexplored* or *pitfall*: DeltaMem's failure records, ReasoningBank's warnings).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PREFIX = re.compile(r"^\s*(?:[-*+>•]\s*|\d+[.)]\s*|action\s*\d*\s*:\s*)+", re.IGNORECASE)
#: what marks a line (or a section title) as being about failures: never followed
BAD = ("fail", "warn", "unexplored", "pitfall", "no effect")


def _clean_line(line: str) -> str:
    s = _PREFIX.sub("", line.strip()).strip().strip("`'\"").rstrip(".").strip()
    return " ".join(s.split())


def recalled_steps(recall_text: str, verbs: Iterable[str]) -> list[str]:
    """The action-like lines of ``recall_text`` in order (see the module doc)."""
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
            skipping = any(b in low for b in BAD)
            if line.startswith("#"):
                continue
        if skipping or any(b in low for b in BAD):
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
