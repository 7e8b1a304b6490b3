"""Forgetting: removing what the pruning policies name from a DeltaMem bank.

The policies and which nodes they name are :mod:`deltamem.memories.prune` (``unused:N``,
``harmful[:K]``); each named node goes with its subtree, since a residual is a delta on its
ancestors' payloads (Eq. 7) and means nothing without them. The removal is a
:class:`~deltamem.memories.plan.Plan` of records (an audit entry per node, with what it held,
then the deletion) run in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltamem.errors import ConfigError
from deltamem.memories.deltamem.bank import BankView
from deltamem.memories.plan import AddAudit, DeleteNodes, Plan, apply
from deltamem.memories.prune import PruneEntry, parse_policy, select

__all__ = ["prune"]


def prune(bank: BankView, policies: Sequence[str], *, dry_run: bool = False) -> list[PruneEntry]:
    """Remove from ``bank`` what ``policies`` name, in one transaction, each removal written
    to the audit trail with the policy, the reason and the node's fields and payload;
    ``dry_run``: only say what would go (reads only: works on a bank opened read-only).

    Returns the nodes removed (or that would be), parents before children.
    """
    parsed = [parse_policy(p) for p in policies]
    if not parsed:
        raise ConfigError("prune needs at least one policy (unused:N, harmful[:K])")
    store = bank.store
    if dry_run:
        return select(store.load_nodes(), parsed, store.learned_count())
    with store.transaction():
        bank.reload(force=True)
        clock = store.learned_count()
        nodes = store.load_nodes()  # the stored last uses (trees may lag behind)
        chosen = select(nodes, parsed, clock)
        if not chosen:
            return chosen
        by_id = {n.id: n for n in nodes}
        plan = Plan()
        for e in chosen:
            n = by_id[e.node_id]
            plan.writes.append(AddAudit(
                episode_id="", node_id=n.id, tree=n.tree, action="pruned", policy=e.policy,
                reason=e.reason,
                record={"kind": n.kind, "label": n.label, "parent": n.parent,
                        "depth": n.depth, "success_hits": n.success_hits,
                        "failure_hits": n.failure_hits, "last_used": n.last_used,
                        "consolidated": n.consolidated, "origin": n.origin,
                        "trigger": n.trigger, "payload": n.payload.to_dict(),
                        "episode_id": n.episode_id, "created_at": n.created_at,
                        "episodes_learned": clock}))
        plan.writes.append(DeleteNodes(tuple(e.node_id for e in chosen)))
        apply(store, plan)
    bank.reset()
    return chosen
