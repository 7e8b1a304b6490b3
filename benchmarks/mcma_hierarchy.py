"""How MCMA's clustering cuts (A.7) group one bank's H1 entries, measured against task types.

MCMA builds H2 scripts by clustering H1 entries at ``cluster_distance`` (cosine), fusing
near-duplicates (``fuse_cos``) and clustering the fused entries again at the coarser
``abstract_distance``. The right cuts depend on the embedder's similarity scale, so this
script measures them on a built bank instead of assuming the paper's setting carries over:

* the cosine distances between entries of the same task type and of different types
  (quantiles): a cut separates types only where these two ranges do not overlap;
* for each cut of a grid: the number of clusters, their purity (share of entries in their
  cluster's majority type) and the adjusted Rand index against the task types;
* the H2 groups MCMA builds with the quantile cuts (``--cluster-quantile`` /
  ``--abstract-quantile``, MCMA's defaults), with their purity and adjusted Rand index.

The task type of an entry is read from its episode's ``task_id`` in the run's
``episodes.jsonl`` (``--type-regex``; the default takes the path segment before the game
number, e.g. ``pick_and_place_simple`` in ``train/pick_and_place_simple/0-9``).

    python benchmarks/mcma_hierarchy.py --run runs/r19/hh-mcma-rule

Pure read-only: the bank is opened read-only and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

from deltamem.memories.mcma import hierarchy as hz
from deltamem.memories.mcma.memory import MCMAConfig
from deltamem.store.items import ItemStore


def load(run: Path, bank: str, pattern: str, role: str) -> tuple[np.ndarray, list[str]]:
    """H1 embeddings of ``role`` and the task type of each (by its episode)."""
    types: dict[str, str] = {}
    for line in (run / "episodes.jsonl").read_text().splitlines():
        rec = json.loads(line)
        m = re.search(pattern, str(rec.get("task_id", "")))
        if m:
            types[rec["episode_id"]] = m.group(1)
    store = ItemStore(run / bank, readonly=True)
    items = [i for i in store.items(kind="h1", key=role) if i.embedding is not None]
    items = [i for i in items if i.episode_id in types]
    if len(items) < 2:
        raise SystemExit(f"{run / bank}: fewer than 2 typed {role} H1 entries")
    return np.stack([i.embedding for i in items]), [types[i.episode_id] for i in items]


def purity(labels: list[int], types: list[str]) -> float:
    total = 0
    for c in set(labels):
        total += Counter(t for x, t in zip(labels, types, strict=True) if x == c
                         ).most_common(1)[0][1]
    return total / len(types)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, type=Path, help="run directory with the bank")
    p.add_argument("--bank", default="bank-frozen.db", help="bank file inside --run")
    p.add_argument("--role", default="success", choices=["success", "failure"])
    p.add_argument("--type-regex", default=r"([^/]+)/[^/]+$",
                   help="regex over task_id; group 1 is the task type")
    p.add_argument("--k", type=int, default=hz.DEFAULT_K)
    p.add_argument("--fuse-cos", type=float, default=0.9)
    p.add_argument("--cuts", default="0.05,0.1,0.15,0.2,0.25,0.3,0.4,0.5,0.6,0.8")
    defaults = MCMAConfig()
    p.add_argument("--cluster-quantile", type=float, default=defaults.cluster_quantile)
    p.add_argument("--abstract-quantile", type=float, default=defaults.abstract_quantile)
    a = p.parse_args(argv)
    from sklearn.metrics import adjusted_rand_score

    vecs, types = load(a.run, a.bank, a.type_regex, a.role)
    dist = hz.pairwise_distances(vecs)
    iu = np.triu_indices(len(types), 1)
    same = np.array([types[i] == types[j] for i, j in zip(*iu, strict=True)])
    print(f"{len(types)} {a.role} H1 entries, {len(set(types))} task types: "
          + ", ".join(f"{t} {n}" for t, n in sorted(Counter(types).items())))
    q = [0.1, 0.5, 0.9]
    for name, sel in (("same type", same), ("different types", ~same)):
        vals = dist[sel]
        if len(vals):
            qs = ", ".join(f"q{int(x * 100)} {v:.3f}" for x, v in zip(q, np.quantile(vals, q),
                                                                    strict=True))
            print(f"cosine distance, {name} ({len(vals)} pairs): min {vals.min():.3f}, {qs}, "
                  f"max {vals.max():.3f}")
    print("\ncut    clusters  purity  ARI    H2 groups (fused at this cut, then at 2x)")
    graph = hz.knn_graph(vecs, a.k)
    for cut in (float(x) for x in a.cuts.split(",")):
        labels = hz.cluster(vecs, graph, distance=cut)
        fused = hz.fuse(vecs, labels, fuse_cos=a.fuse_cos)
        groups = hz.abstraction_groups(vecs, fused, distance=min(2.0, 2 * cut), k=a.k)
        print(f"{cut:<6} {len(set(labels)):<9} {purity(labels, types):<7.2f} "
              f"{adjusted_rand_score(types, labels):<6.2f} {len(groups)}")
    cut = hz.distance_quantile(vecs, a.cluster_quantile)
    coarse = hz.distance_quantile(vecs, a.abstract_quantile)
    fused = hz.fuse(vecs, hz.cluster(vecs, graph, distance=cut), fuse_cos=a.fuse_cos)
    group_of = [0] * len(types)
    groups = hz.abstraction_groups(vecs, fused, distance=coarse, k=a.k)
    for g, group in enumerate(groups):
        for f in group:
            for row in f.members:
                group_of[row] = g
    print(f"\nquantile cuts q{a.cluster_quantile} ({cut:.3f}) / q{a.abstract_quantile} "
          f"({coarse:.3f}): {len(groups)} H2 groups, purity {purity(group_of, types):.2f}, "
          f"ARI {adjusted_rand_score(types, group_of):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
