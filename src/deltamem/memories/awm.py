"""AWM baseline: per-task-type workflow documents updated online (paper §4.1; Wang et al., 2024).

From each successful episode a *workflow* is induced — a title and abstract
steps with placeholders instead of instance constants:

* ``llm`` mode: prompt ``prompts/baselines/awm/induce.txt`` (purpose
  ``extract``), answer validated against a JSON schema with bounded strings;
* ``deterministic`` mode: the action sequence abstracted by
  :class:`~deltamem.extract.structural.StructuralExtractor` (instance numbers
  dropped, goal entities turned into ``{A}``, ``{B}``, ...).

The bank keeps ONE workflow document per task type. The type is inferred without oracle
labels: the goal's embedding is compared with each document's centroid (mean embedding
of the goals merged into it) and joins the nearest one when the cosine is ≥
``type_threshold``, else starts a new type. The goal is embedded as DeltaMem's Task-Tree
embeds it, with the same threshold (:mod:`deltamem.core.triggers`,
:func:`deltamem.domains.thresholds`): by default the domain's trigger and τ for the
bank's embedder (household with MiniLM: the abstracted goal at 0.95), so both systems
decide "same kind of task" alike. Banks made before ``type_text`` existed keep the raw
goal. ``oracle_types=True`` uses ``task.meta["task_type"]`` instead and is reported in
``stats()["oracle_types"]`` so results can be marked. A workflow joining an existing
document is merged into it (``llm``: prompt ``merge.txt``, purpose ``merge``;
``deterministic``: union of the steps, deduplicated, capped at ``max_steps``). Recall
returns the document of the inferred type. Failed episodes are not used. Memory unit
(Table 5): one workflow document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from deltamem.core.triggers import task_text
from deltamem.domains import default_trigger, thresholds
from deltamem.errors import ConfigError, ExtractionError, InvalidInputError
from deltamem.extract.structural import StructuralExtractor
from deltamem.llm.structured import ask_json
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import (
    FlatConfig,
    FlatMemory,
    cosine,
    episode_prompt_values,
    load_prompt,
)
from deltamem.memories.plan import InsertItem, Plan, UpdateItem
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["AWM", "AWMConfig", "Workflow", "make", "workflow_schema"]

KIND = "workflow"
TITLE_MAX = 120
STEP_MAX = 200
_INDUCE_VARS = frozenset({"task_description", "env_description", "trajectory", "steps",
                          "max_workflow_steps", "result", "reward"})
_MERGE_VARS = frozenset({"current_workflow", "new_workflow", "max_workflow_steps"})
_SHAPE = '{"title": "...", "steps": ["...", ...]}, all strings'
_NUMBERING = re.compile(r"^\s*(?:\d+[.)]|[-+*])\s*")


class AWMConfig(FlatConfig):
    """AWM settings.

    Attributes:
        oracle_types: take the task type from ``task.meta["task_type"]`` (an oracle
            label) instead of inferring it; fixed when the bank is created.
        type_threshold: cosine between a goal and a document centroid needed to
            join that type; ``None`` = the Task-Tree τ of the domain, embedder and
            ``type_text`` (:func:`deltamem.domains.thresholds`).
        type_text: what is embedded of a goal, ``goal`` (as written) or
            ``abstract`` (:func:`deltamem.core.triggers.abstract_goal`); ``None`` =
            the domain's Task-Tree default for the embedder.
        max_steps: most steps in one workflow document.
        max_trajectory_chars: trajectory budget of the induction prompt.
        max_tokens: completion cap of each LLM call.
    """

    oracle_types: bool = False
    type_threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    type_text: Literal["goal", "abstract"] | None = None
    max_steps: int = Field(default=15, ge=1, le=50)
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=600, ge=16)

    def text_mode(self, embedder: str | None) -> str:
        """``type_text`` (AWM's name for ``query_text``, kept for its banks), else
        ``query_text``, else the domain's Task-Tree trigger for ``embedder``."""
        return self.type_text or self.query_text or default_trigger(self.domain, "task",
                                                                     embedder)

    def threshold(self, embedder: str | None) -> float:
        """``type_threshold``, or the Task-Tree τ for the domain, ``embedder`` and text mode."""
        if self.type_threshold is not None:
            return self.type_threshold
        return thresholds(self.domain, "task", embedder, self.text_mode(embedder)).value


def workflow_schema(max_steps: int) -> dict[str, Any]:
    """JSON schema of an induced or merged workflow (bounded strings, ≤ ``max_steps`` steps)."""
    return {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": TITLE_MAX},
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_steps,
                "items": {"type": "string", "minLength": 1, "maxLength": STEP_MAX},
            },
        },
        "required": ["title", "steps"],
        "additionalProperties": False,
    }


