"""OpenTelemetry spans (issue 50): recall, learn, prune, import and each LLM call, GenAI
semantic conventions, no content unless asked; skipped without the ``otel`` extra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from deltamem import DeltaMem, telemetry
from deltamem.bench import RunConfig, run
from deltamem.embed import HashingEmbedder
from deltamem.llm import ScriptedLLM
from deltamem.llm.fault_server import FaultServer
from deltamem.llm.openai_compat import OpenAICompatLLM
from deltamem.testing import make_episode

from .bench.bench_toys import CorridorEnv


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(telemetry.CAPTURE_ENV, raising=False)
    monkeypatch.delenv(telemetry.DISABLE_ENV, raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    yield exporter
    telemetry.use_tracer_provider(None)


def _by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in exporter.get_finished_spans():
        out.setdefault(s.name.split(" ")[0], []).append(s)
    return out


def test_recall_learn_prune_and_import_are_memory_spans(spans, tmp_path: Path) -> None:
    mem = DeltaMem.open(tmp_path / "bank.db", embedder=HashingEmbedder())
    ep = make_episode()
    recall = mem.recall(ep.task)
    mem.learn(ep, recall)
    mem.recall(ep.task)
    mem.prune(["unused:100"], dry_run=True)
    mem.export(tmp_path / "bank.jsonl")
    mem.close()
    DeltaMem.import_(tmp_path / "bank.jsonl", tmp_path / "copy.db", embedder=None).close()
    got = _by_name(spans)
    search, update = got["search_memory"], got["update_memory"]
    assert len(search) == 2 and len(update) == 1
    a = dict(search[1].attributes)
    assert a["gen_ai.operation.name"] == "search_memory"
    assert a["gen_ai.provider.name"] == "deltamem" and a["gen_ai.memory.store.id"] == "bank.db"
    assert a["deltamem.match.task.accepted"] is True and a["deltamem.match.task.score"] > 0.9
    assert a["gen_ai.memory.record.count"] >= 1 and "gen_ai.memory.record.id" in a
    assert "gen_ai.memory.query.text" not in a and "gen_ai.memory.records" not in a
    u = dict(update[0].attributes)
    assert u["deltamem.changes.written"] == 2 and u["gen_ai.memory.record.count"] == 2
    assert got["delete_memory"][0].attributes["deltamem.dry_run"] is True
    c = dict(got["create_memory"][0].attributes)
    assert c["gen_ai.memory.store.id"] == "copy.db" and c["gen_ai.memory.record.count"] == 2


def test_content_is_recorded_only_when_asked(spans, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(telemetry.CAPTURE_ENV, "true")
    mem = DeltaMem.open(tmp_path / "bank.db", embedder=HashingEmbedder())
    mem.learn(make_episode())
    mem.recall(make_episode().task)
    mem.close()
    llm = ScriptedLLM(["hello"])
    llm.complete([{"role": "user", "content": "secret prompt"}], purpose="act")
    got = _by_name(spans)
    a = dict(got["search_memory"][0].attributes)
    assert "apple" in a["gen_ai.memory.query.text"] and a["gen_ai.memory.records"]
    chat = dict(got["chat"][0].attributes)
    assert "secret prompt" in chat["gen_ai.input.messages"]
    assert json.loads(chat["gen_ai.output.messages"])[0]["parts"][0]["content"] == "hello"


def test_an_llm_call_follows_the_genai_conventions(spans, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FaultServer(["500", "ok"]) as server:
        llm = OpenAICompatLLM("m-1", base_url=server.url, backoff=0.01)
        llm.complete([{"role": "user", "content": "secret"}], purpose="extract",
                     max_tokens=33, temperature=0.5)
    (s,) = spans.get_finished_spans()
    a = dict(s.attributes)
    assert s.name == "chat m-1" and s.kind.name == "CLIENT"
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "m-1" and a["gen_ai.request.max_tokens"] == 33
    assert a["gen_ai.usage.input_tokens"] == 10 and a["gen_ai.usage.output_tokens"] == 5
    assert a["server.address"] == "127.0.0.1" and a["server.port"] > 0
    assert a["deltamem.purpose"] == "extract" and a["deltamem.attempts"] == 2
    assert not any("secret" in str(v) for v in a.values())


def test_a_failed_call_carries_its_error_type(spans, monkeypatch) -> None:
    import socket

    from deltamem.errors import LLMUnavailableError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = OpenAICompatLLM("m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(LLMUnavailableError):
        llm.complete([{"role": "user", "content": "x"}], purpose="act")
    (s,) = spans.get_finished_spans()
    assert s.attributes["error.type"] == "LLMUnavailableError"
    assert s.status.status_code.name == "ERROR"


def test_an_episode_is_one_span_tree(spans, tmp_path: Path) -> None:
    cfg = RunConfig(run_dir=tmp_path / "r", env="corridor", split="test", llm="scripted",
                    memory="deltamem", embedder="hashing", episodes=2, constrained=True)
    run(cfg, env=CorridorEnv(), llm=ScriptedLLM(), progress=False)
    finished = spans.get_finished_spans()
    episodes = [s for s in finished if s.name.startswith("episode ")]
    assert len(episodes) == 2
    root = episodes[0]
    children = [s for s in finished if s.parent is not None
                and s.parent.span_id == root.context.span_id]
    names = [s.name.split(" ")[0] for s in children]
    assert names[0] == "search_memory" and names[-1] == "update_memory"
    assert "chat" in names  # the agent's calls, between recall and learn
    assert root.attributes["deltamem.phase"] == "online"
    assert isinstance(root.attributes["deltamem.success"], bool)


def test_off_switch(spans, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(telemetry.DISABLE_ENV, "off")
    ScriptedLLM(["x"]).complete([{"role": "user", "content": "x"}], purpose="act")
    assert spans.get_finished_spans() == ()


def test_the_service_names_the_tenant(spans, tmp_path: Path) -> None:
    from deltamem.service import BankSpace, TenantBanks

    svc = TenantBanks(BankSpace(tmp_path), embedder=HashingEmbedder(dim=64),
                      config={"domain": "alfworld"})
    svc.learn("alice", "kitchen", make_episode(episode_id="e1"))
    svc.recall("alice", "kitchen", make_episode().task)
    got = _by_name(spans)
    assert got["update_memory"][0].attributes["deltamem.tenant"] == "alice"
    assert got["search_memory"][0].attributes["deltamem.tenant"] == "alice"
    mem = DeltaMem.open(tmp_path / "x.db", embedder=HashingEmbedder())
    mem.recall(make_episode().task)  # outside the service: no tenant
    mem.close()
    assert "deltamem.tenant" not in _by_name(spans)["search_memory"][-1].attributes


@pytest.mark.parametrize("system", ["synapse", "awm", "reasoningbank", "long-context", "ace",
                                    "memp", "macla"])
def test_every_system_s_recall_is_the_same_span(spans, system, tmp_path: Path) -> None:
    """Recalls of the other systems get DeltaMem's ``search_memory`` span (the memory
    contract wraps every ``recall``, one place): system, bank, record count."""
    from .memories.baseline_helpers import SYSTEMS

    mem = SYSTEMS[system].open(tmp_path / f"{system}.db", embedder=HashingEmbedder(dim=64))
    mem.learn(make_episode("put a clean apple in fridge", episode_id="e1"))
    spans.clear()
    r = mem.recall(make_episode("put a clean apple in fridge").task)
    mem.close()
    (s,) = _by_name(spans)["search_memory"]
    a = dict(s.attributes)
    assert s.name == f"search_memory {system}.db"
    assert a["gen_ai.operation.name"] == "search_memory"
    assert a["gen_ai.provider.name"] == SYSTEMS[system].name
    assert a["gen_ai.memory.store.id"] == f"{system}.db"
    assert a["gen_ai.memory.record.count"] == len(r.items)
    assert "gen_ai.memory.query.text" not in a and "gen_ai.memory.records" not in a


def test_a_recall_calling_its_parent_s_is_one_span(spans) -> None:
    from deltamem.memory import NoMemory

    class Wrapped(NoMemory):
        name = "wrapped"

        def recall(self, task):
            return super().recall(task)

    Wrapped().recall(make_episode().task)
    got = _by_name(spans)["search_memory"]
    assert len(got) == 1 and got[0].attributes["gen_ai.provider.name"] == "wrapped"
    assert got[0].attributes["gen_ai.memory.store.id"] == "wrapped"
    assert got[0].attributes["gen_ai.memory.record.count"] == 0
