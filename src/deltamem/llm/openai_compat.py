"""An OpenAI-compatible chat backend (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp server, ...).

Contract:

* Configuration is stored by the constructor; the ``openai`` client is built on
  the first call (so a missing key is reported when the backend is first used).
* ``base_url`` comes from the argument, else ``$OPENAI_BASE_URL``, else the
  OpenAI default. The key comes from ``$<api_key_env>``. If the key is missing
  and ``base_url`` points at this machine (``localhost``, ``127.0.0.1``, ``::1``,
  ``0.0.0.0``, ``*.localhost``), the placeholder key ``"local"`` is sent, since
  local servers (Ollama, vLLM, llama.cpp) do not check it. Otherwise a missing
  key raises :class:`~deltamem.errors.LLMUnavailableError` naming the variable.
* The ``openai`` client's own retries are disabled. We retry timeouts,
  connection errors, HTTP 429 and 5xx, and 200 replies that are not a chat
  completion (a body that is not JSON, or JSON without ``choices``: a cut proxy,
  a server bug) with exponential backoff and jitter
  (``backoff * 2**attempt`` seconds scaled by a random factor in [0.5, 1.5],
  at least the server's ``Retry-After`` when given, at most 60 s), up to
  ``max_retries`` retries after the first try. Any other 4xx fails at once.
  Failure raises :class:`~deltamem.errors.LLMError` with the status and message.
  Every failure message names the URL tried (``<base_url>/chat/completions``).
  Every retry is logged as a warning (what failed, which retry, how long the wait)
  and counted: the :class:`~deltamem.llm.base.Completion` carries the attempts and
  the seconds waited, which :class:`~deltamem.llm.base.BaseLLM` adds to ``usage``
  per purpose (a call that fails for good still counts its attempts).
* Rate limits slow calls down instead of failing them: a 429 does not use up
  ``max_retries``; it is retried (delay as above, the exponent capped at 6) until the
  call has waited ``rate_limit_patience`` seconds on 429s. A 429 also closes a gate
  shared by every thread using this client: no other thread sends until the delay has
  passed (their wait is counted in their ``retry_wait``), so ``deltamem run
  --concurrency N`` backs off as a pool.
* A connection *refused* by a server on this machine (``is_local_url``) is not retried:
  nothing listens there, and waiting will not start it. It raises
  :class:`~deltamem.errors.LLMUnavailableError` at once, naming the address (a remote
  host's refusal, a reset or a timeout is retried as above).
* ``schema`` is sent as ``response_format={"type": "json_schema", ...,
  "strict": True}`` when ``use_json_schema``. If the server answers 400 about
  ``response_format``/``json_schema``, the client switches (for this and every
  later call, with a logged warning) to ``{"type": "json_object"}`` and puts the
  schema in a system message instead; the caller must validate the output.
* ``choices`` is sent as the schema ``{"action": enum[choices]}``; the returned
  text is always one of ``choices`` (see :func:`closest_choice`).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from deltamem.errors import ConfigError, LLMError, LLMUnavailableError
from deltamem.llm.base import BaseLLM, Completion, Message, estimate_tokens, prompt_text
from deltamem.seeding import check_random_state
from deltamem.text import fold as _normalize

log = logging.getLogger(__name__)

LOCAL_PLACEHOLDER_KEY = "local"
"""Key sent to a server on this machine when no key is set (local servers ignore it)."""

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_MAX_DELAY = 60.0
_OPENAI_DEFAULT = "https://api.openai.com/v1"
_RETRY_STATUS_MIN = 500


def is_local_url(url: str | None) -> bool:
    """True when ``url`` names this machine (``localhost``, loopback, ``*.localhost``)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.endswith(".localhost") or host.startswith("127.")


