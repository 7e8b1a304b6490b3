"""MACLA: procedures with Bayesian reliability, expected-utility selection and contrastive
refinement (Forouzandeh et al., 2025, "Learning Hierarchical Procedural Memory for LLM
Agents through Bayesian Selection and Contrastive Refinement"; issue 49).

* **Extraction and compression**: a won episode's procedure (the LLM's, prompt
  ``prompts/baselines/macla/extract.txt``, schema :class:`ProcedureAnswer`; model-free, the
  structural extractor's abstract steps) joins the stored procedure whose text embedding has
  cosine ≥ ``merge_threshold`` with it (one more success of that procedure: the paper
  compresses 2,851 trajectories into 187 procedures) or becomes a new one.
* **Reliability**: each procedure holds a Beta(α, β) posterior of its success rate, from
  the prior Beta(``prior_alpha``, ``prior_beta``): α + 1 when an episode that used it (or
  that it was extracted from) was won, β + 1 when an episode that used it was lost. "Used"
  is the procedure the agent followed first
  (:func:`deltamem.memories.procedural.followed_ids`).
* **Selection**: expected utility EU(p) = rel(p, task) · (E[ρ]·``reward`` −
  (1 − E[ρ])·``cost``) + ``explore`` · sd[ρ], with rel the cosine of the task's goal with
  the procedure's key (the query text every memory embeds), E[ρ] = α/(α + β) and sd[ρ] its
  posterior standard deviation; the ``k`` best among those with rel ≥ ``min_relevance``
  are recalled, best first, with EU as the item score (what the guide orders by). The
  paper's exact utility terms were not read from its code; these are ours, named here.
* **Contrastive refinement**: a procedure that has both won and lost episodes keeps their
  abstract action sequences (the last ``keep`` of each); its refinement is their contrast —
  the steps every kept success did that a failure missed ("do not skip"), and the actions
  failures did that no success did ("avoid") — by a structural diff (model-free) or by the
  LLM (prompt ``refine.txt``, schema :class:`Refinement`), shown under the procedure.

The paper's hierarchy of meta-procedures (compositions of procedures) is not built. Memory
unit: one procedure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from deltamem.errors import ExtractionError
from deltamem.extract.structural import abstract_text
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
from deltamem.memories.procedural import (
    followed_ids,
    schema_of,
    structural_procedure,
    validated,
)
from deltamem.store.items import Item
from deltamem.types import Change, Episode, Recall, RecallItem, Task

__all__ = ["MACLA", "MACLAConfig", "ProcedureAnswer", "Refinement", "contrast", "make"]

KIND = "procedure"
_EXTRACT_VARS = frozenset({"task_description", "env_description", "trajectory", "steps",
                           "reward", "result", "max_steps"})
_REFINE_VARS = frozenset({"procedure", "successes", "failures"})
_EXTRACT_SHAPE = '{"name": "...", "preconditions": "...", "steps": ["...", ...]}'
_REFINE_SHAPE = '{"keep": ["...", ...], "avoid": ["...", ...]}'


class ProcedureAnswer(BaseModel):
    """The LLM's procedure of a won episode."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=160)
    preconditions: str = Field(default="", max_length=400)
    steps: list[str] = Field(min_length=1, max_length=30)


class Refinement(BaseModel):
    """A contrast of a procedure's successes and failures: steps not to skip, actions to
    avoid."""

    model_config = ConfigDict(extra="forbid")

    keep: list[str] = Field(default_factory=list, max_length=8)
    avoid: list[str] = Field(default_factory=list, max_length=8)


