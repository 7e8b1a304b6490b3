"""ACE: an evolving playbook of bullets curated by delta edits (Zhang et al., 2025,
"Agentic Context Engineering"; the authors' code: ``ace-agent/ace``; issue 49).

The playbook is a list of *bullets* in sections, each ``[id] helpful=X harmful=Y ::
content`` (the ids count up per section, ``str-00001``). Three roles:

* **Generator**: the agent; it reads the whole playbook (recall) and, in the paper, says
  which bullets it used;
* **Reflector**: after the episode, tags each used bullet ``helpful``, ``harmful`` or
  ``neutral`` and states the episode's lesson; the tags update the bullets' counters
  (helpful + 1, harmful + 1);
* **Curator**: turns the lesson into *delta operations* (``ADD`` a bullet to a section),
  merged into the playbook by deterministic code, never by rewriting it; before an ``ADD``
  is applied, a bullet whose content embedding has cosine ≥ ``dedup_threshold`` with one
  already in its section is a duplicate and is dropped (grow-and-refine's
  de-duplication).

Modes:

* ``llm``: the Reflector and Curator prompts (``prompts/baselines/ace/reflect.txt``,
  ``curate.txt``), answers validated against pydantic schemas (:class:`Reflection`,
  :class:`Curation`);
* ``deterministic`` (model-free): the Generator's used bullets are the ``tag_top`` bullets
  the guide follows first (:func:`deltamem.memories.procedural.followed_ids`), tagged
  ``helpful`` when the episode was won and ``harmful`` when lost; the Curator's one
  ``ADD`` is the structural extractor's procedure (a won episode: a ``strategies`` bullet,
  its situation and abstract steps) or failure record (a lost one: a ``pitfalls``
  bullet). Counters, merge and de-duplication are the paper's own mechanisms in both
  modes.

The playbook only grows (ACE's users' first complaint); ``prune_harmful`` (off by default,
not the paper's) leaves out of recall the bullets whose harmful count exceeds the helpful
one by at least that much. Recall shows the whole playbook, sections in order (or the
``k`` bullets most similar to the goal); each bullet is an item (``strategy`` or
``warning``) with a reader score, the cosine of the goal with the bullet's situation (its
first line, :func:`situation`), so the guide tries the strategy that says it applies first
(an LLM generator would read the playbook whole). The content embedding (situation and
steps) is what de-duplication compares.
Memory unit: one bullet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from deltamem.errors import ExtractionError
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

__all__ = ["ACE", "ACEConfig", "Bullet", "Curation", "Operation", "Reflection", "make",
           "situation"]

KIND = "bullet"
CONTENT_MAX = 1200
SECTIONS: dict[str, str] = {"strategies": "str", "pitfalls": "pit", "others": "oth"}
_TITLES = {"strategies": "STRATEGIES AND HARD RULES", "pitfalls": "COMMON MISTAKES TO AVOID",
           "others": "OTHERS"}
_REFLECT_VARS = frozenset({"task_description", "env_description", "trajectory", "steps",
                           "reward", "result", "used_bullets"})
_CURATE_VARS = frozenset({"task_description", "result", "playbook", "reflection",
                          "playbook_stats", "token_budget"})
_REFLECT_SHAPE = ('{"reasoning": "...", "error_identification": "...", "root_cause_analysis": '
                  '"...", "correct_approach": "...", "key_insight": "...", "bullet_tags": '
                  '[{"id": "str-00001", "tag": "helpful" | "harmful" | "neutral"}]}')
_CURATE_SHAPE = ('{"reasoning": "...", "operations": [{"type": "ADD", "section": '
                 '"strategies" | "pitfalls" | "others", "content": "..."}]}')


# -- the LLM roles' answers -------------------------------------------------------------

class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BulletTag(_Answer):
    """The Reflector's verdict on one used bullet."""

    id: str = Field(min_length=1, max_length=40)
    tag: Literal["helpful", "harmful", "neutral"]


class Reflection(_Answer):
    """The Reflector's answer (the fields of the authors' reflector prompt)."""

    reasoning: str = Field(max_length=2000)
    error_identification: str = Field(max_length=1000)
    root_cause_analysis: str = Field(max_length=1000)
    correct_approach: str = Field(max_length=1000)
    key_insight: str = Field(max_length=1000)
    bullet_tags: list[BulletTag] = Field(default_factory=list, max_length=50)


class Operation(_Answer):
    """One delta operation of the Curator (ACE's code applies ``ADD`` only)."""

    type: Literal["ADD"]
    section: Literal["strategies", "pitfalls", "others"]
    content: str = Field(min_length=1, max_length=CONTENT_MAX)


