"""The memory contract every memory system implements.

The loop every benchmark runs (see ``shared/DESIGN.md``)::

    recall = memory.recall(task)          # before the episode
    ...    = memory.observe(step)          # optional, after every step (step-level memories)
    changes = memory.learn(episode, recall)

A new memory system is "in" when :func:`deltamem.testing.check_memory` passes on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from deltamem.types import Changes, Episode, Recall, Step, Task

if TYPE_CHECKING:
    from deltamem.integrations.recorder import EpisodeRecorder


class Memory(ABC):
    """Base class of memory systems.

    Implementers must provide :meth:`recall`, :meth:`learn` and :meth:`stats`;
    :meth:`observe` and :meth:`close` have no-op defaults.
    """

    #: registry name of the system (``deltamem``, ``none``, ...)
    name: str = "memory"

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

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """JSON-serialisable size figures (units stored, by kind)."""

    def close(self) -> None:  # noqa: B027 - deliberately optional
        """Release resources (database connections, ...)."""

    def episode(self, task: Task, *, max_steps: int | None = None,
                observe: bool = False) -> EpisodeRecorder:
        """Record one episode of ``task``: recall on entry, learn on exit.

        ``with mem.episode(task) as ep: ... ep.step(action, observation) ...
        ep.finish(success, reward)``; an exception inside the block is learned as a
        failure and re-raised. See :mod:`deltamem.integrations.recorder` for every rule.
        """
        from deltamem.integrations.recorder import EpisodeRecorder

        return EpisodeRecorder(self, task, max_steps=max_steps, observe=observe)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
