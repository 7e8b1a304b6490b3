"""Does every SUCCESS skill of a run's bank compose to its episode? (issue 47; §3.2, Eq. 7)

For each SUCCESS node of a DeltaMem bank's Task-Tree, the root-to-node chain is composed
(:func:`deltamem.extract.residual.chain_steps`) and compared with the abstract steps of the
episode the node was learned from (a consolidated root: the episode of the node it was
distilled from), as the structural extractor abstracts them
(:meth:`~deltamem.extract.structural.StructuralExtractor.skill_steps`, in the bank's own
``skill_words`` setting). A node is *whole* when the two are equal, a *fragment* when the
composed steps are a strict part of the episode's (steps lost), *other* otherwise.

Run it as ``python -m deltamem.analysis.composition RUN_DIR [RUN_DIR ...]`` on run
directories of ``deltamem run`` (their ``bank.db`` after the build phase -- or
``--bank-file`` another -- and ``trajectories.jsonl``, which holds every episode's steps).
The episodes come from the run's records: no environment is needed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from deltamem.extract.residual import chain_steps
from deltamem.extract.structural import StructuralExtractor
from deltamem.types import Episode, Step, Task

__all__ = ["NodeCheck", "check_bank", "main", "run_episodes"]


@dataclass(frozen=True)
class NodeCheck:
    """One SUCCESS node: its id, the episode it stands for, and what its chain composes to
    against that episode's steps (``verdict``: ``whole``, ``fragment`` or ``other``)."""

    node_id: str
    episode_id: str
    goal: str
    composed: tuple[str, ...]
    expected: tuple[str, ...]

    @property
    def verdict(self) -> str:
        if self.composed == self.expected:
            return "whole"
        it = iter(self.expected)
        if len(self.composed) < len(self.expected) and all(s in it for s in self.composed):
            return "fragment"
        return "other"


def run_episodes(run_dir: Path, domain: str) -> dict[str, Episode]:
    """The episodes of a run by episode id, rebuilt from ``episodes.jsonl`` (ids) and
    ``trajectories.jsonl`` (goals, actions, observations, validity)."""
    ids: dict[tuple[str, int], tuple[str, bool]] = {}
    for line in (run_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        ids[(d["phase"], d["index"])] = (d["episode_id"], bool(d["success"]))
    out: dict[str, Episode] = {}
    for line in (run_dir / "trajectories.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        key = (d["phase"], d["index"])
        if key not in ids:
            continue
        episode_id, success = ids[key]
        steps = tuple(Step(action=s[0], observation=s[1], valid=bool(s[2]))
                      for s in d["steps"])
        task = Task(id=d["task_id"], goal=d["goal"], domain=domain)
        out[episode_id] = Episode(task, steps, success=success, reward=float(success),
                                  id=episode_id)
    return out


def check_bank(bank: Path, episodes: Mapping[str, Episode] | Path) -> list[NodeCheck]:
    """:class:`NodeCheck` of every SUCCESS node of the bank's Task-Tree whose episode is in
    ``episodes`` (or in the run directory ``episodes`` names); read-only, no embedder."""
    from deltamem.memories.deltamem import DeltaMem

    mem = DeltaMem.open(bank, embedder=None, readonly=True)
    try:
        domain = mem.config.domain
        if isinstance(episodes, Path):
            episodes = run_episodes(episodes, domain)
        x = StructuralExtractor(skill_words=mem.config.skill_words)
        nodes = mem.nodes("task")
        by_id = {n.id: n for n in nodes}
        out = []
        for node in nodes:
            if node.label != "SUCCESS":
                continue
            source = by_id.get(node.source or "", node) if node.origin == "consolidated" \
                else node
            ep = episodes.get(source.episode_id)
            if ep is None:
                continue
            composed = chain_steps([n.entry() for n in mem.chain(node.id)])
            expected = x.skill_steps(ep, domain)
            out.append(NodeCheck(node.id, ep.id, ep.task.goal, tuple(composed),
                                 tuple(expected)))
        return out
    finally:
        mem.close()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--bank-file", default="bank.db",
                    help="the bank file in each run directory (default: bank.db)")
    ap.add_argument("--show", type=int, default=0, help="print this many non-whole nodes")
    args = ap.parse_args(argv)
    for run in args.runs:
        checks = check_bank(run / args.bank_file, run)
        counts = Counter(c.verdict for c in checks)
        print(f"{run}: {len(checks)} SUCCESS nodes: whole {counts['whole']}, fragment "
              f"{counts['fragment']}, other {counts['other']}")
        for c in [c for c in checks if c.verdict != "whole"][: args.show]:
            print(f"  {c.verdict} {c.node_id} ({c.goal}):\n    composed {list(c.composed)}"
                  f"\n    episode  {list(c.expected)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
