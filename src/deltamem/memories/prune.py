"""Which nodes a DeltaMem bank forgets: the pruning policies of ``deltamem prune``.

A policy names nodes; every named node goes together with its whole subtree (a residual
is a delta on its ancestors' payloads, Eq. 7, and means nothing without them), and each
node removed is written to the bank's audit trail with the policy, the reason and what
the node held (:meth:`deltamem.memories.deltamem.DeltaMem.prune`).

Policies (``--policy``, repeatable):

* ``unused:N`` — nodes no learn has used in the last ``N`` learned episodes. A learn
  *uses* the nodes it writes and the chains its episode's recall followed (its matched
  root → v* chains), so ``N`` counts episodes, not time; nodes of a bank upgraded from
  schema version 1 count as used at the upgrade.
* ``harmful[:K]`` — net-harmful nodes: failed episodes that followed the node outnumber
  the successful ones by at least ``K`` (f(v) − c(v) ≥ K; default K = 2). Failure hits are
  counted on the Task-Tree's matched node (Env-Tree knowledge is valid whatever the
  outcome, so env nodes are never net-harmful).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from deltamem.core.tree import Node
from deltamem.errors import ConfigError

__all__ = ["PruneEntry", "PrunePolicy", "parse_policy", "select"]

HARMFUL_DEFAULT = 2


@dataclass(frozen=True)
class PrunePolicy:
    """One parsed policy: ``kind`` (``unused`` / ``harmful``) and its number."""

    kind: str
    n: int

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.n}"

    def names(self, node: Node, clock: int) -> str | None:
        """Why this policy names ``node`` (``clock``: episodes learned so far), or ``None``."""
        if self.kind == "unused":
            idle = clock - node.last_used
            if idle >= self.n:
                return f"not used in the last {idle} learned episodes (policy: {self.n})"
            return None
        net = node.failure_hits - node.success_hits
        if net >= self.n:
            return (f"net-harmful: {node.failure_hits} failed vs {node.success_hits} successful "
                    f"episodes followed it (f - c = {net} >= {self.n})")
        return None


def parse_policy(spec: str) -> PrunePolicy:
    """``unused:N`` or ``harmful[:K]`` (module doc); :class:`ConfigError` otherwise.

    >>> parse_policy("unused:50"), parse_policy("harmful").n
    (PrunePolicy(kind='unused', n=50), 2)
    """
    kind, sep, arg = spec.strip().partition(":")
    if kind not in ("unused", "harmful") or (kind == "unused" and not sep):
        raise ConfigError(f"unknown prune policy {spec!r}; use unused:N or harmful[:K]")
    if not sep:
        return PrunePolicy(kind, HARMFUL_DEFAULT)
    try:
        n = int(arg)
    except ValueError:
        raise ConfigError(f"prune policy {spec!r}: {arg!r} is not a whole number") from None
    if n < 1:
        raise ConfigError(f"prune policy {spec!r}: the number must be at least 1")
    return PrunePolicy(kind, n)


@dataclass(frozen=True)
class PruneEntry:
    """One node a prune removes (or, in a dry run, would remove), and why."""

    node_id: str
    tree: str
    kind: str
    label: str
    depth: int
    success_hits: int
    failure_hits: int
    last_used: int
    policy: str
    reason: str
    text: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def select(nodes: Sequence[Node], policies: Iterable[PrunePolicy], clock: int) -> list[PruneEntry]:
    """The nodes ``policies`` remove from a bank holding ``nodes`` (parents before
    children, as a tree lists them): each named node, then its descendants ("below a
    node ..."), in the bank's order. The first policy naming a node gives its reason."""
    policies = list(policies)
    children: dict[str, list[Node]] = {}
    for n in nodes:
        if n.parent is not None:
            children.setdefault(n.parent, []).append(n)
    why: dict[str, tuple[str, str]] = {}
    for n in nodes:
        if n.id in why:
            continue
        for p in policies:
            reason = p.names(n, clock)
            if reason is not None:
                why[n.id] = (p.spec, reason)
                stack = list(children.get(n.id, ()))
                while stack:
                    c = stack.pop()
                    if c.id not in why:
                        why[c.id] = (p.spec, f"below node {n.id}, which the policy names")
                        stack.extend(children.get(c.id, ()))
                break
    out = []
    for n in nodes:
        if n.id in why:
            policy, reason = why[n.id]
            out.append(PruneEntry(n.id, n.tree, n.kind, n.label, n.depth, n.success_hits,
                                  n.failure_hits, n.last_used, policy, reason,
                                  " ".join(n.payload.text.split())[:160]))
    return out
