"""An OpenAI-compatible chat server that injects faults, for tests and for trying a setup.

:class:`FaultServer` answers ``POST …/chat/completions`` on 127.0.0.1 (a thread of this
process, standard library only). Request *n* (0-based, in arrival order) gets the fault
``plan(n)`` (a function, or a sequence: request n gets ``plan[n]``, later ones ``"ok"``):

============  ===========================================================================
``ok``        a valid chat completion (below)
``timeout``   no answer for ``stall`` seconds, then the connection closes (the client,
              whose timeout is shorter, gives up first)
``429``       HTTP 429 with ``Retry-After: <retry_after>``
``500``       HTTP 500 with an OpenAI-style error body
``close``     the connection closes without any reply
``nonjson``   HTTP 200 whose body is not JSON (a cut proxy, a server bug)
``offschema`` HTTP 200, a valid completion whose text ignores the requested schema
============  ===========================================================================

The first five are transport faults a client must retry; ``offschema`` reaches the caller
(an extractor validates and repairs, an action picker maps to the closest choice).

A valid completion's text: when the request asks for a JSON schema (``response_format``
``json_schema``) the simplest instance of it (first enum value, first alternative,
required properties only, strings ``"ok"``), otherwise ``"ok"``; ``answer(request)``
replaces that; :func:`hashed_answer` is a scripted policy for whole runs (a choice among
the request's ``action`` enum picked by a hash of its messages: deterministic, varied, and
independent of the order requests arrive in). Token counts are 10 prompt + 5 completion per
reply, or with ``token_counts="words"`` the whitespace words of the request's messages and
of the answer (so a run's cost table has figures that scale with its prompts). ``delay``
seconds pass before each answer (a model's latency), so a run through the
server takes the time an API model would.

``log`` records every request: its index, the fault served and the request body, so a test
can check that a client's counts (attempts, retries) match what the server saw.

    >>> from deltamem.llm.openai_compat import OpenAICompatLLM
    >>> with FaultServer(["500", "ok"]) as server:
    ...     llm = OpenAICompatLLM("m", base_url=server.url, backoff=0.01)
    ...     llm.complete([{"role": "user", "content": "hi"}], purpose="act").text
    'ok'
    >>> [entry.fault for entry in server.log], llm.usage.by_purpose["act"].retries
    (['500', 'ok'], 1)
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULTS", "RETRIED", "FaultServer", "LogEntry", "hashed_answer", "instance_of"]

FAULTS = ("ok", "timeout", "429", "500", "close", "nonjson", "offschema")
"""Every fault the server can serve."""
RETRIED = frozenset({"timeout", "429", "500", "close", "nonjson"})
"""Faults a client retries (the others are answers)."""

Plan = Callable[[int], str] | Sequence[str]


@dataclass
class LogEntry:
    """One request the server received."""

    index: int
    fault: str
    request: dict[str, Any] = field(repr=False)


def instance_of(schema: Any) -> Any:
    """The simplest value that follows a JSON schema (the subset the prompts use)."""
    if not isinstance(schema, dict):
        return "ok"
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("oneOf", "anyOf", "allOf"):
        if schema.get(key):
            return instance_of(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else "string")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: instance_of(props.get(k, {})) for k in schema.get("required", list(props))}
    if kind == "array":
        n = int(schema.get("minItems", 0))
        return [instance_of(schema.get("items", {})) for _ in range(n)]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "ok" + "k" * max(0, int(schema.get("minLength", 0)) - 2)


class FaultServer:
    """A local OpenAI-compatible server serving faults by plan (module doc).

    Args:
        plan: the fault of each request (function of its index, or a sequence).
        answer: text of a valid completion for a request body (default: module doc).
        retry_after: the ``Retry-After`` seconds of a 429.
        stall: how long a ``timeout`` fault keeps the client waiting.
        delay: seconds every answer (``ok``, ``offschema``) takes, like a model's latency.
        token_counts: ``"fixed"`` (10 prompt + 5 completion tokens) or ``"words"``.
    """

    def __init__(
        self,
        plan: Plan = (),
        *,
        answer: Callable[[dict[str, Any]], str] | None = None,
        retry_after: float = 0.0,
        stall: float = 2.0,
        delay: float = 0.0,
        token_counts: str = "fixed",
    ) -> None:
        if token_counts not in ("fixed", "words"):
            raise ValueError(f"token_counts must be fixed or words, not {token_counts!r}")
        self.token_counts = token_counts
        for f in (plan if not callable(plan) else ()):
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; use one of {FAULTS}")
        self.plan = plan
        self.answer = answer or default_answer
        self.retry_after = retry_after
        self.stall = stall
        self.delay = delay
        self.log: list[LogEntry] = []
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The ``base_url`` for an OpenAI client (``http://127.0.0.1:PORT/v1``)."""
        if self._http is None:
            raise RuntimeError("the fault server is not running")
        return f"http://127.0.0.1:{self._http.server_port}/v1"

    def start(self) -> FaultServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                server._handle(self)

        self._http = _Server(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True,
                                        name="fault-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- counts --------------------------------------------------------------------------------
    def count(self, *faults: str) -> int:
        """Requests that got one of ``faults`` (all requests when none is named)."""
        with self._lock:
            return sum(1 for e in self.log if not faults or e.fault in faults)

    # -- serving -------------------------------------------------------------------------------
    def _fault(self, index: int) -> str:
        if callable(self.plan):
            fault = self.plan(index)
        else:
            fault = self.plan[index] if index < len(self.plan) else "ok"
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        return fault

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        with self._lock:
            index = len(self.log)
            fault = self._fault(index)
            self.log.append(LogEntry(index, fault, body))
        if fault == "close":
            h.close_connection = True
            return
        if fault == "timeout":
            time.sleep(self.stall)
            h.close_connection = True
            return
        headers: dict[str, str] = {}
        if fault == "429":
            status, payload = 429, _error("rate limited")
            headers["Retry-After"] = f"{self.retry_after:g}"
        elif fault == "500":
            status, payload = 500, _error("internal error")
        elif fault == "nonjson":
            status, payload = 200, b"<html><body>502 Bad Gateway (cut)</body></html>"
        else:
            if self.delay > 0:
                time.sleep(self.delay)
            text = ('{"unexpected": "this reply ignores the schema"}' if fault == "offschema"
                    else self.answer(body))
            counts = (10, 5) if self.token_counts == "fixed" else (
                sum(len(str(m.get("content", "")).split()) for m in body.get("messages", [])
                    if isinstance(m, dict)), len(text.split()))
            status, payload = 200, _completion(text, str(body.get("model", "fault")), *counts)
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            for k, v in headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)
        except OSError:  # the client went away
            h.close_connection = True


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many concurrent clients (deltamem run --concurrency)


def hashed_answer(request: dict[str, Any]) -> str:
    """A scripted policy: for a request whose schema has an ``action`` enum (constrained
    action choice), the enum value at ``sha256(messages) % len``; otherwise
    :func:`default_answer`. The same request always gets the same answer."""
    fmt = request.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema", {}) if isinstance(fmt, dict) else {}
    options = ((schema.get("properties") or {}).get("action") or {}).get("enum")
    if not options:
        return default_answer(request)
    digest = hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode())
    return json.dumps({"action": options[int(digest.hexdigest(), 16) % len(options)]})


def default_answer(request: dict[str, Any]) -> str:
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return json.dumps(instance_of(fmt.get("json_schema", {}).get("schema", {})))
    if fmt.get("type") == "json_object":
        return "{}"
    return "ok"


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "server_error"}}).encode()


def _completion(text: str, model: str, prompt: int = 10, completion: int = 5) -> bytes:
    return json.dumps({
        "id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }).encode()
