"""``--memory mcma``: MCMA behind the :class:`~deltamem.memory.Memory` interface.

learn(episode):
  1. H0: the pruned trajectory (§3.1) is stored as the raw-trajectory level;
  2. H1: the task tree goes to the copilot of the episode's outcome (success summary or
     failure reflection, §3.3) at abstraction α (Eq. 4); its first entry is stored,
     rendered as text and embedded by name + description (A.7). A copilot answer that
     stays invalid is rejected and logged, never stored;
  3. H2: every ``rebuild_every`` new H1 entries, the abstract scripts are rebuilt from all
     H1 entries (k-NN graph, hierarchical clustering, intra-cluster fusion,
     inter-cluster abstraction; :mod:`.hierarchy`), success and failure entries apart.
     The rule abstractor uses each entry's α = 1 variant; in ``llm`` mode the copilot
     writes one script per group (prompt ``fuse.txt``), falling back to the rule
     abstractor when its answer is rejected.

recall(task): Top-N stored tasks by character-level similarity of task descriptions
(``retrieval="char"``, the paper's choice) or by embedding cosine (``"embedding"``);
the level is chosen by Eq. 9 (:func:`~.hierarchy.choose_level`): H0 (the raw trajectory
of the near-identical task, plus H1 entries; near-identical means the task description
*and* the scene, i.e. the first observation, both match at ``h0_band``, since BabyAI
repeats the same mission in different layouts), H1 (the Top-N episodic entries), or H2
(the abstract scripts most similar to the task, by embedding cosine).

Copilots: ``mode="deterministic"`` uses :class:`~.copilot.RuleCopilot` (the untrained
baseline); ``mode="llm"`` uses :class:`~.copilot.LLMCopilot` on the memory's ``llm``, or
on a trained copilot when ``copilot_model`` names a run directory of
:mod:`deltamem.training.copilot` (success and failure adapters; loaded as the LLM spec
``copilot:RUN_DIR``).
Memory unit (Table 5): one H1 or H2 entry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

import numpy as np
from pydantic import Field, model_validator

from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.base import LLMClient
from deltamem.memories.factory import make_factory
from deltamem.memories.flat import FlatConfig, FlatMemory, cosine
from deltamem.memories.mcma import hierarchy as hz
from deltamem.memories.mcma.copilot import Copilot, LLMCopilot, Role, RuleCopilot
from deltamem.memories.mcma.grammar import grammar_for
from deltamem.memories.mcma.preprocess import LLMSplitter, RuleSplitter, decompose, prune
from deltamem.memories.mcma.structures import (
    KnowledgeEntry,
    count_structures,
    render_entry,
)
from deltamem.memories.plan import InsertItem, Plan, UpdateItem, Write
from deltamem.store.items import Item
from deltamem.types import Change, Changes, Episode, Recall, RecallItem, Task

__all__ = ["MCMA", "MCMAConfig", "make"]

H0, H1, H2 = "h0", "h1", "h2set"
SCHEMA = 1


class MCMAConfig(FlatConfig):
    """MCMA settings (see the module docstring).

    Attributes:
        alpha: abstraction α of the H1 entries (Eq. 4).
        top_n: memories shown per task (Top-N; the paper's best is 4–5, Figure 3).
        retrieval: ``char`` (character-level task matching) or ``embedding``.
        h0_band, h1_band: Eq. 9 level bands on the retrieval similarity.
        h2_shown: abstract scripts shown when H2 is chosen.
        k: neighbours of the k-NN graph (A.7).
        cluster_distance, fuse_cos, abstract_distance: the clustering cut, the fusion
            cosine and the coarser inter-cluster cut (:mod:`.hierarchy`). A cut left
            ``None`` (the default) is relative: the ``cluster_quantile`` /
            ``abstract_quantile`` of the pairwise cosine distances of the entries being
            clustered, so it holds for any embedder's scale
            (``benchmarks/mcma_hierarchy.py`` measures the cuts on a bank).
        rebuild_every: new H1 entries between two H2 rebuilds.
        use_failures: learn failure reflections (the reflection copilot).
        splitter: ``rule`` or ``llm`` preprocessing splitter.
        copilot_model: run directory of a trained copilot (``llm`` mode), or None.
        copilot_backend: how a trained copilot runs: ``gguf`` (exported once to a GGUF
            file beside its adapter and run by the local llama.cpp backend, with the
            answer schema enforced by grammar) or ``transformers`` (free generation,
            every answer validated afterwards).
        copilot_threads: CPU threads of a trained copilot (default: the backend's,
            ``DELTAMEM_LLM_THREADS`` or every core). Give 1 when other jobs share the
            cores: llama.cpp's threads wait on each other by spinning, and one answer
            took over 10 min at 2 threads beside another busy process.
        max_tokens: completion cap of the copilot calls.
        level: ``auto`` chooses the level by Eq. 9; ``h1`` / ``h2`` always recall that
            level (the paper's Table 5 transfer ablation: "Abstract Level 1 / 2"
            knowledge applied to another domain). H0 is never forced: a raw trajectory
            is only shown for a near-identical task.
    """

    alpha: float = Field(default=0.5, ge=0.0, le=1.0)
    top_n: int = Field(default=4, ge=1, le=20)
    retrieval: Literal["char", "embedding"] = "char"
    h0_band: float = Field(default=0.95, ge=0.0, le=1.0)
    h1_band: float = Field(default=0.6, ge=0.0, le=1.0)
    h2_shown: int = Field(default=2, ge=1, le=10)
    k: int = Field(default=hz.DEFAULT_K, ge=1, le=100)
    cluster_distance: float | None = Field(default=None, gt=0.0, le=2.0)
    fuse_cos: float = Field(default=0.9, ge=-1.0, le=1.0)
    abstract_distance: float | None = Field(default=None, gt=0.0, le=2.0)
    cluster_quantile: float = Field(default=0.1, gt=0.0, lt=1.0)
    abstract_quantile: float = Field(default=0.2, gt=0.0, lt=1.0)
    rebuild_every: int = Field(default=5, ge=1)
    use_failures: bool = True
    splitter: Literal["rule", "llm"] = "rule"
    copilot_model: str | None = None
    copilot_backend: Literal["gguf", "transformers"] = "gguf"
    copilot_threads: int | None = Field(default=None, ge=1)
    max_tokens: int = Field(default=900, ge=64)
    level: Literal["auto", "h1", "h2"] = "auto"

    @model_validator(mode="after")
    def _check_cuts(self) -> Self:
        if self.abstract_quantile < self.cluster_quantile:
            raise ValueError(f"abstract_quantile ({self.abstract_quantile}) must be at least "
                             f"cluster_quantile ({self.cluster_quantile}): the inter-cluster "
                             "cut is the coarser one")
        if (self.cluster_distance is not None and self.abstract_distance is not None
                and self.abstract_distance < self.cluster_distance):
            raise ValueError(f"abstract_distance ({self.abstract_distance}) must be at least "
                             f"cluster_distance ({self.cluster_distance})")
        return self


def _role(key: str) -> str:
    """A recalled entry's role: what a failure taught is a ``warning`` (never followed as
    steps, :mod:`deltamem.agents.guide.procedures`); a success's keeps its key."""
    return "warning" if key == "failure" else key


