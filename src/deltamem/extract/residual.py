"""Residual skills that compose: what both extractors write for a warm-start success.

The contract (§3.2, Eq. 7; :mod:`deltamem.core.residual`): a residual is taken against what
its chain composes to -- the steps of the chain's SUCCESS entries, composed -- never against
a failure record's text, so the chain of every SUCCESS node composes to exactly the steps of
the episode it was learned from, whatever its ancestors' labels. A failure record in the
chain stays what it is, a warning (:mod:`deltamem.agents.guide` reads it as one).

:func:`residual_skill` turns an episode's whole abstract procedure into that residual; the
structural extractor gives it its own abstraction of the episode
(:meth:`~deltamem.extract.structural.StructuralExtractor.skill_steps`), the LLM extractor
the numbered steps of the model's answer (:class:`~deltamem.extract.llm.LLMExtractor`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from deltamem.core.payload import ChainEntry, Payload
from deltamem.core.residual import EDITS_HEADER, compose, delta, edits

__all__ = ["ACTIVATION_MAX", "PROCEDURE_MAX", "chain_steps", "fit_lines", "numbered",
           "procedure_steps", "residual_skill"]

ACTIVATION_MAX = 400
PROCEDURE_MAX = 2000
_STEP_NO = re.compile(r"^\s*\d+\.\s*")


def procedure_steps(text: str) -> list[str]:
    """The numbered step lines of a procedure (``"3. go to fridge"`` → ``"go to fridge"``),
    in order; the other lines (notes, where things were, an edits delta's group headers)
    are not steps."""
    return [_STEP_NO.sub("", line).strip() for line in text.splitlines()
            if _STEP_NO.match(line) and _STEP_NO.sub("", line).strip()]


def chain_steps(chain: Sequence[ChainEntry]) -> list[str]:
    """The steps a skill chain composes to (Eq. 7, :func:`deltamem.core.residual.compose`):
    its SUCCESS entries' steps, root first, each delta applied; failure records hold no
    steps."""
    parts = [(edits(e.payload.procedure), procedure_steps(e.payload.procedure))
             for e in chain if e.label == "SUCCESS"]
    return [s for _, s in compose(parts)]


def numbered(lines: Sequence[str]) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


def fit_lines(text: str, room: int) -> str:
    """``text`` without the last lines that do not fit in ``room`` characters."""
    lines = text.split("\n") if text else []
    while lines and len("\n".join(lines)) > room:
        lines.pop()
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def residual_skill(chain: Sequence[ChainEntry], steps: Sequence[str], *, activation: str,
                   variant: str, termination: str, notes: str = "") -> Payload | None:
    """The residual success whose chain composes to ``steps`` (the module's contract), or
    ``None`` (*skip*) when ``chain`` already composes to them.

    * no SUCCESS entry in ``chain`` (only failure records above): the whole procedure, as a
      root holds it, under ``activation``;
    * the episode extends the chain's steps: "Extra steps not in the base:" and those steps;
    * otherwise an edits delta (:data:`~deltamem.core.residual.EDITS_HEADER`): which of the
      chain's steps the episode's stand instead of (or dropped), and where its other steps go;
      the last two under ``variant``.

    ``notes`` (lines that are not steps: where things were, advice) follow the steps, cut
    from their end to keep the procedure within :data:`PROCEDURE_MAX`; step lines are never
    cut (a cut step would break the composition).
    """
    base = chain_steps(chain)
    d = delta(base, steps)
    if d is None:
        return None
    if not any(e.label == "SUCCESS" for e in chain):
        body, head = numbered(steps) or "(no valid action)", activation
    elif d.kind == "additions":
        body, head = "Extra steps not in the base:\n" + numbered(d.lines), variant
    else:
        body, head = EDITS_HEADER + "\n" + "\n".join(d.lines), variant
    more = fit_lines(notes.strip("\n"), PROCEDURE_MAX - len(body) - 1)
    return Payload(_clip(head, ACTIVATION_MAX), "\n".join(x for x in (body, more) if x),
                   termination)
