"""How a skill chain's steps compose when a residual edits them (§3.2, Eq. 7).

A residual node stores "the incremental modification relative to its parent chain"
(§3.2), and retrieval reconstructs "the full experience via root-to-match chain
composition" (Eq. 7). Skills write their steps in two forms:

* **additions** (the paper's "additions such as extra steps"): "Extra steps not in the
  base:" and steps that follow the chain's; the chain's procedure is the base's steps, then
  each delta's, in order;
* **edits**: under "Changes to the base steps:", groups of the episode's steps that stand
  ``instead of`` a run of the chain's steps (none: the run is dropped), or go ``after`` /
  ``before`` one of them, each group's first line naming the chain's steps by number and
  text::

      - instead of steps 4-5 ("move metal pot to stove" to "activate stove"):
      1. move metal pot to freezer
      - after step 7 ("examine {A}"):
      2. use thermometer on {A}

Step numbers count the steps of the composed parent chain, as :func:`compose` returns
them. A reader whose step list differs from the writer's finds a named step by its text
instead; a group whose steps cannot be found is appended, as additions would be.

**The contract** (:func:`delta`): a residual is taken against what its chain composes to,
never against a failure record's text (failure records hold no steps). Whatever its
ancestors' labels, the chain of a SUCCESS node composes to exactly the steps of the
episode it was learned from: :func:`delta` returns additions when the episode only extends
the chain's steps, an edits delta otherwise (steps the episode left out are dropped), and
``None`` when the chain already composes to the episode's steps (the residual *skip*).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Literal, NamedTuple

from deltamem.text import normalise

__all__ = ["EDITS_HEADER", "Delta", "Edit", "compose", "delta", "edit_lines", "edits",
           "is_edit_line", "locate"]

EDITS_HEADER = "Changes to the base steps:"

Kind = Literal["instead", "after", "before"]

_GROUP = re.compile(
    r'^\s*-\s*(instead of|after|before) steps? (\d+)(?:-(\d+))? \("(.*?)"(?: to "(.*)")?\):\s*$',
    re.IGNORECASE)
_STEP = re.compile(r"^\s*\d+\.\s*(.*\S)\s*$")


class Edit(NamedTuple):
    """One group of an edits delta: ``steps`` stand instead of the chain's steps
    ``first``..``last`` (1-based, texts ``first_step``/``last_step``), or go after / before
    step ``first``."""

    kind: Kind
    first: int
    last: int
    first_step: str
    last_step: str
    steps: tuple[str, ...]


def _norm(step: str) -> str:
    # a quote inside a step is written as ' in a group's header (which quotes with ")
    return normalise(step.replace('"', "'")).rstrip(".").strip()


def _quoted(step: str) -> str:
    return " ".join(step.replace('"', "'").split())


def edit_lines(kind: Kind, first: int, last: int, first_step: str, last_step: str,
               steps: Sequence[str], start: int = 1) -> list[str]:
    """The lines of one group (its steps numbered from ``start``)."""
    if first < 1 or last < first:
        raise ValueError(f"steps are numbered from 1, first ≤ last; got {first}-{last}")
    one = _quoted(first_step)
    if kind == "instead" and last > first:
        head = f'- instead of steps {first}-{last} ("{one}" to "{_quoted(last_step)}"):'
    else:
        head = f'- {"instead of" if kind == "instead" else kind} step {first} ("{one}"):'
    return [head, *(f"{n}. {s}" for n, s in enumerate(steps, start))]


def is_edit_line(line: str) -> bool:
    """Whether ``line`` is the header of an edits delta or of one of its groups."""
    return EDITS_HEADER.lower() in line.lower() or _GROUP.match(line) is not None


def edits(text: str) -> list[Edit] | None:
    """The groups of an edits delta, or ``None`` when ``text`` is not one (no
    :data:`EDITS_HEADER`)."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if EDITS_HEADER.lower() in line.lower()), None)
    if at is None:
        return None
    out: list[Edit] = []
    for line in lines[at + 1:]:
        m = _GROUP.match(line)
        if m:
            kind = "instead" if m.group(1).lower() == "instead of" else m.group(1).lower()
            first = int(m.group(2))
            last = int(m.group(3) or first)
            out.append(Edit(kind, first, last, _norm(m.group(4)),  # type: ignore[arg-type]
                            _norm(m.group(5) or m.group(4)), ()))
            continue
        s = _STEP.match(line)
        if s and out:
            out[-1] = out[-1]._replace(steps=(*out[-1].steps, s.group(1)))
    return out