def _trajectory_text(goal: str, actions: Sequence[str], success: bool) -> str:
    outcome = "succeeded" if success else "failed"
    lines = [f"Task: {goal} ({outcome}, {len(actions)} useful actions)"]
    lines += [f"> {a}" for a in actions]
    return "\n".join(lines)


class MCMA(FlatMemory):
    """MCMA memory (see the module docstring). Use :meth:`open`."""

    name = "mcma"
    config_class: ClassVar[type[FlatConfig]] = MCMAConfig
    source: ClassVar[str] = "mcma"
    header: ClassVar[str] = (
        "Knowledge from earlier episodes, abstracted by a memory copilot. Trees and chains "
        "give the order of sub-goals and steps; key-values give facts; reflections on failed "
        "attempts say what to avoid. Adapt placeholders (<item>, <place>) to your task.")
    config: MCMAConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._copilots: dict[str, Copilot] = {}
        self._bands = hz.ReuseBands(h0=self.config.h0_band, h1=self.config.h1_band)

    # -- copilots -----------------------------------------------------------------------
    def copilot(self, role: Role) -> Copilot:
        """The copilot writing ``role`` memories (built once)."""
        if role not in self._copilots:
            if self.config.mode != "llm":
                self._copilots[role] = RuleCopilot(role)
            else:
                llm: LLMClient
                if self.config.copilot_model:  # a trained copilot (deltamem.training)
                    from deltamem.llm.factory import make_llm

                    llm = make_llm(f"copilot:{self.config.copilot_model}", role=role,
                                   threads=self.config.copilot_threads,
                                   backend=self.config.copilot_backend)
                else:
                    llm = self._need_llm()
                # a trained copilot gets the compact prompt it was trained on
                self._copilots[role] = LLMCopilot(llm, role, self.config.max_tokens,
                                                  compact=bool(self.config.copilot_model))
        return self._copilots[role]

    # -- recall --------------------------------------------------------------------------
    def _similarities(self, task: Task, items: Sequence[Item]) -> np.ndarray:
        if self.config.retrieval == "embedding":
            q = self._need_embedder().embed_queries([task.goal.strip()])[0]
            goals = self._need_embedder().embed_queries([i.payload["goal"] for i in items])
            return cosine(goals, q)
        return np.array([hz.char_similarity(task.goal, i.payload["goal"]) for i in items])

    def recall(self, task: Task) -> Recall:
        self._check_task(task)
        items = self._items()
        h1 = [i for i in items if i.kind == H1]
        h0 = {i.episode_id: i for i in items if i.kind == H0}
        if not h1 and not h0:
            return Recall(details={"level": None, "matches": []})
        pool = h1 or list(h0.values())
        sims = self._similarities(task, pool)
        order = sorted(range(len(pool)), key=lambda j: (-sims[j], j))[: self.config.top_n]
        best = float(sims[order[0]]) if order else 0.0
        h2 = self._h2_entries(items)
        level = hz.choose_level(best, self._bands, have_h2=bool(h2))
        top_raw = h0.get(pool[order[0]].episode_id) if order else None
        if level == 0 and (top_raw is None or hz.char_similarity(
                task.scene_text, top_raw.payload.get("scene", "")) < self.config.h0_band):
            # H0 replays a trajectory: only for the same instruction in the same situation
            # (BabyAI repeats missions across layouts)
            level = hz.choose_level(min(best, self.config.h0_band - 1e-9), self._bands,
                                    have_h2=bool(h2))
        if self.config.level != "auto" and h1:
            # forced level (Table 5); H2 falls back to H1 while no script exists yet
            level = 2 if self.config.level == "h2" and h2 else 1
        if not h1:
            level = 0
        shown: list[RecallItem] = []
        if level == 0:
            top = pool[order[0]]
            raw = h0.get(top.episode_id)
            if raw is not None:
                shown.append(RecallItem("h0", raw.id, raw.text, best,
                                        "warning" if raw.key == "failure" else "trajectory"))
            rest = order[1:] if h1 else []
            shown += [RecallItem("h1", pool[j].id, pool[j].text, float(sims[j]),
                                 _role(pool[j].key)) for j in rest[: self.config.top_n - 1]]
        elif level == 1:
            shown = [RecallItem("h1", pool[j].id, pool[j].text, float(sims[j]),
                                _role(pool[j].key)) for j in order]
        else:
            q = self._need_embedder().embed_queries([task.goal.strip()])[0]
            vecs = np.array([e["embedding"] for e in h2], dtype=np.float32)
            scores = cosine(vecs, q)
            pick = sorted(range(len(h2)), key=lambda j: (-scores[j], j))[: self.config.h2_shown]
            shown = [RecallItem("h2", h2[j]["id"], h2[j]["text"], float(scores[j]),
                                _role(h2[j]["role"])) for j in pick]
        details = {"level": level, "best_similarity": best,
                   "matches": [{"id": r.id, "level": r.source, "score": r.score}
                               for r in shown]}
        if not shown:
            return Recall(details=details)
        parts = []
        for r in shown:
            label = {"trajectory": "Trajectory of a near-identical task",
                     "warning": ("Failed trajectory of a near-identical task" if r.source == "h0"
                                 else "Reflection on a failure"),
                     "success": "Knowledge"}.get(r.role, "Knowledge")
            parts.append(f"## {label} (level H{r.source[1]})\n{r.text}")
        return Recall(text=self.header + "\n\n" + "\n\n".join(parts), items=tuple(shown),
                      details=details)

    @staticmethod
    def _h2_entries(items: Sequence[Item]) -> list[dict[str, Any]]:
        for i in items:
            if i.kind == H2:
                return list(i.payload.get("entries") or [])
        return []

    # -- learn ---------------------------------------------------------------------------
    def _plan(self, episode: Episode) -> Plan:
        plan = Plan()
        emb = self._need_embedder()
        actions = tuple(s.action for s in episode.steps)
        grammar = grammar_for(episode.task.domain, actions)
        kept = [s.action for s in prune(episode.steps, grammar)]
        goal = episode.task.goal.strip()
        role: Role = "success" if episode.success else "failure"
        h0 = Item(system=self.name, kind=H0, key=role,
                  text=_trajectory_text(goal, kept, episode.success),
                  payload={"schema": SCHEMA, "goal": goal, "actions": kept,
                           "scene": episode.task.scene_text[:2000],
                           "success": episode.success, "steps": len(episode.steps)},
                  embedding=emb.embed_passages([goal])[0], episode_id=episode.id)
        plan.changes.append(Change("written", "h0", f"pruned trajectory: {len(actions)} -> "
                                   f"{len(kept)} actions", h0.id))
        items: list[Item] = [h0]
        if episode.success or self.config.use_failures:
            splitter: Any = RuleSplitter(grammar)
            if self.config.splitter == "llm":
                splitter = LLMSplitter(self._need_llm(), splitter)
            tree = decompose(goal, kept, splitter)
            for e in getattr(splitter, "rejections", ()):
                plan.reject("preprocess", e)
            try:
                entries = self.copilot(role).abstract(episode, tree, self.config.alpha, 1)
            except ExtractionError as e:
                plan.reject("h1", e)
                entries = []
            if entries:
                entry = entries[0]
                abstract = RuleCopilot(role).abstract(episode, tree, 1.0, 1)
                vec = emb.embed_passages([f"{entry.name}\n{entry.description}"])[0]
                h1 = Item(system=self.name, kind=H1, key=role, text=render_entry(entry),
                          payload={"schema": SCHEMA, "goal": goal, "alpha": self.config.alpha,
                                   "entry": entry.model_dump(exclude_none=True),
                                   "abstract": abstract[0].model_dump(exclude_none=True)
                                   if abstract else None},
                          embedding=vec, episode_id=episode.id)
                items.append(h1)
                plan.changes.append(Change("written", "h1", f"{role} memory "
                                           f"[{entry.knowledge.structured_storage.type}]: "
                                           f"{entry.name}", h1.id))
        else:
            plan.changes.append(Change("skipped", "h1", "failure reflections are off"))
        existing = [i for i in self._items() if i.kind == H1]
        new_h1 = [i for i in items if i.kind == H1]
        rebuild = bool(new_h1) and (len(existing) + 1) % self.config.rebuild_every == 0
        h2_item = next((i for i in self._items() if i.kind == H2), None)
        h2_payload: dict[str, Any] | None = None
        if rebuild:
            h2_payload = self.build_h2([*existing, *new_h1], plan)
            plan.changes.append(Change("consolidated", "h2", f"{len(h2_payload['entries'])} "
                                       f"abstract scripts from {len(existing) + 1} entries"))
        plan.writes += [InsertItem(it) for it in items]
        if h2_payload is not None:
            plan.writes.append(self._write_h2(h2_item, h2_payload, episode.id))
        return plan

    def _write_h2(self, current: Item | None, payload: dict[str, Any], episode_id: str
                  ) -> Write:
        """The write of the H2 scripts ``payload``: an update of ``current``, else a new
        item."""
        text = "\n\n".join(e["text"] for e in payload["entries"])
        if current is None:
            return InsertItem(Item(system=self.name, kind=H2, key="current", text=text,
                                   payload=payload, episode_id=episode_id))
        return UpdateItem(current.id, text=text, payload=payload, embedding=None,
                          episode_id=episode_id)

    def rebuild_h2(self) -> Changes:
        """Rebuild the H2 scripts now from every H1 entry, with the current cuts.

        ``learn`` rebuilds them only every ``rebuild_every`` new entries; call this after
        reopening a bank with other cuts (``cluster_quantile``, ``abstract_distance``, ...)
        or another copilot. Rejected LLM abstractions are logged as in ``learn``.
        """
        self._need_embedder()
        h1 = [i for i in self._items() if i.kind == H1]
        current = next((i for i in self._items() if i.kind == H2), None)
        plan = Plan()
        payload = self.build_h2(h1, plan) if h1 else None
        if payload is not None:
            plan.writes.append(self._write_h2(
                current, payload, current.episode_id if current else ""))
        with self.store.transaction():
            self._apply(plan, "")
        self._writes += 1
        n = len(payload["entries"]) if payload else 0
        return Changes((*plan.changes, Change("consolidated", "h2", f"{n} abstract scripts "
                                                     f"from {len(h1)} entries")))

    # -- H2 ------------------------------------------------------------------------------
    def build_h2(self, h1: Sequence[Item], plan: Plan | None = None) -> dict[str, Any]:
        """The H2 level from H1 entries (A.7); JSON payload of the ``h2set`` item."""
        emb = self._need_embedder()
        cfg = self.config
        out: list[dict[str, Any]] = []
        cuts: dict[str, dict[str, float]] = {}
        for role in ("success", "failure"):
            members = [i for i in h1 if i.key == role and i.embedding is not None]
            if not members:
                continue
            vecs = np.stack([i.embedding for i in members])  # type: ignore[misc]
            graph = hz.knn_graph(vecs, cfg.k)
            cut = cfg.cluster_distance or hz.distance_quantile(vecs, cfg.cluster_quantile)
            coarse = cfg.abstract_distance or hz.distance_quantile(vecs,
                                                                   cfg.abstract_quantile)
            cuts[role] = {"cluster": float(f"{cut:.4g}"), "abstract": float(f"{coarse:.4g}")}
            labels = hz.cluster(vecs, graph, distance=cut)
            fused = hz.fuse(vecs, labels, fuse_cos=cfg.fuse_cos)
            for group in hz.abstraction_groups(vecs, fused, distance=coarse, k=cfg.k):
                rows = [r for f in group for r in f.members]
                rep = max(group, key=lambda f: (len(f.members), -f.representative))
                entry = self._abstract_group([members[r] for r in rows],
                                             members[rep.representative], role, plan)
                sources = list(dict.fromkeys(members[r].payload["goal"] for r in rows))[:20]
                entry = entry.model_copy(update={"knowledge": entry.knowledge.model_copy(
                    update={"source": [s[:200] for s in sources]})})
                vec = emb.embed_passages([f"{entry.name}\n{entry.description}"])[0]
                out.append({"id": f"h2-{role}-{len(out)}", "role": role,
                            "text": render_entry(entry),
                            "entry": entry.model_dump(exclude_none=True),
                            "members": [members[r].id for r in rows],
                            "clusters": sorted({f.cluster for f in group}),
                            "embedding": [float(x) for x in vec]})
        return {"schema": SCHEMA, "entries": out, "built_from": len(h1), "cuts": cuts}

    def _abstract_group(self, members: Sequence[Item], rep: Item, role: Role,
                        plan: Plan | None) -> KnowledgeEntry:
        """One H2 script for a group: the LLM copilot's fusion (``llm`` mode) or the α = 1
        variant of the group's representative."""
        if self.config.mode == "llm":
            from deltamem.memories.mcma.copilot import parse_answer
            from deltamem.memories.mcma.prompts import ask_validated, load
            from deltamem.memories.mcma.structures import answer_schema

            texts = [render_entry(KnowledgeEntry.model_validate(m.payload.get("abstract")
                                                                or m.payload["entry"]))
                     for m in members[:6]]
            prompt = load("fuse").substitute(entries="\n\n".join(texts), level="2")
            copilot = self.copilot(role)
            llm = getattr(copilot, "llm", None) or self._need_llm()

            def check(obj: Any) -> str | None:
                try:
                    parse_answer(obj)
                except ValueError as e:
                    return str(e)
                return None

            try:
                obj = ask_validated(llm, role="mcma_fuse", purpose="consolidate", prompt=prompt,
                                    schema=answer_schema(1), check=check,
                                    shape='{"knowledge": [one entry]}',
                                    max_tokens=self.config.max_tokens)
                return parse_answer(obj)[0]
            except ExtractionError as e:
                if plan is not None:
                    plan.reject("h2", e)
        base = rep.payload.get("abstract") or rep.payload["entry"]
        entry = KnowledgeEntry.model_validate(base)
        n = len(members)
        return entry.model_copy(update={
            "name": f"General script: {entry.knowledge.name}"[:200],
            "description": (f"Abstracted from {n} similar task(s). "
                            + entry.description)[:1200]})

    # -- stats ---------------------------------------------------------------------------
    def _token_units(self, items: Sequence[Item]) -> list[str]:
        units = [i.text for i in items if i.kind == H1]
        units += [e["text"] for e in self._h2_entries(items)]
        return units

    def _stats_extra(self, items: Sequence[Item]) -> dict[str, Any]:
        h1 = [i for i in items if i.kind == H1]
        h2 = self._h2_entries(items)

        def census(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
            top: Counter[str] = Counter()
            nested: Counter[str] = Counter()
            for e in entries:
                entry = KnowledgeEntry.model_validate(e)
                top[entry.knowledge.structured_storage.type] += 1
                count_structures(entry.knowledge.structured_storage, nested)
            return {"top_level": dict(sorted(top.items())),
                    "all_nested": dict(sorted(nested.items()))}

        return {
            "levels": {"h0": sum(1 for i in items if i.kind == H0), "h1": len(h1),
                       "h2": len(h2)},
            "h1_by_role": dict(sorted(Counter(i.key for i in h1).items())),
            "structures": {"h1": census([i.payload["entry"] for i in h1]),
                           "h2": census([e["entry"] for e in h2])},
        }

    def _check_reopen(self, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        for key in ("alpha",):
            if key in recorded and key in options and recorded[key] != options[key]:
                raise ConfigError(f"this bank was built with {key}={recorded[key]}; "
                                  f"reopen it without {key}= or start a new bank")


make = make_factory(MCMA)