class Curation(_Answer):
    """The Curator's answer: its reasoning and the delta operations."""

    reasoning: str = Field(max_length=2000)
    operations: list[Operation] = Field(default_factory=list, max_length=5)


# -- settings and bullets ----------------------------------------------------------------

class ACEConfig(FlatConfig):
    """ACE settings.

    Attributes:
        dedup_threshold: cosine of two bullets' content embeddings at or above which a new
            bullet is a duplicate of one in its section (not added); ``None``: no
            de-duplication.
        tag_top: model-free Generator: how many of the bullets the guide follows first
            count as used (their counters move with the outcome).
        k: recall only the ``k`` bullets most similar to the goal (``None``: the whole
            playbook, as the paper's generator reads it).
        prune_harmful: leave a bullet out of recall when harmful − helpful ≥ this
            (``None``: never; the paper's playbook keeps every bullet).
        max_steps: most steps of a model-free strategy bullet.
        token_budget: the playbook budget told to the Curator (whitespace tokens).
        max_trajectory_chars: trajectory budget of the Reflector prompt.
        max_tokens: completion cap of each LLM call.
        reader_key: what a bullet's reader score compares the goal with: its
            ``situation`` line (default) or its whole ``content`` (situation and steps;
            the rule before the situation line, kept to check that choice).
    """

    dedup_threshold: float | None = Field(default=0.9, ge=-1.0, le=1.0)
    tag_top: int = Field(default=1, ge=0, le=20)
    k: int | None = Field(default=None, ge=1, le=500)
    prune_harmful: int | None = Field(default=None, ge=1)
    max_steps: int = Field(default=15, ge=1, le=50)
    token_budget: int = Field(default=8000, ge=100)
    max_trajectory_chars: int = Field(default=6000, ge=200)
    max_tokens: int = Field(default=900, ge=16)
    reader_key: Literal["situation", "content"] = "situation"


class Bullet:
    """One playbook bullet: id, section, content and its two counters."""

    def __init__(self, bullet_id: str, section: str, content: str, helpful: int = 0,
                 harmful: int = 0) -> None:
        self.id = bullet_id
        self.section = section
        self.content = content.strip()
        self.helpful = helpful
        self.harmful = harmful

    @classmethod
    def of(cls, item: Item) -> Bullet:
        p = item.payload
        return cls(str(p["bullet_id"]), str(p["section"]), str(p["content"]),
                   int(p.get("helpful", 0)), int(p.get("harmful", 0)))

    def render(self) -> str:
        """``[id] helpful=X harmful=Y :: content`` (a multi-line content keeps its lines)."""
        return f"[{self.id}] helpful={self.helpful} harmful={self.harmful} :: {self.content}"

    def payload(self) -> dict[str, Any]:
        return {"bullet_id": self.id, "section": self.section, "content": self.content,
                "helpful": self.helpful, "harmful": self.harmful}


_ID = re.compile(r"-(\d+)$")
_WHEN = "When the task is like: "


def situation(content: str) -> str:
    """What a bullet's reader score compares with the goal: its first line (the situation
    it applies to), without the model-free bullets' ``When the task is like:`` prefix."""
    first = content.strip().splitlines()[0] if content.strip() else ""
    return first.removeprefix(_WHEN).strip() or first


