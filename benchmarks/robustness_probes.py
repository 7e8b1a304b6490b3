"""Hostile-user probes of the library, CLI and service (issue 17): one Markdown row per probe.

Run ``python benchmarks/robustness_probes.py`` (as root, a few probes also mount a tiny tmpfs
to get a real read-only folder / full disk; without root they use SQLite's
``max_page_count`` and a read-only URI instead). Each row says what happened: HTTP
status, CLI exit code and whether a traceback was printed, or the exception raised.
Nothing here is a test: ``tests/robustness`` and ``tests/server`` pin the behaviour.
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
ROWS: list[tuple[str, str, str]] = []


def probe(item: str, name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def deco(fn: Callable[[], str]) -> Callable[[], str]:
        try:
            out = fn()
        except Exception as e:  # the probe itself reports what escaped
            out = f"raised {type(e).__module__}.{type(e).__name__}: {str(e)[:80]}"
        ROWS.append((item, name, out.replace("|", "/").replace("\n", " ")))
        return fn

    return deco


def cli(*args: str, cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    p = subprocess.run([sys.executable, "-m", "deltamem", *args], capture_output=True,
                       text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=300)
    tb = "Traceback" in p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    out = p.stdout.strip().splitlines()
    last = lines[-1][:110] if lines else out[-1][:110] if out else ""
    return f"exit {p.returncode}, {'TRACEBACK' if tb else f'{len(lines)} line(s)'}: {last}"


def service(storage: str, domain: str = "alfworld") -> Any:
    from fastapi.testclient import TestClient

    from deltamem.embed import HashingEmbedder
    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing

    app = create_app(storage, embedder=HashingEmbedder(dim=64),
                     keys=KeyRing.from_keys({"k": "alice"}), config={"domain": domain})
    return TestClient(app, raise_server_exceptions=False)


H = {"Authorization": "Bearer k"}


def episode_body(goal: str = "put a clean apple in fridge", eid: str = "e1",
                 success: bool = True) -> dict[str, Any]:
    from deltamem.testing import make_episode

    d = make_episode(goal, episode_id=eid, success=success).to_dict()
    d.pop("usage")
    d["task"].pop("meta")
    return d


TMP = Path(tempfile.mkdtemp(prefix="probes-"))


def valid_export() -> list[dict[str, Any]]:
    http = service(str(TMP / f"src-{len(os.listdir(TMP))}"))
    goals = ["put a clean apple in fridge", "heat some egg and put it in garbagecan"]
    for i, g in enumerate(goals):
        http.post("/v1/banks/b/learn", headers=H, json={"episode": episode_body(g, f"e{i}")})
    # a failure of the first task: a residual under its root
    http.post("/v1/banks/b/learn", headers=H, json={"episode": episode_body(
        goals[0], "e9", success=False)})
    text = http.get("/v1/banks/b/export", headers=H).text
    return [json.loads(x) for x in text.splitlines()]


def nodes(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == "node"]


def import_then_stats(mutate: Callable[[list[dict[str, Any]]], None]) -> str:
    recs = valid_export()
    mutate(recs)
    http = service(str(TMP / f"dst-{len(os.listdir(TMP))}"))
    r = http.post("/v1/banks/x/import", headers=H, json={"records": recs})
    s = http.get("/v1/banks/x/stats", headers=H)
    q = http.post("/v1/banks/x/recall", headers=H, json={"task": episode_body()["task"]})
    n = http.post("/v1/banks/x/learn", headers=H, json={"episode": episode_body(eid="new")})
    e = http.get("/v1/banks/x/export", headers=H)
    return (f"import {r.status_code} {r.text[:90]}; then stats {s.status_code}, recall "
            f"{q.status_code}, learn {n.status_code}, export {e.status_code}")


def residual(recs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(n for n in nodes(recs) if n["kind"] == "RESIDUAL")


def _other_tree(recs: list[dict[str, Any]]) -> None:
    child = residual(recs)
    other = next(n for n in nodes(recs) if n["tree"] != child["tree"] and n["kind"] == "ROOT")
    child["parent_id"] = other["id"]


def _higher_seq(recs: list[dict[str, Any]]) -> None:
    child = residual(recs)
    parent = next(n for n in nodes(recs) if n["id"] == child["parent_id"])
    parent["seq"], child["seq"] = child["seq"], parent["seq"]


def _emb(vec: np.ndarray) -> str:
    return base64.b64encode(vec.astype("<f4").tobytes()).decode()


for label, mutate in [
    ("node that is its own parent", lambda r: residual(r).update(parent_id=residual(r)["id"])),
    ("parent has a higher seq", _higher_seq),
    ("parent in the other tree", _other_tree),
    ("embedding of the wrong dimension", lambda r: nodes(r)[0].update(
        embedding=_emb(np.ones(32) / math.sqrt(32)))),
    ("embedding with NaN", lambda r: nodes(r)[0].update(
        embedding=_emb(np.full(64, np.nan)))),
    ("seq = 0", lambda r: nodes(r)[-1].update(seq=0)),
    ("seq = 2^63-1", lambda r: nodes(r)[-1].update(seq=2**63 - 1)),
    ("dict as node id", lambda r: nodes(r)[0].update(id={"a": 1})),
    ("list as rejection reason", lambda r: r.append({
        "type": "rejection", "tree": "task", "role": "x", "reason": [1], "raw": "",
        "episode_id": "e", "created_at": 1.0})),
]:
    probe("1", f"HTTP import: {label}")(lambda m=mutate: import_then_stats(m))


@probe("1", 'HTTP learn with "success": "yes"')
def _success_yes() -> str:
    http = service(str(TMP / "yes"))
    body = episode_body()
    body["success"] = "yes"
    r = http.post("/v1/banks/b/learn", headers=H, json={"episode": body})
    return f"learn {r.status_code}"


@probe("1", "CLI import: node that is its own parent")
def _cli_self_parent() -> str:
    recs = valid_export()
    residual(recs).update(parent_id=residual(recs)["id"])
    src = TMP / "self.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    bank = TMP / "self.db"
    a = cli("import", str(src), str(bank))
    return a + f"; then stats: {cli('stats', str(bank))}"


def damaged_bank(folder: Path) -> Path:
    from deltamem.embed import HashingEmbedder
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.testing import make_episode

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bad.db"
    mem = DeltaMem.open(path, embedder=HashingEmbedder(dim=64), domain="alfworld")
    for i in range(30):
        mem.learn(make_episode(f"goal number {i} " + "x" * 50, episode_id=f"e{i}"))
    mem.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for off in range(page, len(data), page):  # keep page 1 (header, schema), garble the rest
        data[off + 8: off + 200] = os.urandom(192)
    path.write_bytes(bytes(data))
    return path


@probe("2", "damaged bank: GET /v1/banks, stats")
def _damaged_http() -> str:
    storage = TMP / "dmg"
    damaged_bank(storage / "alice")
    http = service(str(storage))
    a = http.get("/v1/banks", headers=H)
    b = http.get("/v1/banks/bad/stats", headers=H)
    c = http.post("/v1/banks/bad/learn", headers=H, json={"episode": episode_body()})
    return f"list {a.status_code}, stats {b.status_code}, learn {c.status_code}: {b.text[:60]}"


@probe("2", "damaged bank: library open+stats")
def _damaged_lib() -> str:
    from deltamem.embed import HashingEmbedder
    from deltamem.memories.deltamem import DeltaMem

    path = damaged_bank(TMP / "dmg2")
    mem = DeltaMem.open(path, embedder=HashingEmbedder(dim=64))
    mem.stats()
    return "no error"


@probe("2", "damaged bank: CLI stats")
def _damaged_cli() -> str:
    return cli("stats", str(damaged_bank(TMP / "dmg3")))


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    return ROOT and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                    str(path)], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@probe("2", "bank in a read-only folder: CLI stats / library open for writing")
def _ro_folder() -> str:
    d = TMP / "rofs"
    if not _tmpfs(d, "4m"):
        return "skipped (needs root for a tmpfs)"
    try:
        from deltamem.embed import HashingEmbedder
        from deltamem.memories.deltamem import DeltaMem
        from deltamem.testing import make_episode

        mem = DeltaMem.open(d / "b.db", embedder=HashingEmbedder(dim=64))
        mem.learn(make_episode(episode_id="e0"))
        mem.close()
        subprocess.run(["mount", "-o", "remount,ro", str(d)], check=True)
        out = cli("stats", str(d / "b.db"))
        try:
            DeltaMem.open(d / "b.db", embedder=HashingEmbedder(dim=64)).close()
            lib = "open ok"
        except Exception as e:
            lib = f"{type(e).__name__}: {str(e)[:70]}"
        return f"CLI {out}; library: {lib}"
    finally:
        _umount(d)


@probe("2", "read-only bank file: open for writing, then learn")
def _ro_file() -> str:
    import sqlite3

    from deltamem.embed import HashingEmbedder
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.testing import make_episode

    path = TMP / "rofile.db"
    DeltaMem.open(path, embedder=HashingEmbedder(dim=64)).close()
    real = sqlite3.connect

    def ro_connect(target: Any, *a: Any, **kw: Any) -> Any:  # the file opens read-only
        if str(target) == str(path):
            return real(f"file:{path}?mode=ro", *a, uri=True, **kw)
        return real(target, *a, **kw)

    sqlite3.connect = ro_connect  # type: ignore[assignment]
    try:
        try:
            mem = DeltaMem.open(path, embedder=HashingEmbedder(dim=64))
        except Exception as e:
            return f"open refused: {type(e).__name__}: {str(e)[:70]}"
        try:
            mem.learn(make_episode(episode_id="e0"))
            return "open ok, learn ok?!"
        except Exception as e:
            return f"open ok; learn raised {type(e).__module__}.{type(e).__name__}: {str(e)[:50]}"
    finally:
        sqlite3.connect = real  # type: ignore[assignment]


@probe("2", "full disk: HTTP learn (bank with max_page_count)")
def _full_http() -> str:
    import sqlite3

    storage = TMP / "full"
    http = service(str(storage))
    http.post("/v1/banks/b/learn", headers=H, json={"episode": episode_body()})
    real = sqlite3.connect

    def capped(target: Any, *a: Any, **kw: Any) -> Any:
        c = real(target, *a, **kw)
        if "full" in str(target):
            n = c.execute("PRAGMA page_count").fetchone()[0]
            c.execute(f"PRAGMA max_page_count = {n}")
        return c

    sqlite3.connect = capped  # type: ignore[assignment]
    try:
        http2 = service(str(storage))
        codes = []
        for i in range(3):
            # many one-letter words: the abstracted household trigger keeps them all (one
            # 3000-letter word becomes a single placeholder and writes nothing new)
            r = http2.post("/v1/banks/b/learn", headers=H, json={"episode": episode_body(
                f"brand new goal {i} " + "y " * 1500, f"n{i}")})
            codes.append(r.status_code)
        return f"learn statuses {codes}: {r.text[:70]}"
    finally:
        sqlite3.connect = real  # type: ignore[assignment]


@probe("2", "full disk: CLI import / export (tmpfs)")
def _full_cli() -> str:
    d = TMP / "small"
    if not _tmpfs(d, "256k"):
        return "skipped (needs root for a tmpfs)"
    try:
        big = TMP / "big.jsonl"
        recs = valid_export()
        n0 = nodes(recs)[0]
        more = []
        for i in range(400):
            more.append({**n0, "id": f"n{i}", "seq": 1000 + i, "trigger": "t" * 2000})
        big.write_text("".join(json.dumps(r) + "\n" for r in recs + more))
        imp = cli("import", str(big), str(d / "imp.db"))
        left1 = sorted(os.listdir(d))
        src = TMP / "bigbank.db"
        cli("import", str(big), str(src))
        exp = cli("export", str(src), str(d / "out.jsonl"))
        left2 = sorted(os.listdir(d))
        return f"import: {imp}; left {left1}. export: {exp}; left {left2}"
    finally:
        _umount(d)


@probe("2", "ledger ROLLBACK after SQLite rolled back (disk full in a learn)")
def _rollback_mask() -> str:
    from deltamem.store.sqlite import SQLiteStore

    s = SQLiteStore(TMP / "rb.db")
    s._conn.execute("PRAGMA max_page_count = " + str(
        s._conn.execute("PRAGMA page_count").fetchone()[0]))
    try:
        with s.transaction():
            for i in range(200):
                s.add_rejection(tree="task", role="r", reason="x" * 4000, raw="y" * 4000,
                                episode_id=f"e{i}")
    except Exception as e:
        return f"{type(e).__module__}.{type(e).__name__}: {str(e)[:70]}"
    return "no error"


@probe("3", "service opens an imported bank with its own config")
def _config() -> str:
    from deltamem.embed import HashingEmbedder
    from deltamem.memories.deltamem import DeltaMem
    from deltamem.store import export_jsonl
    from deltamem.testing import make_episode

    src = TMP / "cfg.db"
    mem = DeltaMem.open(src, embedder=HashingEmbedder(dim=64), domain="generic",
                        tau_task=0.3, tau_env=0.2)
    mem.learn(make_episode(episode_id="e0"))
    export_jsonl(mem.store, TMP / "cfg.jsonl")
    mem.close()
    recs = [json.loads(x) for x in (TMP / "cfg.jsonl").read_text().splitlines()]
    http = service(str(TMP / "cfgsvc"), domain="alfworld")
    http.post("/v1/banks/c/import", headers=H, json={"records": recs})
    s = http.get("/v1/banks/c/stats", headers=H).json()["meta"]["config"]
    r = http.post("/v1/banks/c/recall", headers=H, json={"task": episode_body()["task"]}).json()
    taus = {k: v["tau"] for k, v in r["details"].items()}
    return (f"stats tau {s['tau_task']}/{s['tau_env']}; recall used "
            f"{taus.get('task')}/{taus.get('env')}")


class _Fake:
    """A tiny OpenAI-compatible server answering from a script of faults."""

    def __init__(self, script: list[str]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.script = script
        self.seen = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                fake.seen += 1
                kind = fake.script.pop(0) if fake.script else "ok"
                if kind == "500":
                    body, status = b'{"error": {"message": "boom"}}', 500
                elif kind == "nonjson":
                    body, status = b"<html>proxy cut</html>", 200
                else:
                    body, status = json.dumps({
                        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": "hello"}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                  "total_tokens": 2}}).encode(), 200
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


@probe("4", "200 reply whose body is not JSON")
def _nonjson() -> str:
    from deltamem.llm.openai_compat import OpenAICompatLLM

    fake = _Fake(["nonjson"])
    llm = OpenAICompatLLM("m", base_url=fake.url, backoff=0.0)
    llm.sleep = lambda s: None
    out = llm.complete([{"role": "user", "content": "hi"}], purpose="act")
    return f"text {out.text!r} after {fake.seen} requests"


@probe("4", "retries counted (3 x 500, then ok)")
def _counted() -> str:
    from deltamem.llm.openai_compat import OpenAICompatLLM

    fake = _Fake(["500", "500", "500"])
    llm = OpenAICompatLLM("m", base_url=fake.url, backoff=0.0)
    llm.sleep = lambda s: None
    llm.complete([{"role": "user", "content": "hi"}], purpose="act")
    c = llm.usage.to_dict()["act"]
    return f"server saw {fake.seen} requests; usage record {c}"


def _bytes(data: bytes) -> Path:
    p = TMP / "raw.bin"
    p.write_bytes(data)
    return p


def _export_file() -> str:
    p = TMP / "ok.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in valid_export()))
    return str(p)


def _keys() -> str:
    p = TMP / "keys.json"
    if not p.exists():
        cli("api-key", "alice", "--keys", str(p))
    return str(p)


def _good_bank() -> str:
    from deltamem.embed import HashingEmbedder
    from deltamem.memories.deltamem import DeltaMem

    path = TMP / "good.db"
    DeltaMem.open(path, embedder=HashingEmbedder(dim=64)).close()
    return str(path)


def _jsonl_with(first: str, name: str) -> str:
    p = TMP / name
    p.write_text(first + "\n")
    return str(p)


for label, args in [
    ("export to a missing folder", lambda: ["export", _good_bank(),
                                            str(TMP / "nope" / "x.jsonl")]),
    ("import: first line is an array", lambda: ["import", _jsonl_with("[1, 2]", "arr.jsonl"),
                                                str(TMP / "arr.db")]),
    ("import: first line is a string", lambda: ["import", _jsonl_with('"s"', "str.jsonl"),
                                                str(TMP / "str.db")]),
    ("import: non-UTF-8 file", lambda: ["import", str(_bytes(b"\xff\xfe{}\n")),
                                        str(TMP / "nu.db")]),
    ("import: a directory", lambda: ["import", str(TMP), str(TMP / "dir.db")]),
    ("import: into a missing folder", lambda: ["import", _export_file(),
                                               str(TMP / "missing" / "m.db")]),
    ("import: an empty file", lambda: ["import", _jsonl_with("", "empty.jsonl"),
                                       str(TMP / "empty.db")]),
    ("run --run-dir that is a file", lambda: ["run", "--env", "household", "--split", "seen",
                                              "--memory", "none",
                                              "--llm", "scripted", "--embedder", "hashing",
                                              "--episodes", "1", "--run-dir",
                                              _jsonl_with("x", "afile")]),
    ("serve: storage that is a file", lambda: ["serve", _jsonl_with("x", "sfile"), "--keys",
                                               _keys(), "--embedder", "hashing"]),
    ("serve --port 99999", lambda: ["serve", str(TMP / "srv"), "--keys", _keys(),
                                    "--embedder", "hashing", "--port", "99999"]),
    ("api-key with a malformed key file", lambda: ["api-key", "bob", "--keys",
                                                   _jsonl_with("{not json", "k.json")]),
]:
    probe("5", f"CLI {label}")(lambda a=args: cli(*a()))


@probe("5", "CLI export BANK /some/dir leaves /some/dir.tmp")
def _export_dir() -> str:
    src = _good_bank()
    d = TMP / "somedir"
    d.mkdir()
    out = cli("export", str(src), str(d))
    return f"{out}; {d.name}.tmp left: {Path(str(d) + '.tmp').exists()}"


@probe("5", "CLI error text with [brackets] printed literally")
def _markup() -> str:
    code = ("from deltamem.cli import main, app\n"
            "from deltamem.errors import DeltaMemError\n"
            "@app.command('boom')\n"
            "def boom():\n    raise DeltaMemError(\"pip install 'deltamem[envs]'\")\n"
            "import sys; sys.argv=['deltamem','boom']; main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return p.stderr.strip()


@probe("5", "server 409 detail reveals the storage path")
def _leak() -> str:
    from fastapi.testclient import TestClient

    from deltamem.embed import HashingEmbedder
    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing

    storage = TMP / "leak"
    service(str(storage)).post("/v1/banks/b/learn", headers=H,
                               json={"episode": episode_body()})
    app = create_app(str(storage), embedder=HashingEmbedder(dim=32),
                     keys=KeyRing.from_keys({"k": "alice"}))
    r = TestClient(app, raise_server_exceptions=False).get("/v1/banks/b/stats", headers=H)
    return f"{r.status_code}, path in body: {str(storage) in r.text}"


if __name__ == "__main__":
    print("| item | probe | outcome |\n|---|---|---|")
    for item, name, out in ROWS:
        print(f"| {item} | {name} | {out} |")
    shutil.rmtree(TMP, ignore_errors=True)
