"""The episode recorder: any agent loop becomes one recalled-then-learned :class:`Episode`.

::

    with mem.episode(task) as ep:
        prompt = base_prompt + ep.recall.text        # recalled on entry
        while not done:
            action = agent(prompt, observation)
            observation, done, won = env.step(action)
            ep.step(action, observation)
        ep.finish(success=won, reward=1.0 if won else 0.0)
    ep.changes                                        # learned on exit

Rules (the memory contract of :mod:`deltamem.memory`, applied to a live loop):

* entering recalls once for the task (``ep.recall``; an empty :class:`Recall` when the
  memory has nothing relevant);
* leaving learns once, with that recall, from the steps recorded so far:
  - after :meth:`EpisodeRecorder.finish`: with its success and reward;
  - without ``finish`` and without an exception: as a failure (reward 0), because the loop
    ended without reaching the goal;
  - on an exception (any :class:`Exception`): as a failure, then the exception propagates
    unchanged; if learning fails too, that error is logged and the original one propagates;
  - on :class:`BaseException` that is not an :class:`Exception` (``KeyboardInterrupt``,
    task cancellation): nothing is learned, a stopped run says nothing about the task;
  - with no step recorded: nothing is learned (an empty trajectory teaches nothing) and
    ``ep.changes`` holds one ``skipped`` change saying so.

Without an outcome (real agents rarely know one), give the recorder a ``judge``
(:mod:`deltamem.judge`): on leaving without :meth:`EpisodeRecorder.finish`, or after
``finish()`` with no ``success``, the judge reads the goal and the steps and decides;
its :class:`~deltamem.types.Verdict` is kept in ``ep.verdict`` and in the learned
``ep.episode.verdict``. An ``uncertain`` or ``refused`` verdict learns nothing
(``ep.changes`` holds one ``skipped`` change saying why): a guessed success would become a
SUCCESS skill later recalls follow. An explicit ``finish(success)`` always wins over the
judge; an exception still learns a failure without asking it::

    with mem.episode(task, judge=LLMJudge(llm)) as ep:
        ...
        ep.step(action, observation)
    ep.verdict            # Verdict(outcome='success', reason='...', judge='llm:...')

The recorder never swallows an error and never learns twice. ``async with`` awaits the
memory's :meth:`~deltamem.memory.Memory.arecall` and :meth:`~deltamem.memory.Memory.alearn`
(worker threads: an event loop is not blocked by embedding, storage or an LLM extractor;
the judge runs on a worker thread too). Framework adapters (:mod:`deltamem.integrations.langgraph`,
:mod:`deltamem.integrations.openai_agents`) drive the same object through :meth:`start`,
:meth:`step`, :meth:`finish` and :meth:`close` when the loop is spread over callbacks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol

from deltamem.errors import InvalidInputError
from deltamem.judge import Judge
from deltamem.types import Change, Changes, Episode, Recall, Step, Task, Verdict

log = logging.getLogger("deltamem.recorder")

_JUDGE = object()
"""Internal: closing found no outcome, and the judge must decide."""

__all__ = ["EpisodeRecorder", "RecordedMemory", "alearn", "arecall", "tool_action"]


class RecordedMemory(Protocol):
    """What the recorder calls on a memory: every :class:`~deltamem.memory.Memory` has it.

    (A protocol rather than ``Memory`` itself: the memory contract builds recorders in
    :meth:`Memory.episode`, so the recorder sits below it and must not import it.)
    """

    def recall(self, task: Task) -> Recall: ...
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes: ...
    def observe(self, step: Step) -> Recall | None: ...


async def arecall(memory: RecordedMemory, task: Task) -> Recall:
    """``memory.arecall(task)`` when the memory has it, else ``recall`` on a worker thread."""
    fn = getattr(memory, "arecall", None)
    if fn is not None:
        return await fn(task)  # type: ignore[no-any-return]
    return await asyncio.to_thread(memory.recall, task)


async def alearn(memory: RecordedMemory, episode: Episode, recall: Recall | None) -> Changes:
    """``memory.alearn(...)`` when the memory has it, else ``learn`` on a worker thread."""
    fn = getattr(memory, "alearn", None)
    if fn is not None:
        return await fn(episode, recall)  # type: ignore[no-any-return]
    return await asyncio.to_thread(memory.learn, episode, recall)


class EpisodeRecorder:
    """Records one episode of ``task`` against ``memory`` (see the module doc for the rules).

    Args:
        memory: any :class:`~deltamem.memory.Memory` (:class:`RecordedMemory`).
        task: the task being played; its ``domain`` picks the memory header.
        max_steps: recorded in the episode (the cap the agent played under), if known.
        observe: also pass every step to :meth:`Memory.observe` (step-level memories);
            what it returns is kept in :attr:`step_recall`.
        judge: decides the outcome when the loop gives none (module doc); ``None``: an
            episode without ``finish(success)`` is learned as a failure.
    """

    def __init__(
        self,
        memory: RecordedMemory,
        task: Task,
        *,
        max_steps: int | None = None,
        observe: bool = False,
        judge: Judge | None = None,
    ) -> None:
        if not isinstance(task, Task):
            raise InvalidInputError(f"episode() needs a Task, got {type(task).__name__}")
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")
        self.memory = memory
        self.task = task
        self.max_steps = max_steps
        self.observe = observe
        self.judge = judge
        #: the judge's verdict, once it was asked (see the module doc)
        self.verdict: Verdict | None = None
        #: what the memory recalled for the task (set by :meth:`start`)
        self.recall: Recall = Recall()
        #: latest step-level recall (``observe=True`` only)
        self.step_recall: Recall | None = None
        self.steps: list[Step] = []
        #: ``(success, reward)`` once :meth:`finish` was called (success ``None``: left to
        #: the judge)
        self.outcome: tuple[bool | None, float | None] | None = None
        #: the episode that was learned (``None`` before :meth:`close` or when skipped)
        self.episode: Episode | None = None
        #: what learning changed (``None`` before :meth:`close`)
        self.changes: Changes | None = None
        self._started = False
        self._closed = False

    # -- the loop ----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._started

    @property
    def closed(self) -> bool:
        return self._closed

    def start(self) -> Recall:
        """Recall for the task (once; later calls return the same recall)."""
        if self._closed:
            raise InvalidInputError("this episode is already closed")
        if not self._started:
            self.recall = self.memory.recall(self.task)
            self._started = True
        return self.recall

    def step(
        self,
        action: str,
        observation: str = "",
        *,
        reward: float = 0.0,
        done: bool = False,
        thought: str = "",
        valid: bool = True,
    ) -> Step:
        """Record one action and the environment's (or tool's) answer."""
        if self._closed:
            raise InvalidInputError("this episode is already closed; start a new one")
        if not isinstance(action, str) or not isinstance(observation, str):
            raise InvalidInputError("step action and observation must be text")
        if not math.isfinite(reward):
            raise InvalidInputError(f"step reward must be finite, got {reward!r}")
        s = Step(action=action, observation=observation, reward=float(reward), done=done,
                 thought=thought, valid=valid)
        self.steps.append(s)
        if self.observe:
            self.step_recall = self.memory.observe(s)
        return s

    def finish(self, success: bool | None = None, reward: float | None = None) -> None:
        """Say how the episode ended; ``reward`` defaults to 1.0 on success, else 0.0.

        ``success=None``: the episode ended and the recorder's ``judge`` decides how (an
        :class:`InvalidInputError` without a judge). Learning happens when the recorder
        closes (the ``with`` block ends); a later ``finish`` replaces an earlier one.
        """
        if self._closed:
            raise InvalidInputError("this episode is already closed")
        if success is None and self.judge is None:
            raise InvalidInputError("finish() without success needs a judge (episode(..., "
                                    "judge=...)) to decide the outcome")
        if reward is not None and not math.isfinite(float(reward)):
            raise InvalidInputError(f"episode reward must be finite, got {reward!r}")
        self.outcome = (None if success is None else bool(success),
                        None if reward is None else float(reward))

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def close(self, error: BaseException | None = None) -> Changes | None:
        """Learn from the recorded episode (once) and return the changes.

        ``error``: the exception that ended the loop, if any (learned as a failure; a
        non-:class:`Exception` stops without learning). Returns ``None`` when nothing was
        learned because of such an interruption.
        """
        ruled = self._begin_close(error)
        if ruled is _JUDGE:
            assert self.judge is not None
            ruled = self._rule(self.judge.judge(self.task, tuple(self.steps)))
        if not isinstance(ruled, Episode):
            return self.changes
        # never started (an adapter that skipped start): learn recalls for itself
        self.changes = self.memory.learn(ruled, self.recall if self._started else None)
        return self.changes

    async def aclose(self, error: BaseException | None = None) -> Changes | None:
        """:meth:`close` without blocking the event loop: the judge on a worker thread, the
        memory's :meth:`~deltamem.memory.Memory.alearn`."""
        ruled = self._begin_close(error)
        if ruled is _JUDGE:
            assert self.judge is not None
            ruled = self._rule(await asyncio.to_thread(self.judge.judge, self.task,
                                                       tuple(self.steps)))
        if not isinstance(ruled, Episode):
            return self.changes
        self.changes = await alearn(self.memory, ruled, self.recall if self._started else None)
        return self.changes

    def _begin_close(self, error: BaseException | None) -> Episode | object | None:
        """Close once: the episode to learn, :data:`_JUDGE` when the judge must decide, or
        ``None`` when nothing is learned (an interruption; ``changes`` says why otherwise)."""
        if self._closed:
            return None
        self._closed = True
        if error is not None and not isinstance(error, Exception):
            log.info("episode of task %r interrupted (%s): not learned",
                     self.task.id, type(error).__name__)
            return None
        if not self.steps:
            self.changes = Changes((Change("skipped", "recorder", "no step was recorded"),))
            return None
        if error is not None:
            return self._episode(False, 0.0)
        if self.outcome is not None and self.outcome[0] is not None:
            return self._episode(self.outcome[0], self.outcome[1])
        if self.judge is not None:
            return _JUDGE
        return self._episode(False, 0.0)

    def _episode(self, success: bool, reward: float | None) -> Episode:
        r = (1.0 if success else 0.0) if reward is None else reward
        self.episode = Episode(self.task, tuple(self.steps), success=success, reward=r,
                               max_steps=self.max_steps, verdict=self.verdict)
        return self.episode

    def _rule(self, verdict: Verdict) -> Episode | None:
        """Keep the judge's verdict: the episode to learn when it decided, else ``None``
        with one ``skipped`` change saying why nothing is learned."""
        self.verdict = verdict
        if verdict.decided:
            reward = self.outcome[1] if self.outcome is not None else None
            return self._episode(bool(verdict.success), reward)
        self.changes = Changes((Change(
            "skipped", "judge", f"{verdict.outcome} verdict from {verdict.judge}: "
            f"{verdict.reason}; nothing learned"),))
        return None

    # -- context manager -----------------------------------------------------------------------
    def __enter__(self) -> EpisodeRecorder:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close(exc)
        except Exception:
            log.exception("learning the failed episode of task %r failed too", self.task.id)
        # returning None lets the original exception propagate

    async def astart(self) -> Recall:
        """:meth:`start` through the memory's :meth:`~deltamem.memory.Memory.arecall`."""
        if self._closed:
            raise InvalidInputError("this episode is already closed")
        if not self._started:
            self.recall = await arecall(self.memory, self.task)
            self._started = True
        return self.recall

    async def __aenter__(self) -> EpisodeRecorder:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.aclose()
            return
        if not isinstance(exc, Exception):  # cancelled: nothing to learn, nothing to await
            self.close(exc)
            return
        try:
            await self.aclose(exc)
        except Exception:
            log.exception("learning the failed episode of task %r failed too", self.task.id)


def tool_action(name: str, args: Mapping[str, Any]) -> str:
    """The action text of a tool call: the argument itself when the tool takes one text
    argument (``act(command="go to fridge 1")`` → ``go to fridge 1``, how text-game
    actions read), else ``name(arg=value, ...)`` with JSON values."""
    if len(args) == 1:
        (value,) = args.values()
        if isinstance(value, str):
            return value
    inner = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}"
                      for k, v in args.items())
    return f"{name}({inner})"
