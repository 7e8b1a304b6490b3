"""The memory contract every memory system implements.

The loop every benchmark run and every framework integration runs::

    recall = memory.recall(task)          # before the episode
    ...    = memory.observe(step)          # optional, after every step (step-level memories)
    changes = memory.learn(episode, recall)

The async forms ``await memory.arecall(task)`` and ``await memory.alearn(episode, recall)``
do the same without blocking an event loop (:meth:`Memory.arecall`).

A new memory system is "in" when :func:`deltamem.testing.check_memory` passes on it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from deltamem import telemetry
from deltamem.judge import Judge
from deltamem.recorder import EpisodeRecorder
from deltamem.types import Changes, Episode, Recall, Step, Task

T = TypeVar("T")
_WORKER_LOCKS_GUARD = threading.Lock()


class Memory(ABC):
    """Base class of memory systems.

    Implementers must provide :meth:`recall`, :meth:`learn` and :meth:`stats`;
    :meth:`observe` and :meth:`close` have no-op defaults.
    """

    #: registry name of the system (``deltamem``, ``none``, ...)
    name: str = "memory"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every system's :meth:`recall` is traced the same way, here and only here: an
        OpenTelemetry ``search_memory`` span (:func:`deltamem.telemetry.recall_span`) with
        the system, the bank, the records shown and each tree's match."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("recall")
        if own is not None and not getattr(own, "__isabstractmethod__", False) \
                and not getattr(own, "_traced", False):
            cls.recall = _traced(own)  # type: ignore[method-assign]

    @abstractmethod
    def recall(self, task: Task) -> Recall:
        """Return the memory to show the agent before it plays ``task``.

        Must not change what is stored (recall is read-only; a frozen bank is
        queried with recall alone). Returns an empty :class:`Recall` when
        nothing relevant is stored.
        """

    @abstractmethod
    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """Update the memory from a finished episode.

        ``recall`` is what :meth:`recall` returned for this episode's task
        (systems that decide where to write from the retrieval outcome use it;
        when ``None`` they retrieve again). Must validate the episode first and
        raise :class:`~deltamem.errors.InvalidInputError` without changing
        anything when it is malformed. Returns every change made or skipped,
        with reasons. Either all of an episode's writes persist or none does.
        """

    def observe(self, step: Step) -> Recall | None:
        """Step-level hook called after every environment step; default: nothing."""
        return None

    # -- async -------------------------------------------------------------------------------
    async def arecall(self, task: Task) -> Recall:
        """:meth:`recall` without blocking the event loop.

        The default runs :meth:`recall` on a worker thread (``asyncio.to_thread``): the
        embedding, the store's reads and any LLM call happen there while the loop keeps
        serving other tasks. Async calls on one memory run one at a time (a lock held on
        the worker thread), so two coroutines never interleave a recall and a learn on
        the same bank. Implementers may override it with a natively async version.
        """
        return await asyncio.to_thread(self._serialised, self.recall, task)

    async def alearn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        """:meth:`learn` without blocking the event loop (see :meth:`arecall`): validation,
        extraction (LLM calls included), embedding and the store's transaction all run on a
        worker thread; the same contract as :meth:`learn` otherwise."""
        return await asyncio.to_thread(self._serialised, self.learn, episode, recall)

    def _serialised(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` holding this memory's worker lock (one async call at a time)."""
        lock = self.__dict__.get("_worker_lock")
        if lock is None:
            with _WORKER_LOCKS_GUARD:
                lock = self.__dict__.setdefault("_worker_lock", threading.Lock())
        with lock:
            return fn(*args)

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """JSON-serialisable size figures (units stored, by kind)."""

    def close(self) -> None:  # noqa: B027 - deliberately optional
        """Release resources (database connections, ...)."""

    def episode(self, task: Task, *, max_steps: int | None = None,
                observe: bool = False, judge: Judge | None = None) -> EpisodeRecorder:
        """Record one episode of ``task``: recall on entry, learn on exit.

        ``with mem.episode(task) as ep: ... ep.step(action, observation) ...
        ep.finish(success, reward)``; an exception inside the block is learned as a
        failure and re-raised. With a ``judge`` (:mod:`deltamem.judge`) no ``finish`` is
        needed: the judge decides the outcome from the steps, and an uncertain verdict
        learns nothing. ``async with`` uses :meth:`arecall` / :meth:`alearn`. See
        :mod:`deltamem.recorder` for every rule.
        """
        return EpisodeRecorder(self, task, max_steps=max_steps, observe=observe, judge=judge)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _traced(recall: Callable[..., Recall]) -> Callable[..., Recall]:
    """``recall`` inside its ``search_memory`` span (see :meth:`Memory.__init_subclass__`)."""

    @functools.wraps(recall)
    def traced(self: Memory, task: Task, *args: Any, **kwargs: Any) -> Recall:
        with telemetry.recall_span(self, str(getattr(task, "goal", ""))) as span:
            out = recall(self, task, *args, **kwargs)
            if isinstance(out, Recall):
                telemetry.recall_done(span, out)
            return out

    traced._traced = True  # type: ignore[attr-defined]
    return traced


class NoMemory(Memory):
    """The *No Memory* baseline: recalls nothing, stores nothing (paper §4.1)."""

    name = "none"

    def recall(self, task: Task) -> Recall:
        return Recall()

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        episode.validate()
        return Changes()

    def stats(self) -> dict[str, Any]:
        return {"units": 0}
