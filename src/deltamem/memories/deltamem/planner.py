"""The write planner: what one episode writes into each tree (paper §3.2, §3.4, §3.5), as a
:class:`~deltamem.memories.plan.Plan` of data records.

Per enabled tree, from the tree's :class:`~deltamem.types.Match` v*:

* the write decision (Eq. 4): a warm start (s(v*) ≥ τ_base) writes a RESIDUAL, a cold start
  a ROOT; the extraction role follows from it and the outcome (§3.4);
* the attachment (Eq. 5): under r0 (ROOT), under v* (d(v*) < D_max) or beside v* (under
  parent(v*)); the delta is extracted against the chain it will hang under;
* a success on a warm start is a hit on v* (c(v) + 1), and at c(v) ≥ K_cons the root → v
  chain is distilled into a new ROOT and v is marked (Eq. 8), decided again in the store
  as a compare-and-set (:class:`~deltamem.memories.plan.IncrementHits`);
* a failure on the Task-Tree's v* is a failure hit (f(v) + 1, the standing penalty's count);
* with ``supersede``, Env-Tree knowledge the new node contradicts is audited.

Extraction (the LLM's time) runs while planning; the records only store what was decided.
Last, the nodes the episode used (its matched chains and its new nodes) are touched: the
clock ``prune --policy unused:N`` reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from deltamem.core.forgetting import supersede
from deltamem.core.payload import TreeName
from deltamem.core.tree import Node, ResidualTree, standing_penalty
from deltamem.errors import ExtractionError
from deltamem.extract.base import Extractor, role_for
from deltamem.memories.deltamem.bank import BankView
from deltamem.memories.deltamem.config import DeltaMemConfig
from deltamem.memories.plan import (
    AddAudit,
    IncrementFailures,
    IncrementHits,
    InsertNode,
    Plan,
    TouchNodes,
)
from deltamem.types import Change, Episode, Match, new_id

__all__ = ["Planner"]


class Planner:
    """Plans an episode's writes on ``bank`` with ``extractor`` under ``config``."""

    def __init__(self, bank: BankView, extractor: Extractor, config: DeltaMemConfig) -> None:
        self.bank = bank
        self.extractor = extractor
        self.config = config

    def plan(self, episode: Episode, matches: Mapping[TreeName, Match],
             trees: Sequence[TreeName], vecs: np.ndarray,
             triggers: Mapping[TreeName, str]) -> Plan:
        """The whole plan of ``episode``: each tree's (``vecs[i]`` and ``triggers[t]``: the
        embedding and the text of tree ``trees[i]``'s new node), then the touch of every node
        it used."""
        plan = Plan.join(self.plan_tree(t, episode, matches[t], vecs[i], triggers[t])
                         for i, t in enumerate(trees))
        used = [nid for t, m in matches.items() if t in self.bank.trees
                and m.accepted and m.node_id in self.bank.trees[t]
                for nid in self.bank.trees[t].chain_ids(m.node_id)]  # type: ignore[arg-type]
        used += [c.id for c in plan.changes if c.kind == "written" and c.id]
        if used:
            plan.writes.append(TouchNodes(tuple(used)))
        return plan

    def plan_tree(self, tree_name: TreeName, episode: Episode, match: Match,
                  vec: np.ndarray, trigger: str) -> Plan:
        """What ``episode`` writes into one tree given its ``match`` (Eq. 4, 5): extraction
        runs now, the writes are records in the returned plan."""
        tree = self.bank.trees[tree_name]
        cfg = self.config
        plan = Plan()
        tau = cfg.tau(tree_name)
        anchor = match.node_id if match.accepted else None  # v*, for a warm start
        score = match.score
        if match.accepted and anchor not in tree:
            plan.changes.append(Change(
                "skipped", tree_name,
                f"recalled node {match.node_id} is not in this bank; treated as a cold start",
            ))
            anchor = score = None
        warm = anchor is not None
        # the delta is written against the chain it will hang under (§3.2: "relative to its
        # parent chain"): v*'s own, or parent(v*)'s when v* is at D_max and the new node
        # becomes its sibling (Eq. 5) -- against v*'s chain it would leave out what v* adds,
        # which the sibling's recalled chain (Eq. 7) does not hold
        parent, depth = tree.attachment(anchor, cfg.d_max)
        chain = [n.entry() for n in tree.chain(parent)] if parent is not None else []
        role = role_for(tree_name, warm, episode.success)
        score_txt = "empty tree" if score is None else f"best score {score:.3f}"
        try:
            payload = self.extractor.extract(role, episode, chain, cfg.domain)
        except ExtractionError as e:
            plan.reject(tree_name, e, role=role)
            payload = None
        else:
            if payload is None:
                plan.changes.append(Change(
                    "skipped", tree_name,
                    f"{role}: the chain it would extend already covers this episode",
                ))
        if payload is not None:
            node = Node(
                id=new_id(),
                tree=tree_name,
                kind="RESIDUAL" if warm else "ROOT",
                # Env-Tree knowledge is valid whatever the outcome (paper App. C.5:
                # "regardless of whether the task succeeded or failed, the environmental
                # observations are valid knowledge"; the authors' code labels env
                # nodes SUCCESS), so ε never pushes recall away from a scene
                label="SUCCESS" if episode.success or tree_name == "env" else "FAILURE",
                parent=parent,
                depth=depth,
                trigger=trigger,
                embedding=vec,
                payload=payload,
                episode_id=episode.id,
                created_at=time.time(),
            )
            if warm:
                where = (
                    f"under {parent}"
                    if parent == anchor
                    else f"as a sibling of {anchor} (depth {depth} = D_max)"
                )
                reason = f"warm start: {score_txt} ≥ τ {tau:g} → RESIDUAL {where}"
            else:
                reason = f"cold start: {score_txt} < τ {tau:g} → ROOT"
            plan.changes.append(Change("written", tree_name, f"{role}: {reason}", node.id))
            plan.writes.append(InsertNode(node))
            if tree_name == "env" and cfg.supersede and parent is not None:
                plan.extend(self.plan_supersede(tree, node, episode))
        if episode.success and anchor is not None:
            plan.extend(self.plan_hit(tree_name, anchor, episode))
        elif anchor is not None and tree_name == "task":
            plan.extend(self.plan_failure(tree_name, anchor, episode))
        return plan

    def plan_failure(self, tree_name: TreeName, node_id: str, episode: Episode) -> Plan:
        """A failure hit on the matched node: the failed episode followed its chain.

        Counted whatever ``failure_weight`` is (beside c(v), for reports and ``prune
        --policy harmful``); with λ > 0 it lowers the node's standing (Eq. 6 extended) and
        the audit trail says so.
        """
        plan = Plan()
        v = self.bank.trees[tree_name].get(node_id)
        lam = self.config.failure_weight
        penalty = standing_penalty(v.success_hits, v.failure_hits + 1, lam)
        reason = f"failure hit {v.failure_hits + 1} on matched node (c(v) = {v.success_hits})"
        if lam:
            reason += f"; standing penalty {penalty:.4f}"
        plan.writes.append(IncrementFailures(node_id, tree_name, episode.id, weight=lam,
                                             success_hits=v.success_hits))
        plan.changes.append(Change("failed", tree_name, reason, node_id))
        return plan

    def plan_supersede(self, tree: ResidualTree, node: Node, episode: Episode) -> Plan:
        """Knowledge of the new env ``node``'s chain that it contradicts (``supersede``):
        a ``superseded`` change and an audit entry per line (the recall leaves them out)."""
        plan = Plan()
        assert node.parent is not None
        chain = tree.chain(node.parent)
        entries = [n.entry() for n in chain]
        _, before = supersede(entries)
        already = {(g.index, g.line) for g in before}
        _, after = supersede([*entries, node.entry()])
        for g in after:
            if g.by != len(chain) or (g.index, g.line) in already:
                continue
            old = chain[g.index]
            reason = (f"{g.line!r} superseded by node {node.id}, a newer observation of "
                      f"{g.subject!r}")
            plan.changes.append(Change("superseded", "env", reason, old.id))
            plan.writes.append(AddAudit(
                episode_id=episode.id, node_id=old.id, tree="env", action="superseded",
                policy="supersede", reason=reason,
                record={"line": g.line, "subject": g.subject, "by": node.id}))
        return plan

    def plan_hit(self, tree_name: TreeName, node_id: str, episode: Episode) -> Plan:
        """Success hit on the matched node and, at K_cons, consolidation (Eq. 8)."""
        plan = Plan()
        tree = self.bank.trees[tree_name]
        v = tree.get(node_id)
        k = self.config.k_cons or math.inf
        # only a SUCCESS node's chain is distilled: a failure record holds no steps, so a
        # "skill" fused from a chain ending in one would hold another episode's procedure
        # under a SUCCESS label (the composition contract, issue 47)
        will_consolidate = (
            self.config.consolidation
            and v.kind == "RESIDUAL"
            and (v.label == "SUCCESS" or tree_name == "env")
            and not v.consolidated
            and v.success_hits + 1 >= k
        )
        root: Node | None = None
        if will_consolidate:
            chain = tree.chain(node_id)
            role = "consolidate_skill" if tree_name == "task" else "consolidate_knowledge"
            try:
                payload = self.extractor.consolidate(
                    tree_name, [n.entry() for n in chain], self.config.domain
                )
            except ExtractionError as e:
                plan.reject(tree_name, e, role=role, id=node_id)
            else:
                root = Node(
                    id=new_id(),
                    tree=tree_name,
                    kind="ROOT",
                    label="SUCCESS",
                    parent=None,
                    depth=1,
                    trigger=v.trigger,
                    embedding=v.embedding,
                    payload=payload,
                    origin="consolidated",
                    source=v.id,
                    episode_id=episode.id,
                    created_at=time.time(),
                )
        plan.writes.append(IncrementHits(node_id, consolidate=root, k=k))
        plan.changes.append(
            Change("hit", tree_name, f"success hit {v.success_hits + 1} on matched node", node_id)
        )
        if root is not None:
            plan.changes.append(
                Change(
                    "consolidated",
                    tree_name,
                    f"c(v) reached K_cons={int(k)}: chain of {len(tree.chain(node_id))}"
                    f" nodes fused into new ROOT {root.id}; node marked",
                    root.id,
                )
            )
        return plan
