"""Run a benchmark: the recall → play → learn loop over a task stream, resumable after a crash.

Protocols (paper §4.1, §4.3):

* ``online``: phase ``online`` plays the first N tasks of ``split`` in the
  order of ``env.task_ids(split, seed)``, learning after each episode (unless
  ``frozen``).
* ``train-to-test``: phase ``build`` learns online on ``train_split`` into
  ``bank.db``; then each of ``eval_modes`` (``frozen``: recall only;
  ``unfrozen``: keeps learning) plays ``split`` from its own copy of the built
  bank, so both start from the same bytes. A frozen phase checks that its bank
  is byte-identical at the end and raises :class:`StoreError` if the memory
  changed it anyway.
* Attempts (``attempts`` > 1, with a ``temperature`` above 0): every evaluated phase is
  played once per attempt, each attempt from a fresh start (its own bank), so a game's
  attempts are independent samples of the same system (the AriGraph paper's five attempts
  per game); records carry ``attempt``.
* Outcome judge: with ``judge`` set, each episode a phase learns is first judged from its
  trajectory (:mod:`deltamem.judge`) and learned with the verdict's outcome instead of the
  environment's; an uncertain or refused verdict learns nothing. Each record keeps the
  environment's ``success`` and, under ``verdict``, the judge's outcome, reason and name,
  so agreement can be computed from ``episodes.jsonl``.
* Concurrency (``concurrency`` N > 1): a phase that never learns (``frozen``, the online
  protocol's ``frozen``) plays its episodes N at a time, each worker thread with its own
  environment (``env_factory``, or the config's environment spec; built and reset one at a
  time, the steps run freely) and its own handle on the
  read-only bank; the records are appended in stream order as they complete, each with the
  usage its own thread counted (:meth:`~deltamem.llm.base.BaseLLM.metered`). Learning
  phases play one episode after another. A crash keeps every record written in order.
* Demonstrations: ``train_agent = "expert"`` (or ``"expert:noise=P"``) has the
  build phase played by the environment's own solution
  (:class:`~deltamem.agents.expert.ExpertAgent`, no LLM call), so the bank is built
  from demonstrations; memory writes still use the configured extractor. Every
  system given the same config gets the same demonstrations in the same order.
  ``agent`` names the policy of the other phases (``react``: the LLM agent). Each
  record of ``episodes.jsonl`` names its policy under ``agent``.

The run directory's files and their atomic writes are :mod:`deltamem.bench.rundir`;
resume after a crash and exactly-once learning (``progress.json``) are
:mod:`deltamem.bench.recovery`; what the run shows on stderr is
:mod:`deltamem.bench.display`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from deltamem import telemetry
from deltamem.agents.expert import ExpertAgent, expert_budget, parse_expert_spec
from deltamem.agents.react import ReActAgent
from deltamem.bench.config import RunConfig
from deltamem.bench.display import Display, WatchedEnv, display_mode
from deltamem.bench.recovery import Progress
from deltamem.bench.results import (
    EPISODES_FILE,
    TRAJECTORIES_FILE,
    EpisodeLog,
    RunResult,
    append_trajectory,
    summarize,
)
from deltamem.bench.rundir import (
    BANK_FILE,
    LLM_CACHE_FILE,
    PROGRESS_FILE,
    bank_fingerprint,
    content_fingerprint,
    copy_bank,
    eval_bank,
    record_versions,
    save_config,
)
from deltamem.domains import get_domain
from deltamem.embed.base import Embedder
from deltamem.envs.base import Environment
from deltamem.errors import ConfigError, StoreError
from deltamem.judge import Judge, LLMJudge, make_judge
from deltamem.llm.base import LLMClient
from deltamem.memories import make_memory
from deltamem.memory import Memory
from deltamem.types import Episode, Recall, Task

__all__ = ["run"]

log = logging.getLogger(__name__)

_ENV_SETUP = threading.Lock()
"""Held while a worker builds or resets its environment: some environments parse their
games with a parser that is not thread-safe (TextWorld's PDDL grammar, under the household
world). Steps run unlocked."""

JUDGE_CACHE_FILE = "judge-cache.jsonl"
"""The record/replay cache of an LLM judge with a model of its own."""


@dataclass(frozen=True)
class _Phase:
    name: str
    split: str
    task_ids: tuple[str, ...]
    start: int
    learn: bool
    bank: Path
    attempt: int = 1

    @property
    def end(self) -> int:
        return self.start + len(self.task_ids)


def run(
    config: RunConfig,
    *,
    env: Environment | None = None,
    llm: LLMClient | None = None,
    embedder: Embedder | None = None,
    progress: bool | Literal["lines"] | None = None,
    env_factory: Callable[[], Environment] | None = None,
) -> RunResult:
    """Run (or resume) the benchmark described by ``config``; see the module docstring.

    ``env``, ``llm`` and ``embedder`` replace the objects the config's specs
    would build (an ``env`` given here is not closed by the runner).
    ``progress`` (on stderr): ``True`` a live bar with the step within the episode, the
    running success rate and the last action; ``False`` nothing; ``"lines"`` one plain
    line per finished episode; ``None`` (default) the bar on a terminal, else the lines (a
    log file gets them). ``env_factory`` builds the environment of each worker when
    ``config.concurrency`` > 1 (default: ``make_env`` on the config's spec when ``env`` is
    not given; required when it is).
    """
    run_dir = Path(config.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    episodes = EpisodeLog(run_dir / EPISODES_FILE)
    started = episodes.next_index > 0 or (run_dir / PROGRESS_FILE).exists()
    save_config(config, run_dir, check=started)
    resumed_from = episodes.next_index
    if resumed_from or episodes.dropped_torn_line:
        log.info("resuming %s at episode %d%s", run_dir, resumed_from,
                 " (dropped a torn last line)" if episodes.dropped_torn_line else "")
    own_env = env is None
    if env is None:
        from deltamem.envs.registry import make_env

        env = make_env(config.env, **config.env_options)
        if env_factory is None:
            def env_factory() -> Environment:
                return make_env(config.env, **config.env_options)
    try:
        if llm is None:
            from deltamem.llm.factory import make_llm

            llm = make_llm(config.llm, cache_path=run_dir / LLM_CACHE_FILE,
                           **config.llm_options)
        settings = getattr(llm, "settings", None)
        record_versions(run_dir, resumed_from,
                        settings() if callable(settings) else {"name": llm.name})
        if embedder is None and config.embedder:
            from deltamem.embed.factory import make_embedder

            embedder = make_embedder(config.embedder)
        session = _Session(config, run_dir, env, llm, embedder, episodes, env_factory)
        session.run(display_mode(progress))
    finally:
        if own_env:
            env.close()
    return RunResult(
        run_dir=run_dir,
        episodes_path=episodes.path,
        episodes=episodes.next_index,
        resumed_from=resumed_from,
        phases=summarize(episodes.records),
    )


class _Session:
    """One invocation of :func:`run` on a prepared run directory."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        env: Environment,
        llm: LLMClient,
        embedder: Embedder | None,
        episodes: EpisodeLog,
        env_factory: Callable[[], Environment] | None = None,
    ) -> None:
        self.config = config
        self.env_factory = env_factory
        self.run_dir = run_dir
        self.env = env
        self.llm = llm
        self.embedder = embedder
        self.log = episodes
        self.progress = Progress(run_dir)
        self.display = Display("off")
        self.domain = config.domain or env.domain
        get_domain(self.domain)
        self.agent = ReActAgent(
            llm, domain=self.domain, constrained=config.constrained,
            max_steps=config.max_steps, history_chars=config.history_chars,
            repeat_limit=config.repeat_limit, max_listed_actions=config.max_listed_actions,
            guide=config.guide, temperature=config.temperature, cue_at=config.cue_at,
            guide_rules=None if config.guide_rules is None else tuple(config.guide_rules),
        )
        self.judge: Judge | None = None
        if config.judge is not None:
            spec = config.judge.strip()
            self.judge = (LLMJudge(llm) if spec == config.llm.strip() and spec != "scripted"
                          else make_judge(spec, **({} if spec == "scripted" else
                                                   {"cache_path": run_dir / JUDGE_CACHE_FILE})))

    def _policy(self, phase: _Phase) -> str:
        """The spec of the policy that plays ``phase`` (recorded with every episode)."""
        c = self.config
        if phase.name == "build" and c.train_agent is not None:
            return c.train_agent.strip()
        return c.agent.strip()

    # -- planning ---------------------------------------------------------------------------

    def _tasks(self, split: str, n: int | None) -> tuple[str, ...]:
        if self.env.splits and split not in self.env.splits:
            raise ConfigError(f"environment {self.env.name!r} has no split {split!r}; "
                              f"splits: {', '.join(self.env.splits)}")
        ids = list(self.env.task_ids(split, self.config.seed))
        if n is not None and n > len(ids):
            raise ConfigError(f"{n} episodes requested but split {split!r} of "
                              f"{self.env.name!r} has {len(ids)} tasks")
        return tuple(ids if n is None else ids[:n])

    def plan(self) -> list[_Phase]:
        """The phases in order; with ``attempts`` > 1 the evaluated phases once per attempt,
        attempt k (k > 1) with a bank of its own (``bank-attempt{k}.db``,
        ``bank-frozen-attempt{k}.db``, ...)."""
        c, d = self.config, self.run_dir

        def bank(path: Path, k: int) -> Path:
            return path if k == 1 else path.with_name(f"{path.stem}-attempt{k}{path.suffix}")

        phases: list[_Phase] = []
        if c.protocol == "online":
            tasks = self._tasks(c.split, c.episodes)
            for k in range(1, c.attempts + 1):
                phases.append(_Phase("online", c.split, tasks, len(tasks) * (k - 1),
                                     not c.frozen, bank(d / BANK_FILE, k), k))
            return phases
        phases.append(_Phase("build", c.train_split,
                             self._tasks(c.train_split, c.train_episodes), 0, True,
                             d / BANK_FILE))
        evals = self._tasks(c.split, c.episodes)
        for k in range(1, c.attempts + 1):
            for mode in c.eval_modes:
                phases.append(_Phase(mode, c.split, evals, phases[-1].end, mode == "unfrozen",
                                     bank(eval_bank(d, mode), k), k))
        return phases

    def _check_log(self, phases: list[_Phase]) -> None:
        planned = [(p.name, t) for p in phases for t in p.task_ids]
        for i, rec in enumerate(self.log.records):
            if i >= len(planned) or (rec.get("phase"), rec.get("task_id")) != planned[i]:
                raise ConfigError(
                    f"{self.log.path} line {i + 1} ({rec.get('phase')}, {rec.get('task_id')!r}) "
                    "does not match this configuration's task plan; use a new run_dir"
                )

    # -- the loop ---------------------------------------------------------------------------

    def run(self, show_progress: str) -> None:
        phases = self.plan()
        self._check_log(phases)
        with Display(show_progress, label=self.run_dir.name) as display:
            self.display = display
            for phase in phases:
                if self.log.next_index >= phase.end:
                    continue
                done = self.log.records[phase.start : self.log.next_index]
                name = phase.name if self.config.attempts == 1 else (
                    f"{phase.name}, attempt {phase.attempt}/{self.config.attempts}")
                display.start(name, phase.split, len(phase.task_ids), len(done),
                              sum(bool(r["success"]) for r in done))
                self._run_phase(phase)

    def _run_phase(self, phase: _Phase) -> None:
        self._prepare_bank(phase)
        before = bank_fingerprint(phase.bank) if not phase.learn else None
        pending = self.progress.pending(self.log, phase.start, phase.end)
        pre_open = content_fingerprint(phase.bank) if pending is not None else None
        memory = self._open_memory(phase)
        try:
            if pending is not None:
                rec = self.progress.recover(pending, memory, pre_open=pre_open, llm=self.llm,
                                            episodes=self.log, memory_name=self.config.memory)
                self.display.advance(rec)
            if self._parallel(phase):
                self._run_parallel(phase)
            while self.log.next_index < phase.end:
                rec = self._episode(phase, memory, self.log.next_index)
                self.display.advance(rec)
        finally:
            memory.close()
        if before is not None and bank_fingerprint(phase.bank) != before:
            raise StoreError(
                f"memory {self.config.memory!r} changed the bank {phase.bank} during the "
                f"{phase.name!r} phase although learn was never called (recall must be read-only)"
            )

    # -- concurrency ------------------------------------------------------------------------

    def _parallel(self, phase: _Phase) -> bool:
        """Whether ``phase`` plays N episodes at a time (module doc)."""
        n = self.config.concurrency
        if n <= 1 or phase.learn or phase.end - self.log.next_index <= 1:
            return False
        if self.env_factory is None:
            raise ConfigError("concurrency > 1 with an environment object needs env_factory= "
                              "(each worker plays in an environment of its own)")
        if not callable(getattr(self.llm, "metered", None)):
            raise ConfigError(f"concurrency > 1 needs an LLM client that meters usage per "
                              f"thread (a BaseLLM); {self.llm.name!r} does not")
        return True

    def _run_parallel(self, phase: _Phase) -> None:
        """Play the rest of ``phase`` (which never learns) with ``concurrency`` workers,
        appending each record in stream order as soon as those before it are written."""
        first = self.log.next_index
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(first, phase.end):
            todo.put(i)
        done: dict[int, tuple[dict[str, Any], Task, str, tuple[Any, ...]]] = {}
        errors: list[BaseException] = []
        cond = threading.Condition()
        stop = threading.Event()
        assert self.env_factory is not None
        factory = self.env_factory

        def worker() -> None:
            env: Environment | None = None
            memory: Memory | None = None
            try:
                with _ENV_SETUP:
                    env = factory()
                memory = self._open_memory(phase)
                while not stop.is_set():
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        return
                    out = self._frozen_episode(phase, memory, env, i)
                    with cond:
                        done[i] = out
                        cond.notify_all()
            except BaseException as e:  # handed to the main thread, which raises it
                with cond:
                    errors.append(e)
                    cond.notify_all()
            finally:
                if memory is not None:
                    memory.close()
                if env is not None:
                    env.close()

        n = min(self.config.concurrency, phase.end - first)
        threads = [threading.Thread(target=worker, name=f"episode-worker-{k}", daemon=True)
                   for k in range(n)]
        for t in threads:
            t.start()
        try:
            for i in range(first, phase.end):
                with cond:
                    while i not in done and not errors:
                        cond.wait()
                    if i not in done:
                        raise errors[0]
                    record, task, recall_text, steps = done.pop(i)
                append_trajectory(self.run_dir / TRAJECTORIES_FILE, i, phase.name, task,
                                  recall_text, steps)
                self.log.append(record)
                self.display.advance(record)
        finally:
            stop.set()
            for t in threads:
                t.join()

    def _open_memory(self, phase: _Phase) -> Memory:
        return make_memory(
            self.config.memory, bank=str(phase.bank), embedder=self.embedder, llm=self.llm,
            extractor=self.config.extractor, domain=self.domain,
            options=dict(self.config.memory_options),
        )

    def _frozen_episode(
        self, phase: _Phase, memory: Memory, env: Environment, index: int,
    ) -> tuple[dict[str, Any], Task, str, tuple[Any, ...]]:
        """Recall and play episode ``index`` of a phase that never learns, in ``env`` (a
        worker's): its record, task, recall text and steps, as :meth:`_episode` writes them."""
        t0 = time.perf_counter()
        metered = getattr(self.llm, "metered")  # noqa: B009 - checked by _parallel
        with _episode_span(phase, index) as span:
            with metered() as usage:
                task_id = phase.task_ids[index - phase.start]
                with _ENV_SETUP:
                    task = env.reset(task_id)
                recall = memory.recall(task)
                policy = self._policy(phase)
                played = self._play(policy, memory, task, recall, env=env,
                                    display=Display("off"))
            record = _record(index, phase, task_id, policy, played, recall)
            if self.config.attempts > 1 and phase.name != "build":
                record["attempt"] = phase.attempt
            record.update(learned=False, changes=[])
            record.update(usage=usage.to_dict(), bank=memory.stats(),
                          wall_s=round(time.perf_counter() - t0, 3))
            _end_span(span, record)
        return record, task, recall.text, played.steps

    def _prepare_bank(self, phase: _Phase) -> None:
        if phase.bank.exists():
            return
        source: Path | None = None
        if phase.name in ("online", "build") and self.config.init_bank is not None:
            source = Path(self.config.init_bank)
            if not source.exists():
                raise ConfigError(f"init_bank {source} does not exist")
        elif phase.name in ("frozen", "unfrozen"):
            built = self.run_dir / BANK_FILE
            source = built if built.exists() else None
        if source is not None:
            copy_bank(source, phase.bank)

    def _episode(self, phase: _Phase, memory: Memory, index: int) -> dict[str, Any]:
        """Recall, play and (when the phase learns) learn episode ``index``; append its line
        (inside an ``episode`` span, :mod:`deltamem.telemetry`)."""
        with _episode_span(phase, index) as span:
            record = self._episode_unspanned(phase, memory, index)
            _end_span(span, record)
            return record

    def _episode_unspanned(self, phase: _Phase, memory: Memory, index: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        usage0 = self.llm.usage.snapshot()
        task_id = phase.task_ids[index - phase.start]
        task = self.env.reset(task_id)
        self.display.episode(index - phase.start, task_id,
                             self.config.max_steps or self.env.max_steps(task))
        recall = memory.recall(task)
        policy = self._policy(phase)
        played = self._play(policy, memory, task, recall)
        episode: Episode | None = played
        record = _record(index, phase, task_id, policy, episode, recall)
        if self.config.attempts > 1 and phase.name != "build":  # the build is not repeated
            record["attempt"] = phase.attempt
        if phase.learn and self.judge is not None:
            episode = self._judged(episode, record)
        if not phase.learn:
            record.update(learned=False, changes=[])
        elif episode is None:  # the judge did not decide: nothing to learn
            record.update(learned=False, changes=[{
                "kind": "skipped", "source": "judge", "id": None,
                "reason": f"{record['verdict']['outcome']} verdict: nothing learned"}])
        else:
            self.progress.learning(index, episode=episode, recall=recall, record=record,
                                   usage=self.llm.usage.since(usage0),
                                   wall_s=time.perf_counter() - t0, bank=phase.bank)
            self.display.status(f"{'success' if episode.success else 'failure'} in "
                                f"{len(episode.steps)} steps; learning")
            changes = memory.learn(episode, recall)
            record.update(learned=True, changes=changes.to_list())
        record.update(
            usage=self.llm.usage.since(usage0).to_dict(),
            bank=memory.stats(),
            wall_s=round(time.perf_counter() - t0, 3),
        )
        if phase.learn:
            self.progress.learned(index, record)
        append_trajectory(self.run_dir / TRAJECTORIES_FILE, index, phase.name, task,
                          recall.text, played.steps)
        self.log.append(record)
        return record

    def _judged(self, episode: Episode, record: dict[str, Any]) -> Episode | None:
        """The episode as the judge says it ended (``None``: undecided); the verdict goes
        into ``record`` beside the environment's outcome."""
        assert self.judge is not None
        verdict = self.judge.judge(episode.task, episode.steps)
        record["verdict"] = verdict.to_dict()
        if not verdict.decided:
            return None
        won = bool(verdict.success)
        return replace(episode, success=won, reward=1.0 if won else 0.0, verdict=verdict)

    def _play(self, policy: str, memory: Memory, task: Task, recall: Recall, *,
              env: Environment | None = None, display: Display | None = None) -> Episode:
        """Play ``task`` (already reset) with ``policy``: the environment's own solution for
        an ``expert`` spec, the Ariadne agent for a step-level memory, else the ReAct agent.
        ``env`` and ``display`` default to the session's (a worker passes its own)."""
        watched: Any = WatchedEnv(env or self.env, display or self.display)  # step reports
        noise = parse_expert_spec(policy)
        if noise is not None:  # a demonstration: the environment's solution, no LLM
            budget = expert_budget(policy) or self.config.max_steps
            return ExpertAgent(noise=noise, seed=self.config.seed,
                               max_steps=budget).play(watched, task, recall)
        if getattr(memory, "agent", "react") == "ariadne":  # step-level memories (AriGraph)
            from deltamem.agents.ariadne import AriadneAgent

            return AriadneAgent(self.llm, domain=self.domain, max_steps=self.config.max_steps,
                                repeat_limit=self.config.repeat_limit,
                                temperature=self.config.temperature).play(
                watched, task, recall, memory=memory)
        return self.agent.play(watched, task, recall)


def _episode_span(phase: _Phase, index: int) -> Any:
    task_id = phase.task_ids[index - phase.start]
    return telemetry.span(f"episode {task_id}", {
        "deltamem.phase": phase.name, "deltamem.episode.index": index,
        "deltamem.task.id": task_id, "deltamem.attempt": phase.attempt,
        "deltamem.learn": phase.learn})


def _end_span(span: Any, record: dict[str, Any]) -> None:
    telemetry.set_attributes(span, {
        "deltamem.success": bool(record["success"]), "deltamem.steps": int(record["steps"]),
        "deltamem.reward": float(record["reward"]), "deltamem.learned": record.get("learned")})


def _record(index: int, phase: _Phase, task_id: str, policy: str, episode: Episode,
            recall: Recall) -> dict[str, Any]:
    """The line of ``episodes.jsonl`` for a played episode, before learning and usage."""
    return {
        "index": index,
        "phase": phase.name,
        "position": index - phase.start,
        "task_id": task_id,
        "split": phase.split,
        "agent": policy,
        "episode_id": episode.id,
        "success": bool(episode.success),
        "reward": float(episode.reward),
        "steps": len(episode.steps),
        "invalid_actions": sum(not s.valid for s in episode.steps),
        "recall": {
            "chars": len(recall.text),
            "items": [{"source": i.source, "id": i.id, "role": i.role,
                       "score": None if i.score is None else float(i.score)}
                      for i in recall.items],
            "details": dict(recall.details),
        },
    }