def locate(steps: Sequence[str], number: int, text: str, start: int = 0) -> int | None:
    """The index in ``steps`` of step ``number`` (1-based) when its text is ``text``, else
    of the first step of that text at or after ``start``; ``None`` when there is none."""
    norm = [_norm(s) for s in steps]
    target = _norm(text)
    i = number - 1
    if start <= i < len(norm) and norm[i] == target:
        return i
    try:
        return norm.index(target, start)
    except ValueError:
        return None


def compose(parts: Sequence[tuple[Sequence[Edit] | None, Sequence[str]]]
            ) -> list[tuple[int, str]]:
    """Eq. 7 on step lists: ``parts`` holds, root first, each chain item's edits (``None``
    for a root or an additions delta, whose steps follow the chain's) and its steps;
    returns the chain's steps as ``(part index, step)`` pairs."""
    out: list[tuple[int, str]] = []
    for n, (groups, steps) in enumerate(parts):
        if groups is None or n == 0:
            out.extend((n, s) for s in steps)
            continue
        texts = [s for _, s in out]
        new: list[tuple[int, str]] = []
        tail: list[tuple[int, str]] = []
        i = 0  # the next chain step not yet copied
        for g in groups:
            mine = [(n, s) for s in g.steps]
            lo = locate(texts, g.first, g.first_step, i)
            if lo is None:
                tail.extend(mine)
                continue
            if g.kind == "instead":
                hi = locate(texts, g.last, g.last_step, lo)
                end = lo + 1 if hi is None else hi + 1
                new.extend(out[i:lo])
                new.extend(mine)
                i = end
            else:
                at = lo + 1 if g.kind == "after" else lo
                new.extend(out[i:at])
                new.extend(mine)
                i = at
        out = [*new, *out[i:], *tail]
    return out


class Delta(NamedTuple):
    """What a residual holds so that its chain composes to an episode's steps
    (:func:`delta`): ``kind`` ``additions`` (``lines`` are the steps that follow the chain's)
    or ``edits`` (``lines`` are the groups' lines, steps numbered from 1, without
    :data:`EDITS_HEADER`)."""

    kind: Literal["additions", "edits"]
    lines: tuple[str, ...]


def delta(base: Sequence[str], steps: Sequence[str]) -> Delta | None:
    """The residual turning the chain's composed steps ``base`` into ``steps`` exactly:
    ``compose([(None, base), (parsed delta, its steps)])`` gives ``steps`` (the module's
    contract). ``None`` when they are already equal (nothing to write). Steps compare as
    :func:`locate` reads them (case, spacing and a final full stop do not count)."""
    a, b = [_norm(s) for s in base], [_norm(s) for s in steps]
    if a == b:
        return None
    if b[: len(a)] == a:
        return Delta("additions", tuple(steps[len(base):]))
    lines: list[str] = []
    n = 1
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            lines += edit_lines("instead", i1 + 1, i2, base[i1], base[i2 - 1], steps[j1:j2], n)
        elif tag == "insert" and i1 > 0:
            lines += edit_lines("after", i1, i1, base[i1 - 1], base[i1 - 1], steps[j1:j2], n)
        elif tag == "insert":
            lines += edit_lines("before", 1, 1, base[0], base[0], steps[j1:j2], n)
        else:
            continue
        n += j2 - j1
    return Delta("edits", tuple(lines))
