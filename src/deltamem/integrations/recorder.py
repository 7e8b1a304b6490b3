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

The recorder never swallows an error and never learns twice. ``async with`` runs recall and
learn on a worker thread, so an event loop is not blocked by embedding or an LLM extractor.
Framework adapters (:mod:`deltamem.integrations.langgraph`,
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
from typing import TYPE_CHECKING, Any

from deltamem.errors import InvalidInputError
from deltamem.types import Change, Changes, Episode, Recall, Step, Task

if TYPE_CHECKING:
    from deltamem.memory import Memory

log = logging.getLogger("deltamem.recorder")

__all__ = ["EpisodeRecorder", "tool_action"]


class EpisodeRecorder:
    """Records one episode of ``task`` against ``memory`` (see the module doc for the rules).

    Args:
        memory: any :class:`~deltamem.memory.Memory`.
        task: the task being played; its ``domain`` picks the memory header.
        max_steps: recorded in the episode (the cap the agent played under), if known.
        observe: also pass every step to :meth:`Memory.observe` (step-level memories);
            what it returns is kept in :attr:`step_recall`.
    """

    def __init__(
        self,
        memory: Memory,
        task: Task,
        *,
        max_steps: int | None = None,
        observe: bool = False,
    ) -> None:
        if not isinstance(task, Task):
            raise InvalidInputError(f"episode() needs a Task, got {type(task).__name__}")
        if not task.goal.strip():
            raise InvalidInputError(f"task {task.id!r} has an empty goal")
        self.memory = memory
        self.task = task
        self.max_steps = max_steps
        self.observe = observe
        #: what the memory recalled for the task (set by :meth:`start`)
        self.recall: Recall = Recall()
        #: latest step-level recall (``observe=True`` only)
        self.step_recall: Recall | None = None
        self.steps: list[Step] = []
        #: ``(success, reward)`` once :meth:`finish` was called
        self.outcome: tuple[bool, float] | None = None
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

    def finish(self, success: bool, reward: float | None = None) -> None:
        """Say how the episode ended; ``reward`` defaults to 1.0 on success, else 0.0.

        Learning happens when the recorder closes (the ``with`` block ends); a later
        ``finish`` replaces an earlier one.
        """
        if self._closed:
            raise InvalidInputError("this episode is already closed")
        r = (1.0 if success else 0.0) if reward is None else float(reward)
        if not math.isfinite(r):
            raise InvalidInputError(f"episode reward must be finite, got {reward!r}")
        self.outcome = (bool(success), r)

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def close(self, error: BaseException | None = None) -> Changes | None:
        """Learn from the recorded episode (once) and return the changes.

        ``error``: the exception that ended the loop, if any (learned as a failure; a
        non-:class:`Exception` stops without learning). Returns ``None`` when nothing was
        learned because of such an interruption.
        """
        if self._closed:
            return self.changes
        self._closed = True
        if error is not None and not isinstance(error, Exception):
            log.info("episode of task %r interrupted (%s): not learned",
                     self.task.id, type(error).__name__)
            return None
        if not self.steps:
            self.changes = Changes((Change("skipped", "recorder", "no step was recorded"),))
            return self.changes
        if error is not None:
            success, reward = False, 0.0
        elif self.outcome is not None:
            success, reward = self.outcome
        else:
            success, reward = False, 0.0
        self.episode = Episode(self.task, tuple(self.steps), success=success, reward=reward,
                               max_steps=self.max_steps)
        # never started (an adapter that skipped start): learn recalls for itself
        self.changes = self.memory.learn(self.episode, self.recall if self._started else None)
        return self.changes

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

    async def __aenter__(self) -> EpisodeRecorder:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await asyncio.to_thread(self.close)
            return
        if not isinstance(exc, Exception):  # cancelled: nothing to learn, nothing to await
            self.close(exc)
            return
        try:
            await asyncio.to_thread(self.close, exc)
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
