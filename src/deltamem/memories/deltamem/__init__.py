"""DeltaMem: dual residual trees with failure-penalised retrieval and consolidation (paper §3).

One :class:`DeltaMem` owns a bank (any :class:`~deltamem.store.base.Store`: a
:class:`~deltamem.store.sqlite.SQLiteStore` or a
:class:`~deltamem.store.postgres.PostgresStore`) holding two trees: the Task-Tree of
skills, queried with the task goal, and the Env-Tree of knowledge, queried with the scene
text (§3.1). The pure tree logic is :mod:`deltamem.core.tree`; this package wires it to an
embedder, an extractor and the store, one concern a module:

* :mod:`~deltamem.memories.deltamem.config`: the settings (τ_base of Eq. 4 and 6, ε of
  Eq. 6, D_max of Eq. 5, K_cons of Eq. 8, ...) and how a reopened bank keeps its own;
* :mod:`~deltamem.memories.deltamem.bank`: the bank view, the trees kept in step with
  the store (Eq. 3's fields of every node);
* :mod:`~deltamem.memories.deltamem.search`: the Eq. 6 match of each tree, in-process or in
  the store, and its typed records;
* :mod:`~deltamem.memories.deltamem.render`: the recall, each accepted match's Eq. 7 chain
  under the domain's header (supersede and the token budget applied);
* :mod:`~deltamem.memories.deltamem.planner`: the write planner, Eq. 4 write decision,
  Eq. 5 attachment, hits and Eq. 8 consolidation, as a plan of data records
  (:mod:`deltamem.memories.plan`) run by one applier inside one transaction;
* :mod:`~deltamem.memories.deltamem.decision`: serialised decisions when several processes
  share a bank (optimistic, then under the write lock);
* :mod:`~deltamem.memories.deltamem.forgetting`: pruning;
* :mod:`~deltamem.memories.deltamem.facade`: :class:`DeltaMem` itself, on the common base
  of banked memories (:class:`~deltamem.memories.banked.BankedMemory`: the learned ledger,
  the learn transaction, the stats head, the embedder check).

:func:`make`, below, is the registry's factory (:mod:`deltamem.memories`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem.config import (
    BANK_LAYOUT,
    PER_OPEN,
    TREES,
    DeltaMemConfig,
    check_bank_config,
)
from deltamem.memories.deltamem.facade import DeltaMem

__all__ = [
    "BANK_LAYOUT",
    "PER_OPEN",
    "TREES",
    "DeltaMem",
    "DeltaMemConfig",
    "check_bank_config",
    "make",
]


def make(
    *,
    bank: str | Path | None = None,
    embedder: Embedder | None = None,
    llm: Any = None,
    extractor: Extractor | Literal["structural", "llm"] | None = "structural",
    domain: str = "generic",
    options: Mapping[str, Any] | None = None,
    **_: Any,
) -> DeltaMem:
    """Registry factory (see :mod:`deltamem.memories`)."""
    if embedder is None:
        raise ConfigError("DeltaMem needs an embedder (--embedder on the command line, "
                          "e.g. minilm; embedder= in Python)")
    if extractor == "llm":
        if llm is None:
            raise ConfigError("extractor 'llm' needs an llm (--llm on the command line)")
        from deltamem.extract.llm import LLMExtractor

        extractor = LLMExtractor(llm)
    elif extractor in (None, "structural"):
        extractor = None  # the bank's own: its skill_words and skill_deltas settings
    elif isinstance(extractor, str):
        raise ConfigError(f"unknown extractor {extractor!r}; use 'structural' or 'llm'")
    opts = {"domain": domain, **dict(options or {})}
    return DeltaMem.open(bank or ":memory:", embedder=embedder, extractor=extractor, **opts)
