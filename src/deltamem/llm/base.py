"""The LLM client contract, its optional log-probability capability, and the usage-counting
base class.

Every backend (OpenAI-compatible, local llama.cpp, record/replay, scripted)
subclasses :class:`BaseLLM` and implements :meth:`BaseLLM._complete`; the base
class validates arguments and counts calls, tokens, attempts, retries and the time spent
waiting between retries per *purpose* (a call that fails after its retries still adds its
attempts and wait, from :class:`~deltamem.errors.LLMError`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from deltamem import telemetry
from deltamem.errors import ConfigError, LLMError
from deltamem.types import Usage

Message = Mapping[str, str]
"""A chat message: ``{"role": "system"|"user"|"assistant", "content": "..."}``."""


@dataclass(frozen=True)
class Completion:
    """What one LLM call returned.

    ``text`` is the raw output. When the call was made with ``choices``, it is
    exactly one of them. Token counts come from the backend when it reports
    them, else from a whitespace estimate (``estimated=True``). ``attempts`` is how
    many requests the backend sent for it (1 + retries) and ``retry_wait`` the seconds
    it slept between them; a record/replay cache keeps both, so a replayed run reports
    the usage of the recorded one.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    estimated: bool = False
    attempts: int = 1
    retry_wait: float = 0.0


@runtime_checkable
class LLMClient(Protocol):
    """What agents and extractors need from an LLM.

    ``complete`` sends chat ``messages`` and returns a :class:`Completion`.

    * ``purpose`` (required) names why the call is made (``act``, ``extract``,
      ``consolidate``, ``plan``, ...); usage is counted under it.
    * ``schema``: a JSON schema the output must follow. Backends that can
      enforce it (local grammar, OpenAI ``response_format``) do; others just
      ask. The caller still validates the output.
    * ``choices``: the output must be exactly one of these strings
      (constrained action selection).
    """

    name: str
    usage: Usage

    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: str,
        schema: Mapping[str, Any] | None = None,
        choices: Sequence[str] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion: ...


@dataclass(frozen=True)
class ScoredSample:
    """One sampled output with its natural-log probability under the model.

    ``logprob`` sums the log-probabilities of every sampled token, including the
    end-of-generation token when ``finished``; ``tokens`` counts the tokens without it.
    """

    text: str
    logprob: float
    tokens: int
    finished: bool


@runtime_checkable
class LogProbSampler(Protocol):
    """An optional capability: sampling outputs with their exact log-probabilities.

    Only a backend that reads the model's own token distribution can offer it (the local
    llama.cpp model, :meth:`deltamem.llm.local.LocalLLM.sample`; an API that returns text
    cannot), so it is a protocol of its own, next to :class:`LLMClient`; callers test for
    it with ``isinstance(llm, LogProbSampler)``. Used by the information-gain estimate
    (:mod:`deltamem.analysis.infogain`).

    ``sample(messages, n=..., max_tokens=..., seed=...)`` returns ``n`` independent
    samples of the reply to the chat ``messages``, drawn from the model's full
    distribution at temperature 1 (no truncation: the log-probabilities must be
    those of the distribution sampled from), each at most ``max_tokens`` long.
    The same arguments must give the same samples.
    """

    name: str

    def sample(self, messages: Sequence[Message], *, n: int, max_tokens: int,
               seed: int) -> list[ScoredSample]: ...


def estimate_tokens(text: str) -> int:
    """Whitespace token estimate, used where a backend reports no counts."""
    return len(text.split())


class BaseLLM(ABC):
    """Validates arguments and counts usage per purpose; subclasses implement ``_complete``."""

    name: str = "llm"

    def __init__(self) -> None:
        self.usage = Usage()
        self._lock = threading.Lock()
        self._meters = threading.local()

    @contextmanager
    def metered(self) -> Iterator[Usage]:
        """Count the calls this thread makes through this client inside the block, apart.

        ``usage`` counts every thread's calls; under ``deltamem run --concurrency N``
        several episodes call at once, so an episode's own usage is what its thread
        counted here (``usage.since(snapshot)`` would mix in the others'). Blocks nest:
        an inner block's calls count in the outer one too.
        """
        meter = Usage()
        stack: list[Usage] = getattr(self._meters, "stack", None) or []
        self._meters.stack = [*stack, meter]
        try:
            yield meter
        finally:
            self._meters.stack = stack

    def _count(self, purpose: str, prompt: int, completion: int, calls: int, *,
               attempts: int, retry_wait: float) -> None:
        kwargs = {"attempts": attempts, "retries": max(0, attempts - 1),
                  "retry_wait": retry_wait}
        with self._lock:
            self.usage.add(purpose, prompt, completion, calls, **kwargs)
        for meter in getattr(self._meters, "stack", None) or []:
            meter.add(purpose, prompt, completion, calls, **kwargs)

    def settings(self) -> dict[str, Any]:
        """What decides this client's answers besides the request (JSON-serialisable).

        A run records it and refuses to resume under other settings
        (:func:`deltamem.bench.rundir.record_versions`); a subclass whose numerics depend on
        more than its name (weights, kernels) adds them.
        """
        return {"name": self.name}

    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: str,
        schema: Mapping[str, Any] | None = None,
        choices: Sequence[str] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        if not purpose:
            raise ConfigError("every LLM call needs a purpose (act, extract, consolidate, ...)")
        if not messages:
            raise ConfigError("complete() needs at least one message")
        for m in messages:
            if m.get("role") not in {"system", "user", "assistant"} or not isinstance(
                m.get("content"), str
            ):
                raise ConfigError(f"malformed chat message: {m!r}")
        if choices is not None:
            choices = list(choices)
            if not choices:
                raise ConfigError("choices must not be empty")
        if schema is not None and choices is not None:
            raise ConfigError("give either schema or choices, not both")
        with telemetry.llm_span(self, messages, purpose=purpose, max_tokens=max_tokens,
                                temperature=temperature) as span:
            try:
                out = self._complete(
                    messages, schema=schema, choices=choices, max_tokens=max_tokens,
                    temperature=temperature, purpose=purpose,
                )
            except LLMError as e:
                if e.attempts:
                    self._count(purpose, 0, 0, 0, attempts=e.attempts, retry_wait=e.retry_wait)
                raise
            telemetry.llm_done(span, out)
        self._count(purpose, out.prompt_tokens, out.completion_tokens, 1,
                    attempts=out.attempts, retry_wait=out.retry_wait)
        return out

    @abstractmethod
    def _complete(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None,
        choices: Sequence[str] | None,
        max_tokens: int,
        temperature: float,
        purpose: str,
    ) -> Completion:
        """Make the call. Arguments are already validated."""


def prompt_text(messages: Sequence[Message]) -> str:
    """All message contents joined (for token estimates and cache keys)."""
    return "\n".join(m["content"] for m in messages)
