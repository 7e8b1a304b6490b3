"""A scripted LLM for tests: answers from a queue or a function, deterministically."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from deltamem.errors import LLMError
from deltamem.llm.base import BaseLLM, Completion, Message, estimate_tokens, prompt_text

Responder = Callable[[Sequence[Message], str, Sequence[str] | None], "str | Mapping[str, Any]"]


class ScriptedLLM(BaseLLM):
    """Returns scripted answers.

    Args:
        responses: answers returned in order (dicts are JSON-encoded).
        responder: called as ``responder(messages, purpose, choices)`` when the
            queue is empty; returns the text (or a dict to JSON-encode).

    With ``choices`` and no script, the first choice is returned. Every call is
    kept in :attr:`calls` as ``(purpose, messages, choices)``, its sampling temperature
    in :attr:`temperatures`.
    """

    name = "scripted"

    def __init__(
        self,
        responses: Iterable[str | Mapping[str, Any]] = (),
        responder: Responder | None = None,
    ) -> None:
        super().__init__()
        self._queue = list(responses)
        self._responder = responder
        self.calls: list[tuple[str, list[Message], list[str] | None]] = []
        self.temperatures: list[float] = []

    def push(self, *responses: str | Mapping[str, Any]) -> None:
        self._queue.extend(responses)

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        self.calls.append((purpose, list(messages), list(choices) if choices else None))
        self.temperatures.append(temperature)
        if self._queue:
            out: str | Mapping[str, Any] = self._queue.pop(0)
        elif self._responder is not None:
            out = self._responder(messages, purpose, choices)
        elif choices:
            out = choices[0]
        else:
            raise LLMError("ScriptedLLM has no response left for purpose " + repr(purpose))
        text = out if isinstance(out, str) else json.dumps(out)
        return Completion(
            text=text,
            prompt_tokens=estimate_tokens(prompt_text(messages)),
            completion_tokens=estimate_tokens(text),
            model="scripted",
            estimated=True,
        )
