"""The action grammar MCMA's rule-based preprocessing reads (§3.1, Appendix A.3).

Actions of the text environments fall into a few kinds, recognised by their verb:

* ``observe``: actions that only read the world (``look``, ``inventory``, ``examine``,
  ``check valid actions``, ...): task-irrelevant for a memory of *how* a task was done;
* ``navigate``: moving the agent (``go to``, ``teleport to``, BabyAI's ``turn left``,
  ``turn right``, ``move forward``);
* ``milestone``: interactions that change what the agent holds or what an object is
  (``take``, ``put``/``move … to``, ``clean``/``heat``/``cool``/``slice``, ``use``,
  ``pick up``, ``drop``, ``toggle``, ``focus on``, ``activate``, ``pour``, ``mix``, ...);
  a subtask ends on one of these;
* ``other``: everything else (``open``, ``close``, ``wait``, ...): preparation inside a
  subtask.

``direct_navigation`` says whether one navigation action reaches any place (household /
ALFWorld ``go to X``); then a ``go to`` followed by another ``go to`` with nothing done in
between was a detour and can be pruned. In ScienceWorld (rooms connected by doors) and
BabyAI (egocentric moves) every move matters, so it is off there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ActionKind", "Grammar", "grammar_for"]

ActionKind = Literal["observe", "navigate", "milestone", "other"]

_OBSERVE = re.compile(
    r"^(?:look(?: around| at| in)?\b|inventory\b|examine\b|read\b|check valid actions\b|help\b|"
    r"task\b|score\b|l$|i$)")
_NAVIGATE = re.compile(r"^(?:go to\b|go\b|teleport to\b|turn left$|turn right$|move forward$|"
                       r"walk to\b|travel to\b)")
_MILESTONE = re.compile(
    r"^(?:take\b|get\b|pick up\b|put\b|place\b|move\b|drop\b|clean\b|heat\b|cool\b|slice\b|"
    r"use\b|toggle\b|focus on\b|activate\b|deactivate\b|pour\b|mix\b|connect\b|disconnect\b|"
    r"eat\b|plant\b|dunk\b|fill\b|buy\b|click\b|insert\b|unlock\b|cook\b|chop\b|dice\b)")
_INVALID = (
    "nothing happens", "nothing happened", "no known action", "unknown action", "can't",
    "cannot", "not possible", "you don't", "i don't understand", "doesn't", "invalid",
    "that's not a verb", "you can't",
)
_NUM = re.compile(r"\b([A-Za-z][\w-]*) \d+\b")


@dataclass(frozen=True)
class Grammar:
    """How a domain's actions are read (see the module docstring)."""

    name: str = "generic"
    direct_navigation: bool = False
    #: pairs of actions that undo each other when taken back to back
    inverses: tuple[tuple[str, str], ...] = ()

    def kind(self, action: str) -> ActionKind:
        a = " ".join(action.lower().split())
        if _NAVIGATE.match(a):
            return "navigate"
        if _OBSERVE.match(a):
            return "observe"
        if _MILESTONE.match(a):
            return "milestone"
        return "other"

    @staticmethod
    def rejected(observation: str) -> bool:
        """Whether an observation says the action had no effect."""
        o = observation.strip().lower()
        first = o.split(".", 1)[0]
        return any(o.startswith(h) for h in _INVALID) or " is already " in f" {first} "

    def undoes(self, first: str, second: str) -> bool:
        pair = (" ".join(first.lower().split()), " ".join(second.lower().split()))
        return pair in self.inverses or pair[::-1] in self.inverses

    def inverse_of(self, action: str) -> str | None:
        """The action undoing ``action`` (``None`` when the grammar knows none)."""
        a = " ".join(action.lower().split())
        for x, y in self.inverses:
            if a == x:
                return y
            if a == y:
                return x
        return None

    @staticmethod
    def abstract(action: str) -> str:
        """The action without instance numbers ("take bowl 1 from cabinet 2" → "take bowl
        from cabinet")."""
        return " ".join(_NUM.sub(r"\1", action).split())


_GRAMMARS = {
    "alfworld": Grammar("alfworld", direct_navigation=True),
    "scienceworld": Grammar("scienceworld"),
    "babyai": Grammar("babyai", inverses=(("turn left", "turn right"),)),
    "generic": Grammar("generic"),
    "textworld": Grammar("textworld"),
    "webshop": Grammar("webshop"),
}


def grammar_for(domain: str, actions: tuple[str, ...] = ()) -> Grammar:
    """The grammar of ``domain``; BabyAI (domain ``generic``) is recognised by its actions."""
    if domain == "generic" and actions and all(
            a in ("turn left", "turn right", "move forward", "pick up", "drop", "toggle")
            for a in actions):
        return _GRAMMARS["babyai"]
    return _GRAMMARS.get(domain, _GRAMMARS["generic"])