class MACLAConfig(FlatConfig):
    """MACLA settings.

    Attributes:
        merge_threshold: cosine of two procedures' text embeddings at or above which a
            new procedure is one more success of the stored one.
        prior_alpha: α of the Beta prior.
        prior_beta: β of the Beta prior.
        reward: utility of a success.
        cost: utility lost by a failure.
        explore: weight of the posterior standard deviation in EU (0: none).
        min_relevance: procedures less similar to the goal than this are not candidates.
        k: procedures recalled per task.
        keep: won and lost action sequences kept per procedure for the contrast.
        max_steps: most steps of a procedure.
        max_trajectory_chars: trajectory budget of the extraction prompt.
        max_tokens: completion cap of each LLM call.
    """

    merge_threshold: float = Field(default=0.95, ge=-1.0, le=1.0)
    prior_alpha: float = Field(default=1.0, gt=0.0)
    prior_beta: float = Field(default=1.0, gt=0.0)
    reward: float = Field(default=1.0, ge=0.0)
    cost: float = Field(default=0.5, ge=0.0)
    explore: float = Field(default=0.0, ge=0.0)
    min_relevance: float = Field(default=0.0, ge=-1.0, le=1.0)
    k: int = Field(default=3, ge=1, le=20)
    keep: int = Field(default=5, ge=1, le=50)
    max_steps: int = Field(default=15, ge=1, le=30)
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=700, ge=16)


def contrast(successes: Sequence[Sequence[str]], failures: Sequence[Sequence[str]],
             cap: int = 8) -> Refinement:
    """The structural contrast of a procedure's won and lost action sequences.

    ``keep``: steps every won sequence did that some lost one never did (in the first won
    sequence's order); ``avoid``: actions lost sequences did that no won one did (most
    frequent first, then first seen). Empty when either side is empty.
    """
    if not successes or not failures:
        return Refinement()
    common = set(successes[0]).intersection(*map(set, successes[1:]))
    keep = [s for s in dict.fromkeys(successes[0])
            if s in common and any(s not in f for f in failures)]
    won = set().union(*map(set, successes))
    counts: dict[str, int] = {}
    for f in failures:
        for a in dict.fromkeys(f):
            if a not in won:
                counts[a] = counts.get(a, 0) + 1
    avoid = sorted(counts, key=lambda a: -counts[a])  # stable: first seen among ties
    return Refinement(keep=keep[:cap], avoid=avoid[:cap])