def closest_choice(raw: str, choices: Sequence[str]) -> str:
    """Map a model answer onto ``choices``; the result is always one of them.

    The rule, in order (first match wins, ties go to the earliest choice):

    1. ``raw`` is a choice;
    2. ``raw`` equals a choice after stripping, collapsing whitespace and casefolding;
    3. the choice with the highest ``difflib.SequenceMatcher`` ratio to ``raw``
       (both normalised as in 2).

    >>> closest_choice('Take  Lamp', ["go north", "take lamp"])
    'take lamp'
    >>> closest_choice("go nort", ["take lamp", "go north"])
    'go north'
    """
    if not choices:
        raise ConfigError("closest_choice needs at least one choice")
    if raw in choices:
        return raw
    norm = _normalize(raw)
    for c in choices:
        if _normalize(c) == norm:
            return c
    best, best_ratio = choices[0], -1.0
    for c in choices:
        ratio = difflib.SequenceMatcher(None, norm, _normalize(c), autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = c, ratio
    return best


def choice_schema(choices: Sequence[str]) -> dict[str, Any]:
    """The JSON schema used for constrained selection: ``{"action": one of choices}``."""
    return {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": list(choices)}},
        "required": ["action"],
        "additionalProperties": False,
    }


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] if isinstance(title, str) else ""
    return name or "output"


