"""What the procedure memories of issue 49 (ACE, MemP, MACLA) share.

* :func:`structural_procedure`: an episode's procedure by the existing structural extractor
  (:class:`~deltamem.extract.structural.StructuralExtractor`): the abstract goal it serves,
  its abstract steps, its termination; the model-free path of every one of them;
* :func:`followed_ids`: the items of a recall the agent followed first, in the guide's order
  (its system's score, best first; warnings are never followed), which is what an outcome
  is credited to when no model says which items it used;
* :func:`validated`: an LLM answer (already checked against the JSON schema of a pydantic
  model) as that model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from deltamem.core.triggers import task_text
from deltamem.errors import ExtractionError
from deltamem.extract.structural import StructuralExtractor
from deltamem.types import Episode, Recall

__all__ = ["Procedure", "followed_ids", "schema_of", "structural_procedure", "validated"]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Procedure:
    """An episode's procedure: ``situation`` (the abstract goal it serves), ``steps``
    (abstract, in order; empty when the extractor found none), ``done`` (termination) and
    ``attempt`` (for a lost episode: what failed and what was never tried)."""

    situation: str
    steps: tuple[str, ...]
    done: str = ""
    attempt: str = ""

    def render(self, max_steps: int | None = None) -> str:
        """The situation line, then the numbered steps."""
        steps = self.steps if max_steps is None else self.steps[:max_steps]
        lines = [self.situation] + [f"{n}. {s}" for n, s in enumerate(steps, 1)]
        return "\n".join(lines)


def structural_procedure(episode: Episode, domain: str, query_mode: str) -> Procedure:
    """``episode``'s procedure by the structural extractor.

    ``situation`` is the goal in the text every memory embeds (``query_mode``:
    ``abstract`` or ``goal``, :func:`deltamem.core.triggers.task_text`); for a won
    episode the steps are the extractor's abstracted success path, for a lost one
    ``attempt`` holds its failure record (failed actions, alternatives not tried).
    """
    goal = task_text(episode.task.goal.strip(), query_mode)
    extractor = StructuralExtractor()
    if episode.success:
        p = extractor.extract("task_root_success", episode, (), domain)
        assert p is not None  # root roles never skip
        steps = () if p.procedure.startswith("(") else tuple(
            s.split(". ", 1)[1] if s[:1].isdigit() and ". " in s else s
            for s in p.procedure.splitlines() if s.strip())
        return Procedure(goal, steps, p.termination)
    p = extractor.extract("task_root_failure", episode, (), domain)
    assert p is not None
    return Procedure(goal, (), "", p.procedure)


def followed_ids(recall: Recall | None, source: str, top: int = 1) -> list[str]:
    """Ids of the first ``top`` items of ``source`` in ``recall`` the guide follows: not
    warnings, best score first, prompt order among equal scores (as
    :func:`deltamem.agents.guide.procedures.procedure_items` orders them)."""
    if recall is None:
        return []
    ranked = [(-(i.score if i.score is not None else float("-inf")), n, i.id)
              for n, i in enumerate(recall.items)
              if i.source == source and i.role != "warning"]
    ranked.sort()
    return [item_id for _, _, item_id in ranked[:top]]


def validated(model: type[M], obj: Any, role: str) -> M:
    """``obj`` as ``model``; :class:`ExtractionError` (rejected, logged) when a rule the
    schema cannot state fails."""
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise ExtractionError(f"{role}: {e}", role=role, raw=str(obj)) from e


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema an LLM answer is checked against (pydantic's, draft 2020-12)."""
    return model.model_json_schema()

