"""A whole run against an OpenAI-compatible server that injects every fault (issue 17, item 6).

The server (:mod:`deltamem.llm.fault_server`) times out, rate-limits (429 + Retry-After),
fails (500), drops connections, answers a body that is not JSON, and answers off-schema.
The run must finish with every episode recorded exactly once and learned exactly once, and
the usage it recorded must match the server's log request for request: attempts = requests
the server saw, retries = transport faults it served.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.bench import RunConfig
from deltamem.bench import run as run_bench
from deltamem.llm.fault_server import RETRIED, FaultServer, instance_of
from deltamem.llm.openai_compat import OpenAICompatLLM

# one fault every third request, each kind in turn: never two faults in a row, so no call
# runs out of retries, and every kind is served several times in a short run
KINDS = ("500", "nonjson", "429", "close", "offschema", "timeout")


def corridor():
    """The runner tests' corridor game (offline, no extra package)."""
    from tests.bench.bench_toys import CorridorEnv

    return CorridorEnv()


def plan(index: int) -> str:
    return KINDS[(index // 3) % len(KINDS)] if index % 3 == 1 else "ok"


@pytest.fixture
def server():
    with FaultServer(plan, stall=1.5, retry_after=0.01) as s:
        yield s


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]


def totals(recs: list[dict]) -> tuple[int, int, float]:
    usage = [c for r in recs for c in r["usage"].values()]
    return (sum(int(c.get("attempts", c["calls"])) for c in usage),
            sum(int(c.get("retries", 0)) for c in usage),
            sum(float(c.get("retry_wait", 0.0)) for c in usage))


def test_a_run_against_a_faulty_server_loses_nothing_and_counts_every_retry(
    server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    cfg = RunConfig(
        run_dir=tmp_path / "run", env="corridor", split="test", episodes=4, seed=0,
        memory="deltamem", embedder="hashing", extractor="llm", constrained=True,
        max_steps=4, llm="openai:fault-model",
        llm_options={"base_url": server.url, "timeout": 0.5, "backoff": 0.01,
                     "max_retries": 3},
    )
    with caplog.at_level("WARNING", logger="deltamem.llm.openai_compat"):
        result = run_bench(cfg, env=corridor(), progress=False)
    recs = records(cfg.run_dir)
    assert [r["index"] for r in recs] == [0, 1, 2, 3]
    assert len({r["episode_id"] for r in recs}) == 4
    assert all(r["learned"] for r in recs)
    assert recs[-1]["bank"]["episodes_learned"] == 4
    assert result.phases[-1].episodes == 4
    attempts, retries, wait = totals(recs)
    assert attempts == server.count()
    assert retries == server.count(*RETRIED)
    shown = [r for r in caplog.records if "; retry " in r.getMessage()]
    assert len(shown) == retries  # every retry was announced, none silent
    assert set(RETRIED) | {"offschema"} <= {e.fault for e in server.log}  # every kind served
    assert {"act", "extract"} <= {p for r in recs for p in r["usage"]}
    assert wait > 0
    report = (cfg.run_dir / "report.md")
    if report.exists():
        assert "retries" in report.read_text()


def test_a_rerun_of_a_finished_run_adds_nothing(server: FaultServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = RunConfig(
        run_dir=tmp_path / "run", env="corridor", split="test", episodes=2, seed=1,
        memory="deltamem", embedder="hashing", extractor="llm", constrained=True,
        max_steps=3, llm="openai:fault-model",
        llm_options={"base_url": server.url, "timeout": 0.5, "backoff": 0.01},
    )
    run_bench(cfg, env=corridor(), progress=False)
    seen = server.count()
    first = records(cfg.run_dir)
    run_bench(cfg, env=corridor(), progress=False)
    assert records(cfg.run_dir) == first and server.count() == seen


@pytest.mark.parametrize("fault", sorted(RETRIED))
def test_each_transport_fault_is_retried_once_and_counted(fault: str) -> None:
    with FaultServer([fault], stall=1.5, retry_after=0.01) as s:
        llm = OpenAICompatLLM("m", base_url=s.url, timeout=0.5, backoff=0.01)
        out = llm.complete([{"role": "user", "content": "hi"}], purpose="plan")
    assert out.text == "ok" and s.count() == 2
    c = llm.usage.by_purpose["plan"]
    assert (c.calls, c.attempts, c.retries) == (1, 2, 1)


def test_schema_requests_get_an_instance_of_the_schema() -> None:
    schema = {"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "string", "enum": ["x", "y"]}, "b": {"type": "array", "minItems": 1,
                                                          "items": {"type": "integer"}}}}
    assert instance_of(schema) == {"a": "x", "b": [0]}
    with FaultServer() as s:
        llm = OpenAICompatLLM("m", base_url=s.url, backoff=0.01)
        out = llm.complete([{"role": "user", "content": "hi"}], purpose="extract",
                           schema=schema)
    assert json.loads(out.text) == {"a": "x", "b": [0]}
    assert s.log[0].request["response_format"]["type"] == "json_schema"
