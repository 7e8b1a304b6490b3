"""What a recall's warning items say to avoid (issue: failures the agent reads).

Every system's failure-derived items reach the guide with role ``warning`` (DeltaMem's
FAILURE nodes, ReasoningBank's preventive strategies, the lessons and MCMA entries of failed
episodes): they are never followed as steps (:mod:`deltamem.agents.guide.procedures`), and
this module reads what they say to avoid:

* **commands that had no effect**: a line ``- <action> -> <answer>`` whose answer is an
  environment's no-effect answer (:func:`deltamem.text.no_effect`), as DeltaMem's failure
  records (``[FAILED]``) and ReasoningBank's "commands with no effect" warnings write them.
  The action is kept as a pattern: instance numbers dropped, a placeholder (``{A}``) stands
  for any words;
* **places searched in vain**: a line ``searched in vain for <thing>: <place>, ...``
  (:func:`deltamem.extract.structural.StructuralExtractor`'s failure records).

The ``heed-warnings`` rule (:mod:`deltamem.agents.guide.rules.heed_warnings`) applies them
to the advice, as things to try last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from deltamem.agents.guide.actions import abstract_action
from deltamem.text import no_effect

__all__ = ["Warnings", "read_warnings"]

_COMMAND = re.compile(r"^\s*[-*]\s*(.+?)\s*->\s*(.+?)\s*$")
_VAIN = re.compile(r"^\s*[-*]?\s*searched in vain for (.+?):\s*(.+?)\s*$", re.I)
_PLACEHOLDER = re.compile(r"\\\{[a-z]\\\}")


@dataclass(frozen=True)
class Warnings:
    """What the warning items of one recall say to avoid.

    Attributes:
        commands: patterns of the commands that had no effect (compiled, matched against an
            action's :func:`~deltamem.agents.guide.actions.abstract_action`).
        vain: ``{thing: place kinds}``, where a thing was searched for in vain.
    """

    commands: tuple[re.Pattern[str], ...] = ()
    vain: dict[str, frozenset[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.commands or self.vain)

    def failed(self, action: str) -> bool:
        """Whether ``action`` is a command that had no effect before."""
        text = abstract_action(action)
        return any(p.fullmatch(text) for p in self.commands)

    def searched(self, thing: str | None) -> frozenset[str]:
        """The place kinds where ``thing`` was searched for in vain (empty when unknown)."""
        return self.vain.get(thing, frozenset()) if thing else frozenset()


def read_warnings(texts: Iterable[str]) -> Warnings:
    """The :class:`Warnings` of the warning items' ``texts`` (module doc)."""
    commands: dict[str, re.Pattern[str]] = {}
    vain: dict[str, set[str]] = {}
    for text in texts:
        for line in text.splitlines():
            m = _VAIN.match(line)
            if m:
                places = {abstract_action(p) for p in m.group(2).split(",") if p.strip()}
                vain.setdefault(m.group(1).strip().lower(), set()).update(places)
                continue
            m = _COMMAND.match(line)
            if m and no_effect(m.group(2)):
                action = abstract_action(m.group(1))
                if action and action not in commands:
                    pattern = _PLACEHOLDER.sub(r".+", re.escape(action))
                    commands[action] = re.compile(pattern)
    return Warnings(tuple(commands.values()),
                    {k: frozenset(v) for k, v in vain.items()})
