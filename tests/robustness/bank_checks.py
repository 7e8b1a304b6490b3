"""Shared design and checks of the robustness tests: deterministic episodes, bank invariants.

Episodes are a pure function of their id ``w{worker}-{cycle}-{i}``, so any
bank can be compared with a reference bank obtained by learning the same
committed episodes, in commit order, in one process (:func:`replay`).
Embeddings come from :func:`make_embedder`: every text tagged ``[w<k>]`` gets
a vector supported only on worker k's block of coordinates, so different
workers' trees never match each other (cosine exactly 0). That holds only if
the embedded text keeps the tag, so the banks embed the raw goal and scene
(``task_trigger="goal"``, ``env_trigger="scene"``): the household domain's
default triggers reduce a scene to its kinds of places and would drop the tag.
"""

from __future__ import annotations

import hashlib
import random
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.memories.deltamem import DeltaMem
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import TableEmbedder, make_episode
from deltamem.types import Episode

DOMAIN = "alfworld"
K_CONS = 3
BLOCK = 16
WORKERS = 4
_TAG = re.compile(r"^\[w(\d+)\]")

_STEPS = (
    ("go to countertop 1", "On the countertop 1, you see a apple 1, and a knife 1."),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
    ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1."),
    ("go to fridge 1", "The fridge 1 is closed."),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1."),
    ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1."),
    ("go to cabinet 2", "On the cabinet 2, you see a mug 1."),
    ("examine mug 1", "Nothing happens."),
)


def _vector(text: str) -> np.ndarray:
    m = _TAG.match(text)
    worker = int(m.group(1)) if m else 0
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    v = np.zeros(BLOCK * WORKERS, dtype=np.float32)
    v[worker * BLOCK : (worker + 1) * BLOCK] = np.random.default_rng(seed).standard_normal(BLOCK)
    return v


def make_embedder() -> TableEmbedder:
    return TableEmbedder({}, name="robust", default=_vector)


def open_bank(path: str | Path, *, synchronous: str = "full") -> DeltaMem:
    return DeltaMem.open(
        path, embedder=make_embedder(), domain=DOMAIN, k_cons=K_CONS, synchronous=synchronous,
        task_trigger="goal", env_trigger="scene",
    )


def episode_for(episode_id: str) -> Episode:
    """The episode with this id (``w{worker}-{cycle}-{i}``): a pure function of the id."""
    worker, _cycle, i = (int(x) for x in episode_id[1:].split("-"))
    rng = random.Random(episode_id)
    start = rng.randrange(0, 4)
    steps = _STEPS[start : start + rng.randrange(2, 6)]
    return make_episode(
        f"[w{worker}] task {i % 5}: put a clean apple in fridge",
        scene=f"[w{worker}] kitchen {i % 3}: you see a countertop 1 and a fridge 1.",
        actions=steps,
        success=rng.random() < 0.75,
        task_id=f"t{worker}-{i % 5}",
        episode_id=episode_id,
    )


def learned_ids(path: str | Path) -> list[str]:
    """Committed episode ids in commit order."""
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT episode_id FROM learned ORDER BY rowid")]
    finally:
        conn.close()


def snapshot(store: SQLiteStore) -> list[tuple[Any, ...]]:
    """Every node as a comparable tuple; ids replaced by (tree, episode, origin) keys.

    One episode writes at most one extracted node and one consolidated root per
    tree, so the key names a node across banks.
    """
    nodes = [r for r in store.iter_export() if r["type"] == "node"]
    key = {n["id"]: (n["tree"], n["episode_id"], n["origin"]) for n in nodes}
    out = []
    for n in nodes:
        out.append((
            key[n["id"]], n["kind"], n["label"], n["depth"], n["success_hits"],
            n["consolidated"], n["trigger"], n["activation"], n["procedure"], n["termination"],
            key.get(n["parent_id"]), key.get(n["source_id"]), n["embedding"],
        ))  # fmt: skip
    return sorted(out, key=repr)


def replay(reference: DeltaMem, episode_ids: Iterable[str]) -> None:
    for eid in episode_ids:
        reference.learn(episode_for(eid))


def check_invariants(path: str | Path) -> dict[str, int]:
    """Structural invariants of a bank file; returns a few counts. AssertionError names a break.

    * ``PRAGMA integrity_check`` is ok and foreign keys hold;
    * no orphan: every RESIDUAL's parent exists in the same tree, and its depth
      is the parent's + 1; ROOTs have depth 1;
    * consolidation: every node flagged consolidated is the source of exactly
      one consolidated ROOT of its tree (written by the same transaction), and
      every consolidated ROOT's source is flagged; flagged nodes have ≥ K_cons hits;
    * every node's episode is recorded as learned (a learn's node writes and
      its ``learned`` row commit together).
    """
    conn = sqlite3.connect(path)
    try:
        q = conn.execute
        assert q("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert q("PRAGMA foreign_key_check").fetchall() == []
        bad = q(
            "SELECT n.id FROM nodes n LEFT JOIN nodes p ON p.id = n.parent_id AND p.tree = n.tree "
            "WHERE n.kind = 'RESIDUAL' AND (p.id IS NULL OR n.depth != p.depth + 1)"
        ).fetchall()
        assert bad == [], f"orphan or mis-deep residuals: {bad}"
        assert q("SELECT COUNT(*) FROM nodes WHERE kind = 'ROOT' AND depth != 1").fetchone()[0] == 0
        bad = q(
            "SELECT v.id FROM nodes v WHERE v.consolidated = 1 AND (v.success_hits < ? OR "
            "(SELECT COUNT(*) FROM nodes r WHERE r.origin = 'consolidated' AND r.source_id = v.id "
            "AND r.tree = v.tree AND r.kind = 'ROOT') != 1)",
            (K_CONS,),
        ).fetchall()
        assert bad == [], f"consolidated nodes without exactly one distilled root: {bad}"
        bad = q(
            "SELECT r.id FROM nodes r LEFT JOIN nodes v ON v.id = r.source_id "
            "WHERE r.origin = 'consolidated' AND (v.id IS NULL OR v.consolidated = 0)"
        ).fetchall()
        assert bad == [], f"consolidated roots whose source is not flagged: {bad}"
        bad = q(
            "SELECT DISTINCT episode_id FROM nodes WHERE episode_id NOT IN "
            "(SELECT episode_id FROM learned)"
        ).fetchall()
        assert bad == [], f"nodes of episodes not recorded as learned: {bad}"
        return {
            "nodes": q("SELECT COUNT(*) FROM nodes").fetchone()[0],
            "hits": q("SELECT COALESCE(SUM(success_hits), 0) FROM nodes").fetchone()[0],
            "learned": q("SELECT COUNT(*) FROM learned").fetchone()[0],
        }
    finally:
        conn.close()
