"""OpenTelemetry spans for recall, learn, prune, import and every LLM call (opt-in).

Install the extra (``pip install 'deltamem[otel]'``: the OpenTelemetry API and SDK) and
configure a tracer provider the usual way (``opentelemetry.trace.set_tracer_provider``, or
``opentelemetry-instrument`` with ``OTEL_*`` variables); deltamem then reports, under the
instrumentation scope ``deltamem``:

* each LLM call as a ``CLIENT`` span ``chat {model}`` following the GenAI semantic
  conventions: ``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name``
  (``openai`` for an OpenAI-compatible server, ``deltamem.local`` for the bundled model,
  ...), ``gen_ai.request.model``, ``gen_ai.request.max_tokens``,
  ``gen_ai.request.temperature``, ``gen_ai.response.model``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``, ``server.address`` /
  ``server.port`` when there is a server, ``error.type`` on failure, and deltamem's own
  ``deltamem.purpose`` (act, extract, judge, ...), ``deltamem.attempts``,
  ``deltamem.retry_wait_s``, ``deltamem.tokens_estimated``;
* each memory operation as a span ``{gen_ai.operation.name} {store}`` following the GenAI
  memory conventions: ``search_memory`` (recall, of every memory system: the memory
  contract wraps each system's ``recall``, :func:`recall_span`), ``update_memory`` (learn),
  ``delete_memory`` (prune), ``create_memory`` (import), with ``gen_ai.provider.name``
  (the memory system), ``gen_ai.memory.store.id`` (the bank), ``gen_ai.memory.record.id``
  (the matched node of the Task-Tree, for a recall), ``gen_ai.memory.record.count``
  (nodes recalled, changed, removed or imported), and ``deltamem.tenant`` when a service
  tenant made the call, ``deltamem.match.<tree>.score`` / ``.accepted`` / ``.tau`` for a
  recall, ``deltamem.changes.<kind>`` counts for a learn;
* each benchmark episode as a span ``episode {task}`` (phase, index, outcome) holding the
  recall, the agent's calls and the learn.

No content leaves the process unless asked: prompts and replies
(``gen_ai.input.messages`` / ``gen_ai.output.messages``), the recall query
(``gen_ai.memory.query.text``) and the recalled text (``gen_ai.memory.records``) are only
recorded when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` (the
GenAI instrumentations' switch). ``DELTAMEM_OTEL=off`` turns every span off.

Without the OpenTelemetry API installed everything here is a no-op (one attribute test per
call); with the API but no tracer provider configured (no SDK set up) no span is opened
either (:func:`enabled`), rather than OpenTelemetry's no-op spans.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "CAPTURE_ENV",
    "DISABLE_ENV",
    "SCOPE",
    "capture_content",
    "enabled",
    "llm_done",
    "llm_span",
    "memory_span",
    "recall_done",
    "recall_span",
    "set_attributes",
    "span",
    "store_id",
    "tenant",
    "use_tracer_provider",
]

SCOPE = "deltamem"
"""The instrumentation scope (tracer name) of every span."""
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to record prompts, replies, queries and recalled text."""
DISABLE_ENV = "DELTAMEM_OTEL"
"""Set to ``off`` (or ``0``, ``false``) to emit no span at all."""

try:  # the API alone is enough to emit; the SDK (the ``otel`` extra) exports
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind as _SpanKind
    from opentelemetry.trace import Status as _Status
    from opentelemetry.trace import StatusCode as _StatusCode
    _NO_PROVIDERS: tuple[type, ...] = (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider)
except ImportError:  # pragma: no cover - exercised when the extra is absent
    _trace = None  # type: ignore[assignment]
    _NO_PROVIDERS = ()


