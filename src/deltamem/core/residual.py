"""How a skill chain's steps compose when a residual replaces steps (§3.2, Eq. 7).

A residual node stores "the incremental modification relative to its parent chain"
(§3.2), and retrieval "reconstruct[s] the full experience via root-to-match chain
composition" (Eq. 7). The structural extractor writes a residual skill in one of two forms
(:attr:`deltamem.domains.DomainPreset.skill_deltas`):

* **additions**: "Extra steps not in the base:" and the steps the chain lacks; the chain's
  procedure is the base's steps, then each delta's, in order (the form for an episode that
  did everything the chain does, and more);
* **replace**: a first line ``Replaces the base from step N ("<step>") on:`` and then the
  episode's steps from that point: the chain's procedure keeps its steps before step N and
  continues with the delta's. Written when the episode left out a step of the chain (a
  freeze experiment filed under a melt skill must not inherit "activate stove"), so the
  composed chain of a success node is the procedure of the episode that wrote it.

Step N counts the steps of the composed parent chain, as :func:`compose` returns them.
A reader whose step list differs from the writer's (the agent's guide keeps only the
lines that look like actions) finds the quoted step by its text instead; when the step is
not there at all, the delta's steps are appended, as an addition would be.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

__all__ = ["Replacement", "compose", "cut_at", "replacement", "replacement_line"]

T = TypeVar("T")

_LINE = re.compile(r'^\s*(?:procedure:\s*)?replaces the base from step (\d+) \("(.*)"\) on:\s*$',
                   re.IGNORECASE | re.MULTILINE)


class Replacement(NamedTuple):
    """Where a replacing delta starts: step ``number`` (1-based) of the composed parent
    chain, whose text is ``step``."""

    number: int
    step: str


def replacement_line(number: int, step: str) -> str:
    """The first line of a replacing delta's procedure."""
    if number < 1:
        raise ValueError(f"steps are numbered from 1, got {number}")
    return f'Replaces the base from step {number} ("{" ".join(step.split())}") on:'


def replacement(text: str) -> Replacement | None:
    """The replacement a delta's text announces, or ``None`` (an additions delta, or any
    other text)."""
    m = _LINE.search(text)
    if m is None:
        return None
    return Replacement(int(m.group(1)), _norm(m.group(2)))


def _norm(step: str) -> str:
    return " ".join(step.lower().split()).rstrip(".").strip()


def cut_at(steps: Sequence[str], where: Replacement) -> int:
    """The index of ``steps`` from which a delta announcing ``where`` replaces them: step
    ``number`` when its text is the quoted one, else the first step of that text, else
    ``len(steps)`` (nothing is replaced: the delta's steps follow, as additions)."""
    i = where.number - 1
    norm = [_norm(s) for s in steps]
    target = _norm(where.step)
    if 0 <= i < len(norm) and norm[i] == target:
        return i
    try:
        return norm.index(target)
    except ValueError:
        return len(norm)


def compose(parts: Sequence[tuple[Replacement | None, Sequence[T]]],
            text: Callable[[T], str] = str) -> list[tuple[int, T]]:
    """Eq. 7 on step lists: ``parts`` holds, root first, each chain item's replacement
    (``None`` for a root or an additions delta) and its steps; returns the chain's steps as
    ``(part index, step)`` pairs. ``text`` gives a step's text (the steps may carry more)."""
    out: list[tuple[int, T]] = []
    for n, (where, steps) in enumerate(parts):
        if where is not None and n > 0:
            out = out[:cut_at([text(s) for _, s in out], where)]
        out.extend((n, s) for s in steps)
    return out
