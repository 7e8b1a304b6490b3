"""The extractor contract: turn an episode (and the retrieved chain) into a node payload.

The paper's six extraction roles (§3.4, Appendix C.4–C.9) plus its two
consolidation roles (§3.5, Eq. 8):

============================  =====================================================
role                          when
============================  =====================================================
``task_root_success``         Task-Tree cold start, episode succeeded
``task_root_failure``         Task-Tree cold start, episode failed
``task_residual_success``     Task-Tree warm start, succeeded; may answer *skip*
``task_residual_failure``     Task-Tree warm start, failed; may answer *skip*
``env_root``                  Env-Tree cold start (any outcome)
``env_residual``              Env-Tree warm start (any outcome); may answer *skip*
``consolidate_skill``         fuse a Task-Tree root→v chain into one skill
``consolidate_knowledge``     fuse an Env-Tree root→v chain into one knowledge entry
============================  =====================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from deltamem.core.payload import ChainEntry, Payload, TreeName
from deltamem.types import Episode

Role = Literal[
    "task_root_success",
    "task_root_failure",
    "task_residual_success",
    "task_residual_failure",
    "env_root",
    "env_residual",
]
ConsolidationRole = Literal["consolidate_skill", "consolidate_knowledge"]

EXTRACTION_ROLES: tuple[Role, ...] = (
    "task_root_success",
    "task_root_failure",
    "task_residual_success",
    "task_residual_failure",
    "env_root",
    "env_residual",
)
CONSOLIDATION_ROLES: tuple[ConsolidationRole, ...] = ("consolidate_skill", "consolidate_knowledge")
SKIPPABLE: frozenset[str] = frozenset(
    {"task_residual_success", "task_residual_failure", "env_residual"}
)


def role_for(tree: TreeName, warm: bool, success: bool) -> Role:
    """The extraction role for a tree, a write decision (Eq. 4) and an outcome."""
    if tree == "env":
        return "env_residual" if warm else "env_root"
    kind = "residual" if warm else "root"
    outcome = "success" if success else "failure"
    return f"task_{kind}_{outcome}"  # type: ignore[return-value]


@runtime_checkable
class Extractor(Protocol):
    """Distils episodes into payloads.

    * ``extract(role, episode, chain, domain)`` returns a :class:`Payload`, or
      ``None`` for *skip* (only allowed for the residual roles in
      :data:`SKIPPABLE`; the chain already covers the episode). ``chain`` is the
      root→parent chain the new node will hang under in the tree being written: the
      retrieved root→match chain, or root→parent(match) when the match is at D_max and
      the node becomes its sibling (Eq. 5); empty for roots.
    * ``consolidate(tree, chain, domain)`` fuses a root→v chain into one
      self-contained payload (Eq. 8).
    * Both raise :class:`~deltamem.errors.ExtractionError` when no valid output
      could be produced; the caller then stores nothing for that tree.
    * ``domain`` is one of :data:`deltamem.domains.DOMAINS`.
    """

    name: str

    def extract(
        self, role: Role, episode: Episode, chain: Sequence[ChainEntry], domain: str
    ) -> Payload | None: ...

    def consolidate(self, tree: TreeName, chain: Sequence[ChainEntry], domain: str) -> Payload: ...