class _NoSpan:
    """What :func:`span` yields when tracing is off: takes attributes, records nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def is_recording(self) -> bool:
        return False


_NO_SPAN = _NoSpan()
_TENANT: ContextVar[str | None] = ContextVar("deltamem_tenant", default=None)


@contextmanager
def tenant(name: str) -> Iterator[None]:
    """Memory spans opened in the block carry ``deltamem.tenant`` = ``name`` (the service
    sets it around each tenant's bank operations)."""
    token = _TENANT.set(name)
    try:
        yield
    finally:
        _TENANT.reset(token)
_provider_override: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Emit through ``provider`` instead of the global one (``None``: the global one
    again); for tests and for a service that keeps its own provider."""
    global _provider_override
    _provider_override = provider


def enabled() -> bool:
    """Whether spans are emitted: the API is installed, ``DELTAMEM_OTEL`` is not off, and a
    tracer provider is configured (:func:`use_tracer_provider`, or a global one set in code or
    by ``OTEL_PYTHON_TRACER_PROVIDER``). Without a provider OpenTelemetry's spans are no-op
    spans, which record nothing yet cost ~15–50 µs each (context attach and detach): a
    recall at 1k nodes paid more for its two than for its scan (``docs/performance.md``)."""
    if _trace is None:
        return False
    if _provider_override is None and not _global_provider():
        return False
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("off", "0", "false", "no")


_MISSING = object()
_env_provider_read = False


def _global_provider() -> bool:
    """Whether OpenTelemetry has a global tracer provider (not its proxy or no-op one).

    ``get_tracer_provider()`` looks ``OTEL_PYTHON_TRACER_PROVIDER`` up in ``os.environ`` at
    every call while no provider is set, and a key missing from ``os.environ`` costs
    ~2–4 µs (it raises inside), as much as a tenth of a recall at 1k nodes: so the variable
    is read once (the first call sets the provider it names) and the module's global after.
    """
    global _env_provider_read
    assert _trace is not None
    provider = getattr(_trace, "_TRACER_PROVIDER", _MISSING)
    if provider is _MISSING or (provider is None and not _env_provider_read):
        _env_provider_read = True  # (another OpenTelemetry layout: always the public call)
        provider = _trace.get_tracer_provider()
    return provider is not None and not isinstance(provider, _NO_PROVIDERS)


def capture_content() -> bool:
    """Whether content (prompts, replies, queries, recalled text) may be recorded."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("true", "1", "yes")


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: ``None`` dropped, other types as strings."""
    out: dict[str, Any] = {}
    for k, v in attributes.items():
        if v is None:
            continue
        if isinstance(v, (bool, int, float, str)):
            out[k] = v
        elif isinstance(v, Sequence) and all(isinstance(x, str) for x in v):
            out[k] = list(v)
        else:
            out[k] = str(v)
    return out


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *,
         client: bool = False) -> Iterator[Any]:
    """A span named ``name`` around the block (a ``CLIENT`` span with ``client``): an
    exception leaving the block sets ``error.type`` and an error status, then propagates."""
    if not enabled():
        yield _NO_SPAN
        return
    assert _trace is not None
    tracer = (_provider_override.get_tracer(SCOPE) if _provider_override is not None
              else _trace.get_tracer(SCOPE))
    kind = _SpanKind.CLIENT if client else _SpanKind.INTERNAL
    with tracer.start_as_current_span(name, kind=kind, attributes=_clean(attributes or {}),
                                      record_exception=False,
                                      set_status_on_exception=False) as s:
        try:
            yield s
        except BaseException as e:
            s.set_attribute("error.type", type(e).__qualname__)
            s.set_status(_Status(_StatusCode.ERROR, str(e)[:200]))
            raise


def set_attributes(s: Any, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` on ``s`` (``None`` values dropped)."""
    if s.is_recording():
        s.set_attributes(_clean(attributes))


# -- LLM calls -------------------------------------------------------------------------------

def _provider(llm: Any) -> str:
    name = str(getattr(llm, "name", "llm"))
    kind = name.partition(":")[0].partition("(")[0]
    return {"openai": "openai", "replay": "deltamem.replay", "local": "deltamem.local",
            "scripted": "deltamem.scripted"}.get(kind, f"deltamem.{kind or 'llm'}")


def _messages(messages: Sequence[Mapping[str, str]]) -> str:
    return json.dumps([{"role": m.get("role"), "parts": [{"type": "text",
                                                          "content": m.get("content")}]}
                       for m in messages], ensure_ascii=False)


@contextmanager
def llm_span(llm: Any, messages: Sequence[Mapping[str, str]], *, purpose: str,
             max_tokens: int, temperature: float) -> Iterator[Any]:
    """The span of one LLM call (module doc); :func:`llm_done` fills in the answer."""
    if not enabled():
        yield _NO_SPAN
        return
    inner = getattr(llm, "inner", None)  # a record/replay cache: the model it wraps
    model = str(getattr(llm, "model", "") or getattr(inner, "model", "")
                or getattr(llm, "name", "llm"))
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": _provider(llm),
        "gen_ai.request.model": model, "gen_ai.request.max_tokens": max_tokens,
        "gen_ai.request.temperature": float(temperature), "deltamem.purpose": purpose,
    }
    base = getattr(llm, "endpoint", None)
    if isinstance(base, str):
        parts = urlsplit(base)
        attrs["server.address"] = parts.hostname
        attrs["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    if capture_content():
        attrs["gen_ai.input.messages"] = _messages(messages)
    with span(f"chat {model}", attrs, client=True) as s:
        yield s


def llm_done(s: Any, completion: Any) -> None:
    """Record a completed call's answer on its span."""
    if not s.is_recording():
        return
    attrs = {
        "gen_ai.response.model": completion.model or None,
        "gen_ai.usage.input_tokens": int(completion.prompt_tokens),
        "gen_ai.usage.output_tokens": int(completion.completion_tokens),
        "deltamem.attempts": int(completion.attempts),
        "deltamem.retry_wait_s": float(completion.retry_wait),
        "deltamem.tokens_estimated": bool(completion.estimated),
    }
    if capture_content():
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": completion.text}]}],
            ensure_ascii=False)
    set_attributes(s, attrs)