class MACLA(FlatMemory):
    """MACLA's procedural memory. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = MACLA.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e2"))]
        ['hit']
        >>> r = mem.recall(make_episode().task)
        >>> r.details["matches"][0]["alpha"], r.details["matches"][0]["beta"]
        (3.0, 1.0)
        >>> lost = make_episode(success=False, episode_id="e3", actions=[
        ...     ("go to garbagecan 1", "On the garbagecan 1, you see nothing.")])
        >>> [c.kind for c in mem.learn(lost, r)]
        ['failed']
        >>> mem.recall(make_episode().task).items[0].text.splitlines()[-1]
        'Avoid: go to garbagecan'
    """

    name = "macla"
    config_class: ClassVar[type[FlatConfig]] = MACLAConfig
    source: ClassVar[str] = "procedures"
    header: ClassVar[str] = (
        "Procedures learned from earlier episodes, the most useful first (how reliable each "
        "has been is in brackets). Follow the steps with the objects and places of YOUR task; "
        "do not skip what it says to keep, and avoid what it says to avoid."
    )
    config: MACLAConfig

    def _procedures(self) -> list[Item]:
        return [i for i in self._items() if i.kind == KIND]

    # -- selection -------------------------------------------------------------------
    def utility(self, relevance: float, alpha: float, beta: float) -> float:
        """EU of a procedure (module doc)."""
        n = alpha + beta
        mean = alpha / n
        sd = math.sqrt(alpha * beta / (n * n * (n + 1)))
        c = self.config
        return relevance * (mean * c.reward - (1 - mean) * c.cost) + c.explore * sd

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        items = [i for i in self._procedures() if i.embedding is not None]
        if not items:
            return Recall(details={"matches": []})
        q = emb.embed_queries([self.goal_text(task.goal)])[0]
        rel = cosine(np.stack([i.embedding for i in items]), q)  # type: ignore[misc]
        scored = []
        for item, r in zip(items, rel, strict=True):
            if float(r) < self.config.min_relevance:
                continue
            a, b = float(item.payload["alpha"]), float(item.payload["beta"])
            scored.append((self.utility(float(r), a, b), float(r), item))
        scored.sort(key=lambda t: -t[0])  # stable: bank order among ties
        picked = scored[: self.config.k]
        details = {"matches": [{"id": i.id, "eu": eu, "relevance": r,
                                "alpha": float(i.payload["alpha"]),
                                "beta": float(i.payload["beta"])} for eu, r, i in picked]}
        if not picked:
            return Recall(details=details)
        return Recall(
            text=self.header + "\n\n" + "\n\n".join(
                f"## Procedure {n} (reliability {self._mean(i):.2f}, EU {eu:.2f})\n{i.text}"
                for n, (eu, _r, i) in enumerate(picked, 1)),
            items=tuple(RecallItem(self.source, i.id, i.text, eu, "procedure")
                        for eu, _r, i in picked),
            details=details,
        )

    @staticmethod
    def _mean(item: Item) -> float:
        a, b = float(item.payload["alpha"]), float(item.payload["beta"])
        return a / (a + b)

    # -- extraction --------------------------------------------------------------------
    def extract(self, episode: Episode) -> ProcedureAnswer:
        """The procedure of a won episode (LLM or structural, by ``mode``)."""
        cap = self.config.max_steps
        if self.config.mode == "llm":
            values = episode_prompt_values(episode, self.config.max_trajectory_chars)
            prompt = load_prompt("macla", "extract", _EXTRACT_VARS).substitute(
                values, max_steps=str(cap))
            obj = ask_json(self._need_llm(), role="macla_extract", purpose="extract",
                           prompt=prompt, schema=schema_of(ProcedureAnswer),
                           shape=_EXTRACT_SHAPE, max_tokens=self.config.max_tokens)
            p = validated(ProcedureAnswer, obj, "macla_extract")
            return ProcedureAnswer(name=p.name, preconditions=p.preconditions,
                                   steps=p.steps[:cap])
        emb_name = self.embedder.name if self.embedder is not None else None
        proc = structural_procedure(episode, self.config.domain,
                                    self.config.text_mode(emb_name))
        return ProcedureAnswer(name=proc.situation, steps=list(proc.steps[:cap]) or
                               ["(no steps)"])

    def refine(self, payload: dict[str, Any]) -> Refinement:
        """The contrast of a procedure's kept successes and failures (LLM or structural)."""
        wins, losses = payload.get("won_actions", []), payload.get("lost_actions", [])
        if not wins or not losses:
            return Refinement()
        if self.config.mode != "llm":
            return contrast(wins, losses)
        prompt = load_prompt("macla", "refine", _REFINE_VARS).substitute(
            procedure=self._body(payload, Refinement()),
            successes="\n".join("- " + " | ".join(w) for w in wins),
            failures="\n".join("- " + " | ".join(f) for f in losses))
        obj = ask_json(self._need_llm(), role="macla_refine", purpose="merge", prompt=prompt,
                       schema=schema_of(Refinement), shape=_REFINE_SHAPE,
                       max_tokens=self.config.max_tokens)
        return validated(Refinement, obj, "macla_refine")

    @staticmethod
    def _body(payload: dict[str, Any], refinement: Refinement) -> str:
        lines = [f"Procedure: {payload['name']}"]
        if payload.get("preconditions"):
            lines.append(f"Preconditions: {payload['preconditions']}")
        lines += [f"{n}. {s}" for n, s in enumerate(payload["steps"], 1)]
        if refinement.keep:
            lines.append("Do not skip: " + "; ".join(refinement.keep))
        if refinement.avoid:
            lines.append("Avoid: " + "; ".join(refinement.avoid))
        return "\n".join(lines)

    # -- learn ---------------------------------------------------------------------------
    def _actions(self, episode: Episode) -> list[str]:
        return [abstract_text(s.action) for s in episode.steps if s.valid]

    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: object) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        items = self._procedures()
        by_id = {i.id: i for i in items}
        used = [by_id[i] for i in followed_ids(recall, self.source, 1) if i in by_id]
        try:
            credited = list(used)  # the procedure the agent followed takes the outcome
            if episode.success:
                proc = self.extract(episode)
                vec = emb.embed_passages([self._key(proc)])[0].astype(np.float32)
                match = self._match(items, vec)
                if match is None:
                    self._insert(plan, proc, vec, episode)
                elif all(match.id != c.id for c in credited):
                    credited.append(match)  # compression: one more success of it
            elif not credited:
                plan.changes.append(Change("skipped", self.source,
                                           "lost episode that used no procedure"))
                return plan
            for item in credited:
                self._update(plan, item, episode)
        except ExtractionError as e:
            plan.reject(self.source, e)
        return plan

    def _key(self, p: ProcedureAnswer) -> str:
        """What a procedure is embedded by: its name (the goal kind) and steps."""
        return p.name + "\n" + "\n".join(p.steps)

    def _match(self, items: Sequence[Item], vec: np.ndarray) -> Item | None:
        stored = [i for i in items if i.payload.get("key_vec") is not None]
        if not stored:
            return None
        mat = np.asarray([i.payload["key_vec"] for i in stored], dtype=np.float32)
        sims = cosine(mat, vec)
        j = int(np.argmax(sims))
        return stored[j] if float(sims[j]) >= self.config.merge_threshold else None

    def _insert(self, plan: Plan, p: ProcedureAnswer, vec: Any, episode: Episode) -> None:
        emb = self._need_embedder()
        c = self.config
        payload: dict[str, Any] = {
            "name": p.name, "preconditions": p.preconditions, "steps": p.steps,
            "alpha": c.prior_alpha + 1.0, "beta": c.prior_beta,
            "won_actions": [self._actions(episode)], "lost_actions": [],
            "key_vec": [round(float(x), 6) for x in vec],
        }
        item = Item(system=self.name, kind=KIND, key=episode.task.id,
                    text=self._body(payload, Refinement()), payload=payload,
                    embedding=emb.embed_passages([self.goal_text(episode.task.goal)])[0],
                    episode_id=episode.id)
        plan.changes.append(Change("written", self.source,
                                   f"new procedure of {len(p.steps)} steps: {p.name}",
                                   item.id))
        plan.writes.append(InsertItem(item))

    def _update(self, plan: Plan, item: Item, episode: Episode) -> None:
        """One more outcome of ``item``: α or β + 1, the sequence kept, refinement redone."""
        payload = dict(item.payload)
        side = "won_actions" if episode.success else "lost_actions"
        payload[side] = [*payload.get(side, []), self._actions(episode)][-self.config.keep:]
        if episode.success:
            payload["alpha"] = float(payload["alpha"]) + 1.0
        else:
            payload["beta"] = float(payload["beta"]) + 1.0
        refinement = self.refine(payload)
        payload["refinement"] = refinement.model_dump()
        a, b = payload["alpha"], payload["beta"]
        change = Change("hit" if episode.success else "failed", self.source,
                        f"{'won' if episode.success else 'lost'} episode: Beta({a:g}, {b:g}), "
                        f"E[ρ] = {a / (a + b):.2f}; refinement keeps {len(refinement.keep)}, "
                        f"avoids {len(refinement.avoid)}", item.id)
        plan.changes.append(change)
        plan.writes.append(UpdateItem(
            item.id, text=self._body(payload, refinement), payload=payload,
            embedding=item.embedding, episode_id=episode.id, unchanged_since=item.updated_at,
            stale=(change, Change("skipped", self.source,
                                  "changed in another process; this outcome was not counted",
                                  item.id))))

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        procs = [i for i in items if i.kind == KIND]
        means = [self._mean(i) for i in procs]
        return {"procedures": len(procs),
                "mean_reliability": round(sum(means) / len(means), 3) if means else None,
                "refined": sum(1 for i in procs if (i.payload.get("refinement") or {}).get(
                    "keep") or (i.payload.get("refinement") or {}).get("avoid"))}


make = make_factory(MACLA)