class ACE(FlatMemory):
    """The ACE playbook. Use :meth:`open`.

    Example:
        >>> from deltamem.embed import HashingEmbedder
        >>> from deltamem.testing import make_episode
        >>> mem = ACE.open(embedder=HashingEmbedder(), mode="deterministic")
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e1"))]
        ['written']
        >>> r = mem.recall(make_episode().task)
        >>> r.items[0].text.splitlines()[0]
        '[str-00001] helpful=0 harmful=0 :: When the task is like: put a clean apple in fridge'
        >>> [c.kind for c in mem.learn(make_episode(episode_id="e2"), r)]
        ['hit', 'skipped']
        >>> mem.recall(make_episode().task).items[0].text.splitlines()[0][:32]
        '[str-00001] helpful=1 harmful=0 '
    """

    name = "ace"
    config_class: ClassVar[type[FlatConfig]] = ACEConfig
    source: ClassVar[str] = "playbook"
    header: ClassVar[str] = (
        "Playbook: strategies and mistakes learned from earlier episodes, with how often each "
        "helped or hurt. Apply the bullets that fit YOUR task, with its objects and places."
    )
    config: ACEConfig

    # -- reading the playbook ----------------------------------------------------------
    def _bullets(self) -> list[Item]:
        return [i for i in self._items() if i.kind == KIND]

    def _shown(self, items: Sequence[Item]) -> list[Item]:
        cap = self.config.prune_harmful
        if cap is None:
            return list(items)
        return [i for i in items
                if int(i.payload.get("harmful", 0)) - int(i.payload.get("helpful", 0)) < cap]

    def render_playbook(self, items: Sequence[Item]) -> str:
        """The playbook as text, sections in order, bullets in the order they were added."""
        out = []
        for section, title in _TITLES.items():
            lines = [Bullet.of(i).render() for i in sorted(items, key=lambda i: i.seq)
                     if i.payload.get("section") == section]
            if lines:
                out.append(f"## {title}\n" + "\n".join(lines))
        return "\n\n".join(out)

    # -- recall ----------------------------------------------------------------------
    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        emb = self._need_embedder()
        items = [i for i in self._shown(self._bullets()) if i.embedding is not None]
        if not items:
            return Recall(details={"bullets": 0})
        q = emb.embed_queries([self.goal_text(task.goal)])[0]
        by_situation = self.config.reader_key == "situation"
        keys = [np.asarray(i.payload["key_vec"], dtype=np.float32)
                if by_situation and i.payload.get("key_vec") is not None else i.embedding
                for i in items]
        scores = cosine(np.stack(keys), q)  # type: ignore[arg-type]
        by_id = {i.id: float(s) for i, s in zip(items, scores, strict=True)}
        if self.config.k is not None:
            order = np.argsort(-scores, kind="stable")[: self.config.k]
            items = [items[j] for j in sorted(order)]
        ordered = [i for section in _TITLES for i in sorted(items, key=lambda i: i.seq)
                   if i.payload.get("section") == section]
        return Recall(
            text=f"{self.header}\n\n{self.render_playbook(ordered)}",
            items=tuple(RecallItem(self.source, i.id, Bullet.of(i).render(), by_id[i.id],
                                   "warning" if i.payload.get("section") == "pitfalls"
                                   else "strategy")
                        for i in ordered),
            details={"bullets": len(ordered),
                     "matches": [{"id": i.id, "bullet": i.payload["bullet_id"],
                                  "score": by_id[i.id]} for i in ordered]},
        )

    # -- the roles ---------------------------------------------------------------------
    def reflect(self, episode: Episode, used: Sequence[Item]) -> tuple[dict[str, str], str]:
        """The Reflector: ``({item id: tag}, lesson text)`` for the used bullets."""
        by_bullet = {str(i.payload["bullet_id"]): i.id for i in used}
        if self.config.mode != "llm":
            tag = "helpful" if episode.success else "harmful"
            return {i.id: tag for i in used}, ""
        values = episode_prompt_values(episode, self.config.max_trajectory_chars)
        prompt = load_prompt("ace", "reflect", _REFLECT_VARS).substitute(
            values, used_bullets="\n".join(Bullet.of(i).render() for i in used) or "(none)")
        obj = ask_json(self._need_llm(), role="ace_reflect", purpose="extract", prompt=prompt,
                       schema=schema_of(Reflection), shape=_REFLECT_SHAPE,
                       max_tokens=self.config.max_tokens)
        r = validated(Reflection, obj, "ace_reflect")
        tags = {by_bullet[t.id]: t.tag for t in r.bullet_tags if t.id in by_bullet}
        lesson = (f"Error: {r.error_identification}\nRoot cause: {r.root_cause_analysis}\n"
                  f"Correct approach: {r.correct_approach}\nKey insight: {r.key_insight}")
        return tags, lesson

    def curate(self, episode: Episode, lesson: str, items: Sequence[Item]) -> list[Operation]:
        """The Curator: the delta operations of this episode."""
        if self.config.mode == "llm":
            values = episode_prompt_values(episode, self.config.max_trajectory_chars)
            stats = {s: sum(1 for i in items if i.payload.get("section") == s)
                     for s in SECTIONS}
            prompt = load_prompt("ace", "curate", _CURATE_VARS).substitute(
                task_description=values["task_description"], result=values["result"],
                playbook=self.render_playbook(items) or "(empty)", reflection=lesson,
                playbook_stats=", ".join(f"{k}: {v} bullets" for k, v in stats.items()),
                token_budget=str(self.config.token_budget))
            obj = ask_json(self._need_llm(), role="ace_curate", purpose="merge", prompt=prompt,
                           schema=schema_of(Curation), shape=_CURATE_SHAPE,
                           max_tokens=self.config.max_tokens)
            return validated(Curation, obj, "ace_curate").operations
        emb_name = self.embedder.name if self.embedder is not None else None
        proc = structural_procedure(episode, self.config.domain,
                                    self.config.text_mode(emb_name))
        situation = f"When the task is like: {proc.situation}"
        if episode.success:
            if not proc.steps:
                return []
            steps = "\n".join(f"{n}. {s}" for n, s in
                              enumerate(proc.steps[: self.config.max_steps], 1))
            return [Operation(type="ADD", section="strategies",
                              content=f"{situation}\n{steps}"[:CONTENT_MAX])]
        return [Operation(type="ADD", section="pitfalls",
                          content=f"{situation}\n{proc.attempt}"[:CONTENT_MAX])]

    # -- learn ---------------------------------------------------------------------------
    def _plan_learn(self, episode: Episode, recall: Recall | None, prepared: object) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        items = self._bullets()
        by_id = {i.id: i for i in items}
        used = [by_id[i] for i in followed_ids(recall, self.source, self.config.tag_top)
                if i in by_id]
        try:
            tags, lesson = self.reflect(episode, used)
            operations = self.curate(episode, lesson, items)
        except ExtractionError as e:
            plan.reject(self.source, e)
            return plan
        for item_id, tag in tags.items():  # the counters
            if tag == "neutral":
                continue
            item = by_id[item_id]
            b = Bullet.of(item)
            if tag == "helpful":
                b.helpful += 1
            else:
                b.harmful += 1
            change = Change("hit" if tag == "helpful" else "failed", self.source,
                            f"{b.id} tagged {tag} by a {'won' if episode.success else 'lost'} "
                            f"episode: helpful={b.helpful} harmful={b.harmful}", item.id)
            plan.changes.append(change)
            plan.writes.append(UpdateItem(
                item.id, text=b.render(), payload={**item.payload, **b.payload()},
                embedding=item.embedding,
                episode_id=episode.id, unchanged_since=item.updated_at,
                stale=(change, Change("skipped", self.source,
                                      f"{b.id} changed in another process; its {tag} tag "
                                      "was not counted", item.id))))
        self._merge(plan, operations, items, episode, emb)
        return plan

    def _merge(self, plan: Plan, operations: Sequence[Operation], items: Sequence[Item],
               episode: Episode, emb: Any) -> None:
        """The deterministic merge: each ``ADD``, unless it duplicates a bullet of its
        section (content cosine ≥ ``dedup_threshold``), becomes a new bullet."""
        if not operations:
            plan.changes.append(Change("skipped", self.source,
                                       "the curator proposed no operation"))
            return
        vecs = emb.embed_passages([op.content for op in operations])
        keys = emb.embed_passages([situation(op.content) for op in operations])
        next_id = 1 + max((int(m.group(1)) for i in items
                           if (m := _ID.search(str(i.payload.get("bullet_id", ""))))),
                          default=0)
        added: list[Item] = []
        for op, vec, key in zip(operations, vecs, keys, strict=True):
            same = [i for i in [*items, *added]
                    if i.payload.get("section") == op.section and i.embedding is not None]
            if same and self.config.dedup_threshold is not None:
                sims = cosine(np.stack([i.embedding for i in same]), vec)  # type: ignore[misc]
                j = int(np.argmax(sims))
                if float(sims[j]) >= self.config.dedup_threshold:
                    plan.changes.append(Change(
                        "skipped", self.source,
                        f"ADD to {op.section} dropped: duplicate of "
                        f"{same[j].payload['bullet_id']} (cosine {float(sims[j]):.3f} ≥ "
                        f"{self.config.dedup_threshold:g})", same[j].id))
                    continue
            b = Bullet(f"{SECTIONS[op.section]}-{next_id:05d}", op.section, op.content)
            next_id += 1
            payload = {**b.payload(), "key_vec": [round(float(x), 6) for x in key]}
            item = Item(system=self.name, kind=KIND, key=op.section, text=b.render(),
                        payload=payload, embedding=np.asarray(vec, dtype=np.float32),
                        episode_id=episode.id)
            added.append(item)
            plan.changes.append(Change("written", self.source,
                                       f"ADD {b.id} to {op.section}", item.id))
            plan.writes.append(InsertItem(item))

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        return [i.text for i in items if i.kind == KIND]

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        bullets = [Bullet.of(i) for i in items if i.kind == KIND]
        sections: Mapping[str, int] = {s: sum(1 for b in bullets if b.section == s)
                                       for s in SECTIONS}
        return {
            "bullets": dict(sections),
            "helpful": sum(b.helpful for b in bullets),
            "harmful": sum(b.harmful for b in bullets),
            "playbook_tokens": sum(len(b.render().split()) for b in bullets),
        }


make = make_factory(ACE)