class OpenAICompatLLM(BaseLLM):
    """Chat completions through any OpenAI-compatible HTTP server.

    Args:
        model: model name sent to the server (``gpt-4o-mini``, ``deepseek-chat``, ...).
        base_url: server URL (``http://localhost:11434/v1``); default ``$OPENAI_BASE_URL``
            or OpenAI's endpoint.
        api_key_env: environment variable holding the key.
        timeout: seconds per HTTP request.
        max_retries: retries after the first try on transient failures (>= 0).
        backoff: base delay in seconds of the exponential backoff.
        http_client: an ``httpx`` client handed to ``openai.OpenAI`` (tests use a
            mock transport; proxies and custom TLS go here too).
        use_json_schema: ask for ``json_schema`` structured output first; when
            False, use ``json_object`` mode from the start.
        rate_limit_patience: seconds one call may spend waiting on HTTP 429 replies; 429s
            are retried until then without using up ``max_retries`` (a rate limit slows
            the calls down instead of failing them).

    ``sleep`` (attribute) is the function used to wait between tries; tests replace it.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60,
        max_retries: int = 5,
        backoff: float = 1.0,
        http_client: Any = None,
        use_json_schema: bool = True,
        rate_limit_patience: float = 600.0,
    ) -> None:
        super().__init__()
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.http_client = http_client
        self.use_json_schema = use_json_schema
        self.rate_limit_patience = rate_limit_patience
        self.name = f"openai:{model}"
        self.sleep: Callable[[float], None] = time.sleep
        self._rng = check_random_state(None)
        self._json_schema_ok = use_json_schema
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._gate_lock = threading.Lock()
        self._gate_until = 0.0  # time.monotonic() before which no thread sends (429 gate)
        self._gate_owner: int | None = None  # the thread whose 429 set the gate

    # -- setup -------------------------------------------------------------------------------

    def _get_client(self) -> Any:
        with self._client_lock:
            return self._make_client()

    def _make_client(self) -> Any:
        if self._client is not None:
            return self._client
        if not self.model:
            raise ConfigError("OpenAICompatLLM needs a model name (--llm openai:MODEL on the "
                              "command line)")
        if self.max_retries < 0 or self.backoff < 0 or self.timeout <= 0:
            raise ConfigError("max_retries and backoff must be >= 0 and timeout > 0")
        try:
            import openai
        except ImportError as e:  # pragma: no cover - openai is a core dependency
            raise LLMUnavailableError("the 'openai' package is not installed") from e
        base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            if not is_local_url(base_url):
                where = base_url or "the OpenAI API"
                raise LLMUnavailableError(
                    f"no API key for {where}: set the environment variable {self.api_key_env}"
                )
            key = LOCAL_PLACEHOLDER_KEY
        kwargs: dict[str, Any] = {
            "api_key": key, "timeout": self.timeout, "max_retries": 0,
        }
        if base_url:
            kwargs["base_url"] = base_url
        if self.http_client is not None:
            kwargs["http_client"] = self.http_client
        self._client = openai.OpenAI(**kwargs)
        return self._client

    @property
    def endpoint(self) -> str:
        """The URL calls go to (``<base_url>/chat/completions``), named in every failure."""
        base = self.base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_DEFAULT
        return base.rstrip("/") + "/chat/completions"

    # -- calls -------------------------------------------------------------------------------

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        client = self._get_client()
        target = choice_schema(choices) if choices is not None else schema
        tries = _Tries()
        while True:
            use_schema = self._json_schema_ok
            request = self._build_request(messages, target, max_tokens, temperature, use_schema)
            try:
                response, text = self._send(client, request, purpose, tries)
                break
            except _ResponseFormatRejected as e:
                if not use_schema:
                    raise LLMError(
                        f"{self.name}: server rejected response_format json_object "
                        f"(purpose {purpose!r}): {e}", attempts=tries.attempts,
                        retry_wait=tries.wait,
                    ) from e
                log.warning(
                    "%s: server rejected json_schema response_format (%s); "
                    "using json_object mode from now on", self.name, e,
                )
                self._json_schema_ok = False
        return self._to_completion(response, text, messages, choices, tries)

    def _build_request(
        self,
        messages: Sequence[Message],
        target: Mapping[str, Any] | None,
        max_tokens: int,
        temperature: float,
        use_schema: bool,
    ) -> dict[str, Any]:
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        request: dict[str, Any] = {
            "model": self.model, "messages": msgs,
            "max_tokens": max_tokens, "temperature": temperature,
        }
        if target is None:
            return request
        if use_schema:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(target), "schema": dict(target),
                                "strict": True},
            }
        else:
            request["response_format"] = {"type": "json_object"}
            msgs.append({
                "role": "system",
                "content": "Reply with a single JSON object that follows this JSON schema:\n"
                + json.dumps(target, ensure_ascii=False),
            })
        return request

    def _send(
        self, client: Any, request: dict[str, Any], purpose: str, tries: _Tries
    ) -> tuple[Any, str]:
        """The response and its text, after retries of transient faults (module doc)."""
        import openai

        attempts = self.max_retries + 1
        failures = 0  # retryable failures other than 429, against max_retries
        limited = 0  # 429 replies, against rate_limit_patience
        limited_wait = 0.0
        while True:
            self._wait_at_gate(tries)
            tries.attempts += 1
            try:
                response = client.chat.completions.create(**request)
                return response, self._reply_text(response, purpose, tries)
            except openai.APIStatusError as e:
                status = e.status_code
                if status == 400 and "response_format" in request and _about_format(e):
                    raise _ResponseFormatRejected(_message(e)) from e
                retryable = status == 429 or status >= _RETRY_STATUS_MIN
                detail = f"HTTP {status}: {_message(e)}"
                retry_after = _retry_after(e)
            except openai.APIConnectionError as e:  # includes APITimeoutError
                retryable, retry_after, status = True, None, 0
                detail = f"{type(e).__name__}: {e}"
                if _refused(e) and is_local_url(self.endpoint):
                    raise LLMUnavailableError(
                        f"{self.name}: nothing is listening at {self.endpoint} (connection "
                        f"refused); start the server there or point --llm/base_url at "
                        f"another address", attempts=tries.attempts, retry_wait=tries.wait,
                    ) from e
            except (json.JSONDecodeError, openai.APIResponseValidationError, _NotACompletion) as e:
                retryable, retry_after, status = True, None, 0
                detail = f"the reply is not a chat completion ({_short(e)})"
            if not retryable:
                raise LLMError(f"{self.name} call for {purpose!r} to {self.endpoint} failed: "
                               f"{detail}", attempts=tries.attempts, retry_wait=tries.wait)
            if status == 429:
                delay = self._delay(min(limited, 6), retry_after)
                if limited_wait + delay > self.rate_limit_patience:
                    raise LLMError(
                        f"{self.name} call for {purpose!r} to {self.endpoint} still rate "
                        f"limited after {limited + 1} tries and {limited_wait:.0f} s of waiting "
                        f"(rate_limit_patience {self.rate_limit_patience:g} s): {detail}",
                        attempts=tries.attempts, retry_wait=tries.wait,
                    )
                limited += 1
                limited_wait += delay
                self._close_gate(delay)
                note = f"rate limited ({limited})"
            else:
                if failures == attempts - 1:
                    raise LLMError(
                        f"{self.name} call for {purpose!r} to {self.endpoint} failed after "
                        f"{attempts} tries: {detail}",
                        attempts=tries.attempts, retry_wait=tries.wait,
                    )
                delay = self._delay(failures, retry_after)
                failures += 1
                note = f"{failures}/{self.max_retries}"
            tries.wait += delay
            log.warning("%s (%s) at %s: %s; retry %s in %.1f s", self.name, purpose,
                        self.endpoint, detail, note, delay)
            self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _reply_text(self, response: Any, purpose: str, tries: _Tries) -> str:
        """The reply's message text; :class:`_NotACompletion` when it is not a completion."""
        if isinstance(response, (str, bytes)):  # a body the client could not parse as JSON
            raise _NotACompletion(f"body {str(response)[:60]!r}")
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError, KeyError) as e:
            raise _NotACompletion(f"no choices[0].message: {_short(e)}") from e
        if text is None:
            raise LLMError(f"{self.name}: empty response (refusal?) for {purpose!r}",
                           attempts=tries.attempts, retry_wait=tries.wait)
        if not isinstance(text, str):
            raise _NotACompletion(f"message content is {type(text).__name__}")
        return text

    def _close_gate(self, delay: float) -> None:
        """After a 429: no thread of this client sends for ``delay`` seconds (the gate)."""
        with self._gate_lock:
            until = time.monotonic() + delay
            if until > self._gate_until:
                self._gate_until = until
                self._gate_owner = threading.get_ident()

    def _wait_at_gate(self, tries: _Tries) -> None:
        """Hold this request while another thread's 429 has closed the gate; the wait is
        counted with the call's ``retry_wait``."""
        with self._gate_lock:
            wait = self._gate_until - time.monotonic()
            mine = self._gate_owner == threading.get_ident()
        if wait > 0 and not mine:  # the thread that closed it sleeps through it anyway
            tries.wait += wait
            self.sleep(wait)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay = self.backoff * (2**attempt) * self._rng.uniform(0.5, 1.5)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, _MAX_DELAY)

    def _to_completion(
        self, response: Any, text: str, messages: Sequence[Message],
        choices: Sequence[str] | None, tries: _Tries,
    ) -> Completion:
        if choices is not None:
            text = self._pick(text, choices)
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        estimated = not isinstance(prompt, int) or not isinstance(completion, int)
        if estimated:
            prompt = estimate_tokens(prompt_text(messages))
            completion = estimate_tokens(text)
        model = getattr(response, "model", None)
        return Completion(
            text=text, prompt_tokens=int(prompt), completion_tokens=int(completion),
            model=model if isinstance(model, str) and model else self.model,
            estimated=estimated, attempts=tries.attempts, retry_wait=tries.wait,
        )

    def _pick(self, raw: str, choices: Sequence[str]) -> str:
        candidate = raw
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("action"), str):
            candidate = data["action"]
        elif isinstance(data, str):
            candidate = data
        chosen = closest_choice(candidate, choices)
        if chosen != candidate:
            log.warning("%s: answer %r is not a choice; using closest %r", self.name,
                        candidate[:80], chosen)
        return chosen


class _ResponseFormatRejected(Exception):
    """Internal: the server does not support the requested response_format."""


class _NotACompletion(Exception):
    """Internal: a 200 reply that is not a chat completion (retried like a transient fault)."""


class _Tries:
    """Internal: requests sent and seconds waited for one call (format fallback included)."""

    def __init__(self) -> None:
        self.attempts = 0
        self.wait = 0.0


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 120 else text[:117] + "..."


def _message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
    return str(getattr(e, "message", e))


def _about_format(e: Any) -> bool:
    text = (_message(e) + " " + json.dumps(getattr(e, "body", None), default=str)).lower()
    return "response_format" in text or "json_schema" in text


def _refused(e: BaseException) -> bool:
    """True when ``e`` (or an exception it wraps) is a refused TCP connection."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return True
        text = str(cur).lower()
        if "connection refused" in text or "errno 111" in text:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _retry_after(e: Any) -> float | None:
    response = getattr(e, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
