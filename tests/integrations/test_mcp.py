"""The MCP server with the official SDK's own client: stdio (a subprocess running
``deltamem mcp``) and streamable HTTP (uvicorn on a loopback port, API keys, two tenants)."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

import httpx2  # the MCP SDK's HTTP client, installed with it
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.integrations.mcp.server import build_server, http_app
from deltamem.integrations.mcp.tools import BankService, is_single_bank
from deltamem.service.keys import KeyRing

GOAL = "put a clean apple in fridge"
SCENE = "You are in the middle of a kitchen. You see a countertop 1, a sinkbasin 1, a fridge 1."
STEPS = [
    {"action": "go to countertop 1", "observation": "On the countertop 1, you see a apple 1."},
    {"action": "take apple 1 from countertop 1", "observation": "You pick up the apple 1."},
    {"action": "clean apple 1 with sinkbasin 1", "observation": "You clean the apple 1."},
    {"action": "move apple 1 to fridge 1", "observation": "You move the apple 1 to the fridge 1."},
]
TOOLS = {"recall", "learn", "stats", "tree", "banks"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def every_tool(client: Client, bank: str | None = None) -> dict[str, Any]:
    """Calls every tool once on ``bank`` (recall → learn with its id → recall → stats → tree →
    banks) and returns the structured results."""
    where = {} if bank is None else {"bank": bank}
    tools = await client.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    out: dict[str, Any] = {}
    first = await client.call_tool("recall", {"goal": GOAL, "scene": SCENE, **where})
    assert not first.is_error, first.content
    out["recall"] = first.structured_content
    learned = await client.call_tool("learn", {
        "goal": GOAL, "scene": SCENE, "steps": STEPS, "success": True,
        "recall_id": first.structured_content["recall_id"], **where})
    assert not learned.is_error, learned.content
    out["learn"] = learned.structured_content
    second = await client.call_tool("recall", {"goal": GOAL, "scene": SCENE, **where})
    out["recall2"] = second.structured_content
    for name, args in (("stats", where), ("tree", {"tree": "task", **where}), ("banks", {})):
        r = await client.call_tool(name, args)
        assert not r.is_error, (name, r.content)
        out[name] = r.structured_content
    return out


def check_every_tool(out: dict[str, Any], bank: str) -> None:
    assert out["recall"]["text"] == "" and out["recall"]["recall_id"].startswith("rc_")
    assert [c["kind"] for c in out["learn"]["changes"]] == ["written", "written"]
    written = {c["source"]: c["id"] for c in out["learn"]["changes"]}
    again = out["recall2"]
    assert "clean {A} with sinkbasin" in again["text"]
    for tree in ("task", "env"):  # the matched chain: ids and the Eq. 6 score
        d = again["details"][tree]
        assert d["accepted"] and d["node_id"] == written[tree] and d["chain"] == [written[tree]]
        assert d["score"] == pytest.approx(1.0)
    assert {i["id"] for i in again["items"]} == set(written.values())
    assert out["stats"]["bank"] == bank and out["stats"]["nodes"] == {"task": 1, "env": 1}
    assert out["stats"]["episodes_learned"] == 1
    assert [n["id"] for n in out["tree"]["nodes"]] == [written["task"]]
    assert {"name": bank, "nodes": {"task": 1, "env": 1}} in out["banks"]["banks"]


# -- stdio --------------------------------------------------------------------------------------


def stdio_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "deltamem", "mcp", *args, "--embedder", "hashing", "--domain", "alfworld"],
    )


def test_stdio_client_calls_every_tool_on_one_bank_file(tmp_path: Path) -> None:
    bank = tmp_path / "agent.db"

    async def go() -> dict[str, Any]:
        async with Client(stdio_params(str(bank))) as client:
            out = await every_tool(client)
            res = await client.list_resources()
            out["resources"] = [str(r.uri) for r in res.resources]
            read = await client.read_resource("deltamem://banks/agent/tree")
            out["read"] = json.loads(read.contents[0].text)
            bad = await client.call_tool("stats", {"bank": "other"})
            out["bad"] = (bad.is_error, bad.content[0].text)
            return out

    out = run(go())
    check_every_tool(out, "agent")
    assert out["resources"] == ["deltamem://banks/agent"]
    assert len(out["read"]["nodes"]) == 2
    assert out["bad"][0] and "holds one bank, 'agent'" in out["bad"][1]
    assert bank.is_file()  # the bank persisted where the command line said


def test_stdio_bad_input_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async def go() -> list[tuple[bool, str]]:
        async with Client(stdio_params(str(tmp_path / "store"))) as client:
            results = []
            for name, args in [
                ("learn", {"goal": GOAL, "steps": [], "success": True}),           # empty
                ("learn", {"goal": GOAL, "steps": [{"action": "x", "obs": "y"}],  # extra field
                           "success": True}),
                ("learn", {"goal": GOAL, "steps": [{"action": "x"}], "success": True,
                           "reward": "lots"}),
                ("learn", {"goal": GOAL, "steps": [{"action": "x"}], "success": True,
                           "recall_id": "rc_made_up"}),
                ("recall", {"goal": ""}),
                ("recall", {"goal": GOAL, "domain": "cooking"}),
                ("recall", {"goal": GOAL, "recallId": "x"}),                        # misspelt
                ("recall", {"goal": "a\x00b"}),
                ("stats", {"bank": "../../etc"}),
                ("stats", {"bank": "never-made"}),
            ]:
                r = await client.call_tool(name, args)
                results.append((r.is_error, r.content[0].text))
            ok = await client.call_tool("recall", {"goal": GOAL})
            results.append((ok.is_error, ok.structured_content["text"]))
            return results

    results = run(go())
    *bad, last = results
    assert all(is_error for is_error, _ in bad), bad
    texts = [t for _, t in bad]
    assert "at least 1 item" in texts[0]
    assert "obs" in texts[1] and "Extra inputs are not permitted" in texts[1]
    assert "reward" in texts[2]
    assert "unknown recall_id 'rc_made_up'" in texts[3]
    assert "recallId" in texts[6] and "unknown argument" in texts[6]
    assert "NUL" in texts[7]
    assert "bank name must match" in texts[8]
    assert "no bank named 'never-made'" in texts[9]
    assert last == (False, "")  # still serving, and nothing was written by the bad calls


def test_stdio_learn_without_success_asks_the_servers_judge(tmp_path: Path) -> None:
    judged = stdio_params(str(tmp_path / "judged.db"), "--judge", "scripted")

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(judged) as client:
            won = await client.call_tool("learn", {"goal": GOAL, "scene": SCENE, "steps": STEPS})
            out["won"] = won.structured_content
            unsure = await client.call_tool("learn", {
                "goal": "water the plants", "steps": [{"action": "look", "observation": "x"}]})
            out["unsure"] = unsure.structured_content
        async with Client(stdio_params(str(tmp_path / "plain.db"))) as client:
            bad = await client.call_tool("learn", {"goal": GOAL, "steps": STEPS})
            out["bad"] = (bad.is_error, bad.content[0].text)
        return out

    out = run(go())
    assert out["won"]["verdict"]["outcome"] == "success"
    assert out["won"]["verdict"]["judge"] == "scripted"
    assert [c["kind"] for c in out["won"]["changes"]] == ["written", "written"]
    assert out["unsure"]["verdict"]["outcome"] == "uncertain"
    assert [(c["kind"], c["source"]) for c in out["unsure"]["changes"]] == [("skipped", "judge")]
    assert out["bad"][0] and "success is required" in out["bad"][1]


# -- streamable HTTP --------------------------------------------------------------------------

KEY_A, KEY_B = "dmk_key-of-tenant-a", "dmk_key-of-tenant-b"
KEY_R = "dmk_read-only-key-of-tenant-a"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    keys = KeyRing.from_keys({KEY_A: "alice", KEY_B: "bob", KEY_R: "alice"}, read_only=[KEY_R])
    service = BankService(tmp_path / "banks", embedder=HashingEmbedder(),
                          config={"domain": "alfworld"})
    app = http_app(build_server(service, keys=keys), keys)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        service.close()


def http_client(url: str, key: str | None, header: str = "authorization") -> Client:
    headers = {} if key is None else (
        {"Authorization": f"Bearer {key}"} if header == "authorization" else {"X-API-Key": key})
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)))


def test_http_client_calls_every_tool_with_a_key(http_url: str) -> None:
    async def go() -> dict[str, Any]:
        async with http_client(http_url, KEY_A) as client:
            return await every_tool(client, bank="kitchen")

    check_every_tool(run(go()), "kitchen")


def test_http_without_a_valid_key_is_refused(http_url: str) -> None:
    async def raw(headers: dict[str, str]) -> httpx2.Response:
        async with httpx2.AsyncClient() as h:
            return await h.post(http_url, headers={"Accept": "application/json, "
                                                             "text/event-stream", **headers},
                                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

    none = run(raw({}))
    assert none.status_code == 401 and none.json() == {"detail": "missing API key"}
    wrong = run(raw({"Authorization": "Bearer dmk_not-a-key"}))
    assert wrong.status_code == 401 and wrong.json() == {"detail": "unknown API key"}

    async def connect() -> None:
        async with http_client(http_url, None) as client:
            await client.list_tools()

    with pytest.raises(BaseExceptionGroup) as caught:  # the SDK client cannot connect
        run(connect())
    assert caught.group_contains(MCPError, match="error response", depth=None)


def test_http_read_only_key_recalls_but_cannot_learn(http_url: str) -> None:
    async def go() -> tuple[Any, Any, Any]:
        async with http_client(http_url, KEY_A) as alice:
            await every_tool(alice, bank="kitchen")
        async with http_client(http_url, KEY_R) as reader:
            recall = await reader.call_tool("recall", {"goal": GOAL, "scene": SCENE,
                                                       "bank": "kitchen"})
            learn = await reader.call_tool("learn", {"goal": GOAL, "scene": SCENE,
                                                     "steps": STEPS, "success": True,
                                                     "bank": "kitchen"})
            stats = await reader.call_tool("stats", {"bank": "kitchen"})
        return recall, learn, stats

    recall, learn, stats = run(go())
    assert not recall.is_error and recall.structured_content["text"]
    assert learn.is_error and "read-only" in learn.content[0].text
    assert not stats.is_error


def test_http_tenant_a_never_sees_tenant_b_bank(http_url: str) -> None:
    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_client(http_url, KEY_A) as alice:
            out["alice"] = await every_tool(alice, bank="kitchen")
        async with http_client(http_url, KEY_B, header="x-api-key") as bob:
            out["bob_banks"] = (await bob.call_tool("banks", {})).structured_content
            stats = await bob.call_tool("stats", {"bank": "kitchen"})
            out["bob_stats"] = (stats.is_error, stats.content[0].text)
            tree = await bob.call_tool("tree", {"bank": "kitchen"})
            out["bob_tree"] = (tree.is_error, tree.content[0].text)
            rec = await bob.call_tool("recall", {"goal": GOAL, "scene": SCENE, "bank": "kitchen"})
            out["bob_recall"] = rec.structured_content
            # alice's recall id is not bob's to use
            learned = await bob.call_tool("learn", {
                "goal": GOAL, "scene": SCENE, "steps": STEPS[:1], "success": False,
                "bank": "kitchen", "recall_id": out["alice"]["recall2"]["recall_id"]})
            out["bob_foreign_id"] = (learned.is_error, learned.content[0].text)
            res = await bob.list_resources()
            out["bob_resources"] = [str(r.uri) for r in res.resources]
            try:
                await bob.read_resource("deltamem://banks/kitchen")
                out["bob_read"] = "read"
            except MCPError as e:
                out["bob_read"] = str(e)
            # bob's own bank of the same name is his alone
            own = await bob.call_tool("learn", {"goal": "water the plant", "steps": STEPS[:1],
                                                "success": False, "bank": "kitchen"})
            out["bob_own"] = own.is_error
        async with http_client(http_url, KEY_A) as alice:
            out["alice_after"] = (await alice.call_tool("stats", {"bank": "kitchen"})
                                  ).structured_content
            out["alice_resources"] = [str(r.uri) for r in (await alice.list_resources()).resources]
        return out

    out = run(go())
    assert out["bob_banks"] == {"banks": []}
    assert out["bob_stats"] == (True, "Error executing tool stats: no bank named 'kitchen'")
    assert out["bob_tree"][0] and "no bank named 'kitchen'" in out["bob_tree"][1]
    assert out["bob_recall"]["text"] == "" and out["bob_recall"]["details"] == {}
    assert out["bob_foreign_id"][0] and "unknown recall_id" in out["bob_foreign_id"][1]
    assert out["bob_resources"] == [] and "no bank named 'kitchen'" in out["bob_read"]
    assert out["bob_own"] is False
    assert out["alice_after"]["nodes"] == {"task": 1, "env": 1}  # untouched by bob's learn
    assert out["alice_after"]["episodes_learned"] == 1
    assert out["alice_resources"] == ["deltamem://banks/kitchen"]


def test_target_kind_and_http_needs_a_storage(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deltamem.cli import app

    assert is_single_bank(str(tmp_path / "x.db")) and is_single_bank(":memory:")
    assert not is_single_bank(str(tmp_path / "folder"))
    assert is_single_bank("postgresql://u@h/db?bank=team/a")
    assert not is_single_bank("postgresql://u@h/db")
    with pytest.raises(ConfigError, match="cannot be split between tenants"):
        build_server(BankService(tmp_path / "one.db", embedder=HashingEmbedder()),
                     keys=KeyRing.from_keys({KEY_A: "alice"}))
    r = CliRunner().invoke(app, ["mcp", str(tmp_path / "x.db"), "--http"])
    assert r.exit_code != 0 and "give a storage" in str(r.exception)
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    r = CliRunner().invoke(app, ["mcp", str(tmp_path / "store"), "--http", "--keys", str(keys)])
    assert r.exit_code != 0 and "holds no keys" in str(r.exception)
