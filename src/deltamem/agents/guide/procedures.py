"""Items, best first: the procedures a recall holds, in the order the guide tries them.

A recall's items reach the guide as items, not as one text: each item that starts a
procedure is followed on its own, in the order of its system's own score (the prompt order
when there is none); a ``delta`` item belongs to the chain of the item before it (DeltaMem's
root-to-match chain, Eq. 7, is one procedure: a delta that edits the chain's steps puts its
own in their place, :mod:`deltamem.core.residual`), and ``warning`` items are never followed
(they reach the prompt as text, like insights and lessons that hold no steps). The guide
follows the best procedure whose next step some admissible action realises and falls back to
the next one when it cannot be realised here. A recall without items is one procedure: its
text. Knowledge lines are read from the whole recall
(:mod:`deltamem.agents.guide.knowledge`).
"""

from __future__ import annotations

import math

from deltamem.types import Recall


def procedures(recall: Recall | str) -> list[str]:
    """The texts the guide may follow, best first (module doc)."""
    return ["\n".join(parts) for parts in procedure_items(recall)]


def procedure_items(recall: Recall | str) -> list[list[str]]:
    """Each procedure of :func:`procedures` as its items' texts (a chain: base, deltas)."""
    if isinstance(recall, str):
        return [[recall]] if recall.strip() else []
    if not recall.items:
        return [[recall.text]] if recall.text.strip() else []
    units: list[tuple[float, int, list[str]]] = []
    last_source: str | None = None
    for n, item in enumerate(recall.items):
        if item.role == "warning":
            continue
        score = -math.inf if item.score is None else float(item.score)
        if item.role == "delta" and units and item.source == last_source:
            best, first, texts = units[-1]
            units[-1] = (max(best, score), first, [*texts, item.text])
        else:
            units.append((score, n, [item.text]))
            last_source = item.source
    units.sort(key=lambda u: (-u[0], u[1]))
    return [texts for _, _, texts in units if any(t.strip() for t in texts)]