class Workflow:
    """A title and ordered abstract steps; renders as the stored document text."""

    def __init__(self, title: str, steps: Sequence[str]) -> None:
        self.title = " ".join(title.split())
        self.steps = [s for s in (_NUMBERING.sub("", " ".join(x.split())) for x in steps) if s]

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Workflow:
        return cls(str(payload.get("title", "")), [str(s) for s in payload.get("steps", [])])

    def render(self) -> str:
        lines = [f"Workflow: {self.title}"]
        lines += [f"{i}. {s}" for i, s in enumerate(self.steps, 1)]
        return "\n".join(lines)

    def union(self, other: Workflow, cap: int) -> Workflow:
        """Steps of ``self`` then the new ones of ``other`` (case-insensitive), capped."""
        seen = {s.lower() for s in self.steps}
        steps = list(self.steps)
        for s in other.steps:
            if s.lower() not in seen:
                seen.add(s.lower())
                steps.append(s)
        return Workflow(self.title or other.title, steps[:cap])


class AWM(FlatMemory):
    """Agent Workflow Memory. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = AWM.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> mem.recall(make_episode().task).text.splitlines()[2]
        'Workflow: Tasks of the form: put a clean {A} in {B} ({A} = e.g. apple, {B} = e.g. fridge)'
        >>> mem.stats()["units"], mem.stats()["oracle_types"]
        (1, False)
    """

    name = "awm"
    config_class: ClassVar[type[FlatConfig]] = AWMConfig
    source: ClassVar[str] = "workflows"
    header: ClassVar[str] = (
        "Workflow memory: reusable steps learned from earlier successful episodes of this kind "
        "of task. Placeholders in braces stand for the objects, places and values of YOUR task; "
        "skip steps that do not apply."
    )
    config: AWMConfig
    #: AWM's ``type_text`` already chose its query text before ``query_text`` existed
    legacy_config: ClassVar[Mapping[str, Any]] = {}

    def _check_reopen(self, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        if "oracle_types" in options and "oracle_types" in recorded and \
                bool(options["oracle_types"]) != bool(recorded["oracle_types"]):
            raise ConfigError(
                f"this AWM bank was built with oracle_types={recorded['oracle_types']}; "
                "open it with the same setting or build a new bank"
            )

    def __init__(self, store: Any, embedder: Any, **kwargs: Any) -> None:
        recorded = dict(store.meta().get("config") or {})
        super().__init__(store, embedder, **kwargs)
        if recorded and "type_text" not in recorded and self.config.type_text is None:
            # a bank made before type_text existed: its centroids embed the raw goal
            self.config = self.config.model_copy(update={"type_text": "goal"})

    # -- task types ------------------------------------------------------------------
    def type_query(self, task: Task) -> str:
        """The text of ``task``'s goal that type inference embeds (``type_text``)."""
        name = self.embedder.name if self.embedder is not None else None
        return task_text(task.goal.strip(), self.config.text_mode(name))

    def _documents(self) -> list[Item]:
        return [i for i in self._items() if i.kind == KIND]

    @staticmethod
    def oracle_type(task: Task) -> str:
        """``task.meta["task_type"]`` as a string; :class:`InvalidInputError` when missing."""
        value = task.meta.get("task_type")
        if value is None or not str(value).strip():
            raise InvalidInputError(
                f"task {task.id!r} has no meta['task_type'], which oracle_types=True needs"
            )
        return str(value).strip()

    def infer_type(self, task: Task) -> tuple[Item | None, float | None, str]:
        """The document of ``task``'s type: ``(document or None, score, reason)``.

        Oracle mode looks the label up (score ``None``); otherwise the nearest
        centroid by cosine with the goal's query embedding is accepted at
        ≥ ``threshold``. Reads only.
        """
        docs = self._documents()
        if self.config.oracle_types:
            key = self.oracle_type(task)
            doc = next((d for d in docs if d.key == key), None)
            return doc, None, f"oracle task type {key!r}"
        emb = self._need_embedder()
        docs = [d for d in docs if d.embedding is not None]
        if not docs:
            return None, None, "no workflow document yet"
        q = emb.embed_queries([self.type_query(task)])[0]
        scores = cosine(np.stack([d.embedding for d in docs]), q)  # type: ignore[misc]
        j = int(np.argmax(scores))
        best, tau = float(scores[j]), self.config.threshold(emb.name)
        if best >= tau:
            return docs[j], best, f"goal similarity {best:.3f} ≥ τ {tau:g} to type {docs[j].key}"
        return None, best, f"best goal similarity {best:.3f} < τ {tau:g}"

    # -- recall ----------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        doc, score, reason = self.infer_type(task)
        details: dict[str, Any] = {
            "type": doc.key if doc else None, "document": doc.id if doc else None,
            "score": score, "oracle_types": self.config.oracle_types, "reason": reason,
        }
        if doc is None:
            return Recall(details=details)
        return Recall(
            text=f"{self.header}\n\n{doc.text}",
            items=(RecallItem(self.source, doc.id, doc.text, score, "workflow"),),
            details=details,
        )

    # -- induction and merging ---------------------------------------------------------
    def induce(self, episode: Episode) -> Workflow:
        """The workflow of a successful episode (LLM or deterministic, by ``mode``).

        Raises :class:`ExtractionError` when the LLM output stays invalid.
        """
        if self.config.mode == "llm":
            values = episode_prompt_values(episode, self.config.max_trajectory_chars)
            prompt = load_prompt("awm", "induce", _INDUCE_VARS).substitute(
                values, max_workflow_steps=str(self.config.max_steps))
            obj = ask_json(self._need_llm(), role="awm_induce", purpose="extract", prompt=prompt,
                           schema=workflow_schema(self.config.max_steps), shape=_SHAPE,
                           max_tokens=self.config.max_tokens)
            return Workflow(obj["title"], obj["steps"])
        payload = StructuralExtractor().extract("task_root_success", episode, (),
                                                self.config.domain)
        assert payload is not None  # root roles never skip
        steps = [] if payload.procedure.startswith("(") else payload.procedure.splitlines()
        return Workflow(payload.activation, steps[: self.config.max_steps])

    def merge(self, current: Workflow, new: Workflow) -> Workflow:
        """One document from the current one and a new workflow (LLM or union, by ``mode``)."""
        if self.config.mode == "llm":
            prompt = load_prompt("awm", "merge", _MERGE_VARS).substitute(
                current_workflow=current.render(), new_workflow=new.render(),
                max_workflow_steps=str(self.config.max_steps))
            obj = ask_json(self._need_llm(), role="awm_merge", purpose="merge", prompt=prompt,
                           schema=workflow_schema(self.config.max_steps), shape=_SHAPE,
                           max_tokens=self.config.max_tokens)
            return Workflow(obj["title"], obj["steps"])
        return current.union(new, self.config.max_steps)

    # -- learn ---------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        if not episode.success:
            plan.changes.append(Change(
                "skipped", self.source,
                f"failed episode (reward {episode.reward:g}): AWM induces workflows from "
                "successful episodes only",
            ))
            return plan
        emb = self._need_embedder()
        doc, _score, reason = self.infer_type(episode.task)
        try:
            new = self.induce(episode)
            merged = self.merge(Workflow.from_payload(doc.payload), new) if doc else new
        except ExtractionError as e:
            plan.reject(self.source, e)
            return plan
        vec = emb.embed_passages([self.type_query(episode.task)])[0].astype(np.float32)
        if doc is None:
            key = (self.oracle_type(episode.task) if self.config.oracle_types
                   else f"type-{len(self._documents()) + 1}")
            item = Item(system=self.name, kind=KIND, key=key, text=merged.render(),
                        payload={"title": merged.title, "steps": merged.steps, "episodes": 1},
                        embedding=vec, episode_id=episode.id)
            plan.changes.append(Change(
                "written", self.source,
                f"new task type {key!r} ({reason}): workflow of {len(merged.steps)} steps",
                item.id,
            ))
            plan.writes.append(InsertItem(item))
            return plan
        n = int(doc.payload.get("episodes", 1))
        centroid = doc.embedding if doc.embedding is not None else vec
        new_centroid = ((centroid * n + vec) / (n + 1)).astype(np.float32)
        before = Workflow.from_payload(doc.payload)
        added = len([s for s in merged.steps if s.lower() not in
                     {b.lower() for b in before.steps}])
        change = Change(
            "consolidated", self.source,
            f"merged into the workflow of type {doc.key!r} ({reason}): {added} new steps, "
            f"{len(merged.steps)} in all",
            doc.id,
        )
        plan.changes.append(change)
        stale = replace(change, kind="skipped",
                        reason=f"the workflow of type {doc.key!r} changed in another process "
                               "during this merge; not overwritten")
        plan.writes.append(UpdateItem(
            doc.id, text=merged.render(),
            payload={"title": merged.title, "steps": merged.steps, "episodes": n + 1},
            embedding=new_centroid, episode_id=episode.id,
            unchanged_since=doc.updated_at, stale=(change, stale)))
        return plan

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        docs = [i for i in items if i.kind == KIND]
        return {
            "workflows": len(docs),
            "oracle_types": self.config.oracle_types,
            "task_types": {d.key: int(d.payload.get("episodes", 1)) for d in docs},
        }


make = make_factory(AWM)
