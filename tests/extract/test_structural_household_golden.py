"""The structural extractor writes household (and every non-ScienceWorld) memories byte for byte
as before its ScienceWorld rules were added.

The 22 recorded household episodes of ``tests/envs/fixtures/household_replay.json.gz``
(walkthroughs and random-admissible play over the six task types) are extracted in every role
-- roots and residuals of both outcomes against the chain of the episode before, environment
roots and residuals, and the consolidation of that chain -- for the ``alfworld``, ``textworld``
and ``generic`` domains; ``fixtures/structural_household_golden.json.gz`` holds the payloads
the extractor wrote before (commit 243ca82; consolidations regenerated on purpose in issue 47,
when a consolidated skill came to hold its chain's composed steps, repeats included, where it
had kept each step text once). Residuals are written in the form the golden was made with,
``skill_deltas="additions"`` (the default became ``exact`` in issue 47; tested in
``test_structural_deltas.py``). Regenerate only on purpose:
``DELTAMEM_REGENERATE_GOLDEN=1 pytest tests/extract/test_structural_household_golden.py``.
The extractor is asked for placeholders (``skill_words="slots"``), the setting the golden
was written with; ``textworld`` keeps literal words by default since issue 29 (tested in
``test_structural.py``).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from deltamem.core.payload import ChainEntry
from deltamem.extract import StructuralExtractor
from deltamem.types import Episode, Step, Task

REPLAY = Path(__file__).parents[1] / "envs" / "fixtures" / "household_replay.json.gz"
GOLDEN = Path(__file__).parent / "fixtures" / "structural_household_golden.json.gz"
DOMAINS = ("alfworld", "textworld", "generic")


def _episodes(domain: str) -> list[Episode]:
    data = json.loads(gzip.decompress(REPLAY.read_bytes()))
    out = []
    for n, rec in enumerate(data["episodes"]):
        reset = rec["reset"]
        task = Task(id=rec["task_id"], goal=reset["goal"], scene=reset["scene"], domain=domain,
                    split="test", observation=reset["observation"], max_steps=50)
        steps = tuple(Step(action=s["action"], observation=s["observation"], valid=s["valid"],
                           admissible=tuple(s["admissible"]), done=s["done"])
                      for s in rec["steps"])
        success = bool(rec["steps"] and rec["steps"][-1]["success"])
        reward = float(rec["steps"][-1]["score"]) if rec["steps"] else 0.0
        if steps:
            out.append(Episode(task=task, steps=steps, success=success, reward=reward,
                               id=f"ep{n}"))
    return out


def _payloads(domain: str) -> list[Any]:
    x = StructuralExtractor(skill_words="slots", skill_deltas="additions")
    out: list[Any] = []
    episodes = _episodes(domain)
    previous: list[ChainEntry] = []
    for ep in episodes:
        row: dict[str, Any] = {}
        for role in ("task_root_success", "task_root_failure", "env_root"):
            p = x.extract(role, ep, [], domain)
            row[role] = None if p is None else [p.activation, p.procedure, p.termination]
        for role in ("task_residual_success", "task_residual_failure", "env_residual"):
            p = x.extract(role, ep, previous, domain)
            row[role] = None if p is None else [p.activation, p.procedure, p.termination]
        root = x.extract("task_root_success", ep, [], domain)
        env = x.extract("env_root", ep, [], domain)
        assert root is not None and env is not None
        label = "SUCCESS" if ep.success else "FAILURE"
        chain = [*previous[-2:], ChainEntry("RESIDUAL", label, root)]
        c = x.consolidate("task", chain, domain)
        row["consolidate"] = [c.activation, c.procedure, c.termination]
        out.append(row)
        previous = [ChainEntry("ROOT", "SUCCESS", root), ChainEntry("RESIDUAL", "SUCCESS", env)]
    return out


def test_household_payloads_are_unchanged() -> None:
    got = {d: _payloads(d) for d in DOMAINS}
    if os.environ.get("DELTAMEM_REGENERATE_GOLDEN") == "1":  # pragma: no cover
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_bytes(gzip.compress(json.dumps(got, sort_keys=True).encode(), mtime=0))
    want = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    for domain in DOMAINS:
        assert len(got[domain]) == len(want[domain]) > 10
        for n, (g, w) in enumerate(zip(got[domain], want[domain], strict=True)):
            assert g == w, f"{domain} episode {n} differs"
