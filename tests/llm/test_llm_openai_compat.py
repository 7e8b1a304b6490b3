"""OpenAICompatLLM against a mock HTTP transport (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltamem.errors import LLMError, LLMUnavailableError
from deltamem.llm.openai_compat import OpenAICompatLLM, closest_choice, is_local_url

try:  # openai >= 3 is built on httpx2; older releases on httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]

MSGS = [{"role": "user", "content": "hello there"}]


def ok_body(content: str, prompt: int = 7, completion: int = 3) -> dict[str, Any]:
    return {
        "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "m-served",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }


class Server:
    """Answers requests from a list of (status, body) and records what was sent."""

    def __init__(self, replies: list[tuple[int, Any]] | Callable[[dict], tuple[int, Any]]):
        self.replies = replies
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.requests.append(body)
        if callable(self.replies):
            status, payload = self.replies(body)
        else:
            status, payload = self.replies.pop(0)
        if isinstance(payload, Exception):
            raise payload
        return httpx.Response(status, json=payload)


def make(server: Server, **kw: Any) -> tuple[OpenAICompatLLM, list[float]]:
    llm = OpenAICompatLLM("m", base_url="https://api.example.test/v1",
                          http_client=httpx.Client(transport=httpx.MockTransport(server)), **kw)
    delays: list[float] = []
    llm.sleep = delays.append
    return llm, delays


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_success_returns_text_and_counts_usage() -> None:
    server = Server([(200, ok_body("hi!", 11, 2))])
    llm, delays = make(server)
    out = llm.complete(MSGS, purpose="act", max_tokens=33, temperature=0.2)
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("hi!", 11, 2)
    assert out.model == "m-served" and not out.estimated
    assert llm.usage.by_purpose["act"].calls == 1
    assert llm.usage.by_purpose["act"].total_tokens == 13
    sent = server.requests[0]
    assert sent["model"] == "m" and sent["max_tokens"] == 33 and sent["temperature"] == 0.2
    assert sent["messages"] == MSGS and "response_format" not in sent
    assert delays == []


def test_429_then_success_retries_with_backoff() -> None:
    err = {"error": {"message": "slow down", "type": "rate_limit"}}
    server = Server([(429, err), (429, err), (200, ok_body("done"))])
    llm, delays = make(server, backoff=1.0)
    out = llm.complete(MSGS, purpose="act")
    assert out.text == "done"
    assert len(server.requests) == 3
    assert len(delays) == 2
    assert 0.5 <= delays[0] <= 1.5 and 1.0 <= delays[1] <= 3.0  # jittered exponential


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
def test_connection_error_and_timeout_are_retried(exc: Exception) -> None:
    server = Server([(0, exc), (200, ok_body("ok"))])
    llm, delays = make(server)
    assert llm.complete(MSGS, purpose="act").text == "ok"
    assert len(server.requests) == 2 and len(delays) == 1


def test_retry_after_header_is_honoured() -> None:
    def handler(request: Any) -> Any:
        if not delays:
            return httpx.Response(429, headers={"retry-after": "7"}, json={"error": {}})
        return httpx.Response(200, json=ok_body("ok"))

    llm = OpenAICompatLLM("m", base_url="https://api.example.test/v1", backoff=0.1,
                          http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    delays: list[float] = []
    llm.sleep = delays.append
    assert llm.complete(MSGS, purpose="act").text == "ok"
    assert delays == [7.0]


def test_500_exhausted_raises_llm_error_with_status() -> None:
    server = Server(lambda body: (500, {"error": {"message": "kaboom"}}))
    llm, delays = make(server, max_retries=3)
    with pytest.raises(LLMError, match=r"500.*kaboom"):
        llm.complete(MSGS, purpose="extract")
    assert len(server.requests) == 4 and len(delays) == 3
    assert llm.usage.calls == 0


def test_400_is_not_retried() -> None:
    server = Server(lambda body: (400, {"error": {"message": "bad model name"}}))
    llm, delays = make(server)
    with pytest.raises(LLMError, match=r"400.*bad model name") as info:
        llm.complete(MSGS, purpose="act")
    assert not isinstance(info.value, LLMUnavailableError)
    assert len(server.requests) == 1 and delays == []


def test_schema_request_body_shape() -> None:
    schema = {"title": "Step note", "type": "object",
              "properties": {"note": {"type": "string"}}, "required": ["note"],
              "additionalProperties": False}
    server = Server([(200, ok_body('{"note": "x"}'))])
    llm, _ = make(server)
    out = llm.complete(MSGS, purpose="extract", schema=schema)
    assert json.loads(out.text) == {"note": "x"}
    rf = server.requests[0]["response_format"]
    assert rf == {"type": "json_schema",
                  "json_schema": {"name": "Step_note", "schema": schema, "strict": True}}


def test_response_format_400_falls_back_to_json_object_and_remembers() -> None:
    def reply(body: dict) -> tuple[int, Any]:
        if body.get("response_format", {}).get("type") == "json_schema":
            return 400, {"error": {"message": "response_format json_schema is not supported"}}
        return 200, ok_body('{"a": 1}')

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    server = Server(reply)
    llm, delays = make(server)
    assert llm.complete(MSGS, purpose="extract", schema=schema).text == '{"a": 1}'
    assert llm.complete(MSGS, purpose="extract", schema=schema).text == '{"a": 1}'
    kinds = [r["response_format"]["type"] for r in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert "JSON schema" in server.requests[1]["messages"][-1]["content"]
    assert delays == []


def test_json_object_rejected_too_raises() -> None:
    server = Server(lambda body: (400, {"error": {"message": "response_format unsupported"}}))
    llm, _ = make(server, use_json_schema=False)
    with pytest.raises(LLMError, match="json_object"):
        llm.complete(MSGS, purpose="extract", schema={"type": "object"})
    assert len(server.requests) == 1


def test_choices_sends_enum_schema_and_returns_choice() -> None:
    choices = ["go north", "take lamp", 'say "hi"']
    server = Server([(200, ok_body(json.dumps({"action": 'say "hi"'})))])
    llm, _ = make(server)
    out = llm.complete(MSGS, purpose="act", choices=choices)
    assert out.text == 'say "hi"'
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["action"]["enum"] == choices
    assert schema["required"] == ["action"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [('{"action": "Take Lamp "}', "take lamp"),  # normalised match
     ('{"action": "take lamps"}', "take lamp"),  # closest by similarity
     ("go nort", "go north"),  # not JSON at all
     ('{"other": 1}', "go north")],  # no action: closest to the raw text
)
def test_choices_off_list_answer_is_mapped_to_a_choice(answer: str, expected: str) -> None:
    server = Server([(200, ok_body(answer))])
    llm, _ = make(server)
    assert llm.complete(MSGS, purpose="act", choices=["go north", "take lamp"]).text == expected


@given(st.text(max_size=20), st.lists(st.text(max_size=10), min_size=1, max_size=6))
def test_closest_choice_always_returns_a_choice(raw: str, choices: list[str]) -> None:
    assert closest_choice(raw, choices) in choices


def test_closest_choice_ties_go_to_first() -> None:
    assert closest_choice("xyz", ["ab", "cd"]) == "ab"


def test_missing_key_names_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    llm = OpenAICompatLLM("m", api_key_env="MY_KEY", base_url="https://api.example.test/v1")
    with pytest.raises(LLMUnavailableError, match="MY_KEY"):
        llm.complete(MSGS, purpose="act")


def test_missing_key_allowed_for_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    seen: list[str] = []

    def handler(request: Any) -> Any:
        seen.append(request.headers.get("authorization", ""))
        seen.append(str(request.url))
        return httpx.Response(200, json=ok_body("local ok"))

    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    llm = OpenAICompatLLM("llama", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert llm.complete(MSGS, purpose="act").text == "local ok"
    assert seen[0] == "Bearer local"
    assert seen[1].startswith("http://localhost:11434/v1/")


def test_missing_usage_is_estimated() -> None:
    body = ok_body("one two three")
    del body["usage"]
    llm, _ = make(Server([(200, body)]))
    out = llm.complete(MSGS, purpose="act")
    assert out.estimated and out.prompt_tokens == 2 and out.completion_tokens == 3


@pytest.mark.parametrize(
    ("url", "local"),
    [("http://localhost:8000/v1", True), ("http://127.0.0.1:11434", True),
     ("http://[::1]:8000", True), ("https://api.deepseek.com", False), (None, False)],
)
def test_is_local_url(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


class RawServer(Server):
    """Like :class:`Server`, but a reply may be raw bytes (sent as the body as they are)."""

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.requests.append(body)
        status, payload = self.replies.pop(0)  # type: ignore[union-attr]
        if isinstance(payload, bytes):
            return httpx.Response(status, content=payload,
                                  headers={"content-type": "application/json"})
        return httpx.Response(status, json=payload)


@pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b'{"choices": [', b"",
                                  b'{"id": "x", "object": "chat.completion"}', b'"just text"'])
def test_a_200_that_is_not_a_completion_is_retried(body: bytes) -> None:
    server = RawServer([(200, body), (200, ok_body("fine"))])
    llm, delays = make(server, backoff=0.5)
    out = llm.complete(MSGS, purpose="act")
    assert out.text == "fine" and len(server.requests) == 2 and len(delays) == 1
    c = llm.usage.by_purpose["act"]
    assert (c.calls, c.attempts, c.retries) == (1, 2, 1)
    assert c.retry_wait == pytest.approx(delays[0])


def test_a_200_that_is_never_a_completion_fails_as_llm_error() -> None:
    server = RawServer([(200, b"<html>") for _ in range(3)])
    llm, _ = make(server, max_retries=2)
    with pytest.raises(LLMError, match="after 3 tries: the reply is not a chat completion"):
        llm.complete(MSGS, purpose="act")
    c = llm.usage.by_purpose["act"]
    assert (c.calls, c.attempts, c.retries) == (0, 3, 2)


def test_attempts_retries_and_wait_are_counted_per_purpose_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = RawServer([(500, {"error": {"message": "x"}}), (429, {"error": "slow"}),
                        (200, ok_body("a")), (200, ok_body("b")),
                        (200, b"not json"), (200, ok_body("c"))])
    llm, delays = make(server, backoff=1.0)
    with caplog.at_level("WARNING", logger="deltamem.llm.openai_compat"):
        llm.complete(MSGS, purpose="act")
        llm.complete(MSGS, purpose="extract")
        llm.complete(MSGS, purpose="extract")
    act, ext = llm.usage.by_purpose["act"], llm.usage.by_purpose["extract"]
    assert (act.calls, act.attempts, act.retries) == (1, 3, 2)
    assert (ext.calls, ext.attempts, ext.retries) == (2, 3, 1)
    assert act.retry_wait + ext.retry_wait == pytest.approx(sum(delays))
    assert llm.usage.calls + llm.usage.retries == len(server.requests) == 6
    retries = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 3 and all(r.levelname == "WARNING" for r in retries)
    assert "retry 1/5" in retries[0].getMessage() and "(act)" in retries[0].getMessage()
    d = llm.usage.to_dict()
    assert d["extract"]["retries"] == 1 and d["act"]["attempts"] == 3


def test_a_wrapping_cache_counts_the_inner_retries(tmp_path: Any) -> None:
    from deltamem.llm.replay import RecordReplayLLM

    server = RawServer([(503, {"error": "busy"}), (200, ok_body("x"))])
    inner, _ = make(server)
    llm = RecordReplayLLM(inner, tmp_path / "cache.jsonl", mode="auto")
    llm.complete(MSGS, purpose="act")
    assert llm.usage.by_purpose["act"].retries == 1 == inner.usage.by_purpose["act"].retries


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, read, closed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_refused_local_address_fails_at_once_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    port = _closed_port()
    llm = OpenAICompatLLM("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=5)
    delays: list[float] = []
    llm.sleep = delays.append
    with pytest.raises(LLMUnavailableError, match=rf"127\.0\.0\.1:{port}/v1/chat/completions"):
        llm.complete(MSGS, purpose="act")
    assert delays == []  # no retry
    assert llm.usage.by_purpose["act"].attempts == 1


def test_exhausted_retries_name_the_url() -> None:
    server = Server(lambda body: (503, {"error": {"message": "busy"}}))
    llm, _ = make(server, max_retries=1)
    with pytest.raises(LLMError, match=r"https://api\.example\.test/v1/chat/completions"):
        llm.complete(MSGS, purpose="act")


def test_remote_refusal_is_still_retried() -> None:
    exc = httpx.ConnectError("[Errno 111] Connection refused")
    exc.__cause__ = ConnectionRefusedError(111, "Connection refused")
    server = Server([(0, exc), (200, ok_body("ok"))])
    llm, delays = make(server)  # https://api.example.test: not this machine
    assert llm.complete(MSGS, purpose="act").text == "ok"
    assert len(delays) == 1


def test_429s_do_not_use_up_the_retries_until_patience_runs_out() -> None:
    err = {"error": {"message": "slow down"}}
    server = Server([(429, err)] * 8 + [(200, ok_body("done"))])
    llm, delays = make(server, max_retries=2, backoff=0.01)
    assert llm.complete(MSGS, purpose="act").text == "done"  # 8 429s > max_retries
    assert len(delays) == 8
    c = llm.usage.by_purpose["act"]
    assert (c.calls, c.attempts, c.retries) == (1, 9, 8)

    server = Server(lambda body: (429, err))
    llm, delays = make(server, backoff=1.0, rate_limit_patience=5.0)
    with pytest.raises(LLMError, match="still rate limited"):
        llm.complete(MSGS, purpose="act")
    assert sum(delays) <= 5.0


def test_a_429_holds_back_the_other_threads() -> None:
    import threading
    import time

    first = threading.Event()

    def handler(request: Any) -> Any:
        if not first.is_set():
            first.set()
            return httpx.Response(429, headers={"retry-after": "0.3"}, json={"error": {}})
        return httpx.Response(200, json=ok_body("ok"))

    llm = OpenAICompatLLM("m", base_url="https://api.example.test/v1", backoff=0.01,
                          http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    llm.complete(MSGS, purpose="act")  # takes the 429: the gate is closed for 0.3 s
    t0 = time.monotonic()
    other = threading.Thread(target=llm.complete, args=(MSGS,), kwargs={"purpose": "act"})
    other.start()
    other.join()
    waited = time.monotonic() - t0
    assert waited < 0.3  # the gate opened while the first caller slept through it
    llm._close_gate(0.3)  # another thread's 429, just now
    t0 = time.monotonic()
    other = threading.Thread(target=llm.complete, args=(MSGS,), kwargs={"purpose": "act"})
    other.start()
    other.join()
    assert time.monotonic() - t0 >= 0.25
    assert llm.usage.by_purpose["act"].retry_wait >= 0.25 + 0.3
