"""Forgetting and the recall budget, on recalled chains (pure: no I/O, no model).

Two rules DeltaMem applies to a recalled root → v* chain (Eq. 7) before it is rendered:

* **Supersession** (:func:`supersede`; ``DeltaMemConfig.supersede``). Environment
  knowledge is a list of ``- subject: fact`` lines (the structural extractor writes
  ``- egg: found in/on fridge``, ``- fridge: starts closed; ...``). Deeper nodes of a
  chain were written later, from a newer observation of the same place (the match that
  put them there, Eq. 4–5). When a newer node states facts about a subject, an older
  node's line about that subject whose fact the newer node does not repeat is
  *superseded*: left out of the recall rather than kept beside the newer one. Repeated
  facts stay; lines without a ``subject:`` are never superseded (free-text knowledge,
  such as an LLM extractor's, is kept whole).
* **The recall budget** (:func:`fit_budget`; ``DeltaMemConfig.max_recall_tokens``). A
  recall longer than the budget is cut in this order: first the Env-Tree's chain from its
  *root* side (its deeper nodes are newer observations of the same place), down to its
  deepest entry, then the Env-Tree's section; then the Task-Tree's chain from its *deep*
  side, down to its ROOT; then the text is cut at the budget (its beginning kept, a marker
  saying how much was cut). The Task-Tree keeps its root because every residual is a delta
  on its ancestors (Eq. 7): without the base skill the deltas say "extra steps" of a
  procedure the agent no longer sees. Measured on household (30 demonstrations, model-free
  agent with the guide, 60 unseen games): cutting the task chain from the root side at 150
  tokens took success from 83.3 % to 30.0 %. Tokens are counted as the paper's Table 5
  counts them: whitespace-separated words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from deltamem.core.payload import ChainEntry
from deltamem.text import normalise

__all__ = [
    "BudgetCut",
    "Superseded",
    "count_tokens",
    "fit_budget",
    "knowledge_subject",
    "supersede",
]

_LINE = re.compile(r"^\s*[-*•]\s*(?P<subject>[^:\n]{1,80}?)\s*:\s*(?P<fact>\S.*?)\s*$")


def count_tokens(text: str) -> int:
    """Whitespace tokens (the unit of the paper's Table 5 and of ``max_recall_tokens``)."""
    return len(text.split())


def knowledge_subject(line: str) -> tuple[str, str] | None:
    """``(subject, fact)`` of a ``- subject: fact`` knowledge line, normalised (lower case,
    single spaces); ``None`` for any other line.

    >>> knowledge_subject("- egg: found in/on sinkbasin")
    ('egg', 'found in/on sinkbasin')
    >>> knowledge_subject("Open the fridge first.") is None
    True
    """
    m = _LINE.match(line)
    if m is None:
        return None
    return normalise(m.group("subject")), normalise(m.group("fact"))


@dataclass(frozen=True)
class Superseded:
    """One knowledge line left out because a newer chain entry contradicts it.

    ``index``/``by``: positions in the chain (root 0) of the entry that held the line and
    of the newest entry stating facts about the same ``subject``; ``line``: the line.
    """

    index: int
    subject: str
    line: str
    by: int


def supersede(chain: Sequence[ChainEntry]) -> tuple[list[ChainEntry], list[Superseded]]:
    """The chain with superseded knowledge lines left out (module doc), and what was.

    An entry whose every line is superseded keeps its activation and reads
    ``(superseded by newer knowledge)``; entries are never removed, so positions and
    the chain's shape stay those of the bank.

    >>> from deltamem.core.payload import Payload
    >>> old = ChainEntry("ROOT", "SUCCESS", Payload("a kitchen", "- egg: found in/on sinkbasin\\n"
    ...                                             "- fridge: starts closed"))
    >>> new = ChainEntry("RESIDUAL", "SUCCESS", Payload("a kitchen", "- egg: found in/on fridge"))
    >>> kept, gone = supersede([old, new])
    >>> kept[0].payload.procedure, [(g.subject, g.by) for g in gone]
    ('- fridge: starts closed', [('egg', 1)])
    """
    newest: dict[str, tuple[int, set[str]]] = {}
    for i, entry in enumerate(chain):
        facts: dict[str, set[str]] = {}
        for line in entry.payload.procedure.splitlines():
            parsed = knowledge_subject(line)
            if parsed is not None:
                facts.setdefault(parsed[0], set()).add(parsed[1])
        for subject, found in facts.items():
            newest[subject] = (i, found)
    kept: list[ChainEntry] = []
    gone: list[Superseded] = []
    for i, entry in enumerate(chain):
        lines = entry.payload.procedure.splitlines()
        keep = []
        for line in lines:
            parsed = knowledge_subject(line)
            if parsed is not None:
                by, facts = newest[parsed[0]]
                if by > i and parsed[1] not in facts:
                    gone.append(Superseded(i, parsed[0], line.strip(), by))
                    continue
            keep.append(line)
        if len(keep) == len(lines):
            kept.append(entry)
            continue
        text = "\n".join(keep).strip() or "(superseded by newer knowledge)"
        kept.append(replace(entry, payload=replace(entry.payload, procedure=text)))
    return kept, gone


@dataclass(frozen=True)
class BudgetCut:
    """What :func:`fit_budget` left out to fit the recall budget.

    ``dropped``: per tree, the chain positions (root 0) no longer shown; ``truncated``:
    tokens cut from the end of the text by the last resort (0 when none);
    ``tokens_before`` / ``tokens_after``: the recall's size.
    """

    dropped: Mapping[str, tuple[int, ...]]
    truncated: int
    tokens_before: int
    tokens_after: int

    @property
    def cut(self) -> bool:
        return self.tokens_after < self.tokens_before


def fit_budget(
    chains: Mapping[str, Sequence[ChainEntry]],
    render: Callable[[Mapping[str, Sequence[int]]], str],
    max_tokens: int,
) -> tuple[str, BudgetCut]:
    """The recall text within ``max_tokens`` (module doc, the recall budget).

    ``chains``: each tree's recalled chain, root first, in prompt order; ``render(shown)``
    renders the recall showing, per tree, the chain positions ``shown`` (a tree absent or
    with no position is left out). Returns the text and what was cut.
    """
    shown = {t: list(range(len(c))) for t, c in chains.items() if c}
    text = render(shown)
    before = count_tokens(text)
    if before <= max_tokens:
        return text, BudgetCut({}, 0, before, before)
    while count_tokens(text) > max_tokens:
        env, task = shown.get("env", []), shown.get("task", [])
        if len(env) > 1:
            env.pop(0)  # the older observations of the place first
        elif env and len(shown) > 1:
            shown["env"] = []
        elif len(task) > 1:
            task.pop()  # the task chain keeps its base skill (Eq. 7) longest
        else:
            longer = [t for t in shown if t not in ("env", "task") and len(shown[t]) > 1]
            if not longer:
                break
            shown[longer[0]].pop(0)
        text = render(shown)
    truncated = 0
    words = text.split()
    if len(words) > max_tokens:
        marker = "[... {} tokens cut: recall budget]"
        keep = max(0, max_tokens - len(marker.format(0).split()))
        truncated = len(words) - keep
        text = _first_words(text, keep) + "\n" + marker.format(truncated)
    dropped = {t: tuple(i for i in range(len(chains[t])) if i not in shown.get(t, []))
               for t in chains if chains[t]}
    return text, BudgetCut({t: d for t, d in dropped.items() if d}, truncated, before,
                           count_tokens(text))


def _first_words(text: str, n: int) -> str:
    """The beginning of ``text`` up to its ``n``-th word, line breaks kept."""
    if n <= 0:
        return ""
    for count, m in enumerate(re.finditer(r"\S+", text), start=1):
        if count == n:
            return text[: m.end()]
    return text
