"""Reading the agent's reply: the thought, the action, and whether the action is admissible.

Contract:

* :func:`parse_reply` takes the model's raw text and returns the thought and
  the action. The action is the text of the **last** ``Action:`` line (labels
  are matched case-insensitively and may be decorated: ``**Action:**``,
  ``Action 3:``, ``> Action:``); when that line is empty, the next non-empty
  line is used. Without any ``Action:`` label, a reply that has no
  ``Thought:`` label either is taken as a bare action (its last non-empty
  line); a reply with only a thought yields the action ``""``.
* :func:`clean_action` strips what models wrap around actions: whitespace,
  quotes, backticks, a leading ``>``, trailing periods; inner whitespace is
  collapsed.
* :func:`match_action` maps an action onto the admissible list: exact match
  after case folding and whitespace collapsing, returning the admissible
  spelling; an admissible entry containing a ``<placeholder>`` (for example
  WebShop's ``search[<keywords>]``) matches any action of that shape with
  non-empty text in place of the placeholder. ``None`` means not admissible.
  An empty admissible list means "unknown": every non-empty action passes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from deltamem.text import fold as _key
from deltamem.text import squash

__all__ = ["Reply", "clean_action", "has_placeholder", "match_action", "parse_reply"]

_LABEL = re.compile(
    r"^\s*(?:>\s*)?[*_#\s]*(?P<label>thought|action)\s*\d*\s*[*_]*\s*[:：]\s*[*_]*\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(r"<[^<>]+>")
_QUOTES = "\"'`“”‘’"


@dataclass(frozen=True)
class Reply:
    """A parsed model reply: the thought (possibly empty) and the action (possibly empty)."""

    thought: str
    action: str


def clean_action(text: str) -> str:
    """The action without decoration: quotes, backticks, leading ``>``, trailing periods."""
    s = squash(text)
    for _ in range(3):  # peel nested decoration such as `"go to desk 1."`
        before = s
        s = s.strip().strip(_QUOTES).strip()
        if s.startswith(">"):
            s = s[1:].strip()
        s = s.rstrip(".").rstrip()
        if s.startswith("**") and s.endswith("**") and len(s) > 4:
            s = s[2:-2]
        if s == before:
            break
    return s


def parse_reply(text: str) -> Reply:
    """Split a free-form reply into its thought and its (last) action; see the module contract."""
    lines = text.splitlines()
    labelled: list[tuple[int, str, str]] = []
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if m:
            labelled.append((i, m.group("label").lower(), m.group("rest")))
    actions = [x for x in labelled if x[1] == "action"]
    thoughts = [x for x in labelled if x[1] == "thought"]
    if not actions:
        if thoughts:
            start = thoughts[-1][0]
            body = [thoughts[-1][2], *lines[start + 1 :]]
            return Reply(thought=squash(" ".join(body)), action="")
        rest = [ln for ln in lines if ln.strip()]
        return Reply(thought="", action=clean_action(rest[-1]) if rest else "")
    idx, _, rest = actions[-1]
    action = rest
    if not action.strip():
        following = [ln for ln in lines[idx + 1 :] if ln.strip()]
        action = following[0] if following else ""
    thought = ""
    before = [x for x in thoughts if x[0] < idx]
    if before:
        start = before[-1][0]
        body = [before[-1][2], *lines[start + 1 : idx]]
        body = [b for b in body if not _LABEL.match(b)]
        thought = squash(" ".join(body))
    return Reply(thought=thought, action=clean_action(action))


def has_placeholder(action: str) -> bool:
    """True when an admissible entry is a template such as ``search[<keywords>]``."""
    return bool(_PLACEHOLDER.search(action))


@lru_cache(maxsize=256)
def _template(entry: str) -> re.Pattern[str]:
    parts = _PLACEHOLDER.split(entry)
    pattern = "(.+?)".join(re.escape(squash(p)) for p in parts)
    return re.compile(pattern, re.IGNORECASE | re.DOTALL)


def match_action(action: str, admissible: Sequence[str]) -> str | None:
    """The admissible spelling of ``action``, or ``None`` when it is not admissible."""
    action = squash(action)
    if not action:
        return None
    if not admissible:
        return action
    key = _key(action)
    for entry in admissible:
        if _key(entry) == key and not has_placeholder(entry):
            return entry
    for entry in admissible:
        if not has_placeholder(entry):
            continue
        m = _template(entry).fullmatch(action)
        if m and all(g.strip() for g in m.groups()):
            fixed = _PLACEHOLDER.split(entry)
            out = fixed[0]
            for value, tail in zip(m.groups(), fixed[1:], strict=True):
                out += value.strip() + tail
            return out
    return None