# -- memory operations -----------------------------------------------------------------------

@contextmanager
def memory_span(operation: str, *, system: str, store: str, tenant: str | None = None,
                attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """The span of one memory operation (``search_memory``, ``update_memory``,
    ``delete_memory``, ``create_memory``) on the bank ``store``."""
    if not enabled():
        yield _NO_SPAN
        return
    attrs = {"gen_ai.operation.name": operation, "gen_ai.provider.name": system,
             "gen_ai.memory.store.id": store,
             "deltamem.tenant": tenant if tenant is not None else _TENANT.get(),
             **(attributes or {})}
    with span(f"{operation} {store}", attrs) as s:
        yield s


def store_id(store: Any) -> str:
    """A bank's name in spans: its file name (no folders), or the store's path; a database
    URL keeps its scheme and last path part (no credentials)."""
    return _bank_name(str(getattr(store, "path", "") or ""))


@functools.lru_cache(maxsize=256)
def _bank_name(path: str) -> str:
    """:func:`store_id` of a path (kept: a recall names its bank in its span every time)."""
    if "://" in path:  # a database URL: no credentials in telemetry
        return path.split("://", 1)[0] + "://" + path.rsplit("/", 1)[-1]
    return Path(path).name or path or "memory"


_IN_RECALL: ContextVar[int | None] = ContextVar("deltamem_in_recall", default=None)


@contextmanager
def recall_span(memory: Any, query: str) -> Iterator[Any]:
    """The ``search_memory`` span of one recall of ``memory`` (any memory system; the
    memory contract opens it around every ``recall``). A recall of the same memory inside it
    (a subclass calling ``super().recall``) opens none; the caller sets the outcome with
    :func:`recall_done`."""
    if not enabled() or _IN_RECALL.get() == id(memory):
        yield _NO_SPAN
        return
    store = getattr(memory, "store", None)
    token = _IN_RECALL.set(id(memory))
    try:
        with memory_span("search_memory", system=str(getattr(memory, "name", "memory")),
                         store=store_id(store) if store is not None
                         else str(getattr(memory, "name", "memory"))) as s:
            if capture_content():
                set_attributes(s, {"gen_ai.memory.query.text": query})
            yield s
    finally:
        _IN_RECALL.reset(token)


def recall_done(s: Any, recall: Any) -> None:
    """A recall's outcome on its span: records shown, each tree's match (score, accepted,
    τ), the Task-Tree's matched record, and the recalled text when content is captured."""
    if not s.is_recording():
        return
    attrs: dict[str, Any] = {"gen_ai.memory.record.count": len(recall.items)}
    for tree, m in recall.matches.items():
        attrs[f"deltamem.match.{tree}.score"] = m.score
        attrs[f"deltamem.match.{tree}.accepted"] = m.accepted
        attrs[f"deltamem.match.{tree}.tau"] = m.tau
    task_match = recall.matches.get("task")
    if task_match is not None and task_match.accepted:
        attrs["gen_ai.memory.record.id"] = task_match.node_id
    if capture_content():
        attrs["gen_ai.memory.records"] = recall.text
    set_attributes(s, attrs)
