"""``concurrency``: a frozen phase played N episodes at a time equals the sequential run
game for game (issue 50), and a rate-limit storm slows the pool without losing episodes."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from deltamem.bench import RunConfig, read_episodes, run
from deltamem.errors import ConfigError
from deltamem.llm import ScriptedLLM
from deltamem.llm.fault_server import FaultServer, hashed_answer

from .bench_toys import CorridorEnv

VOLATILE = ("wall_s", "episode_id")


def _hashed(messages, purpose, choices):  # a deterministic, varied, order-free policy
    if not choices:
        return "ok"
    digest = hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()
    moves = [c for c in choices if c.startswith("go ")] or list(choices)
    return moves[int(digest, 16) % len(moves)]


def _config(run_dir: Path, n: int, **kw: Any) -> RunConfig:
    base: dict[str, Any] = dict(
        run_dir=run_dir, env="corridor", split="test", llm="scripted", memory="deltamem",
        embedder="hashing", protocol="train-to-test", train_split="train", train_episodes=6,
        episodes=12, eval_modes=("frozen",), constrained=True, max_steps=5, concurrency=n,
    )
    return RunConfig(**{**base, **kw})


def _stable(run_dir: Path) -> list[dict[str, Any]]:
    """The records without wall times, random ids (uuid4 hex) masked."""
    recs = [{k: v for k, v in r.items() if k not in VOLATILE}
            for r in read_episodes(run_dir / "episodes.jsonl")]
    return json.loads(re.sub(r'\b[0-9a-f]{32}\b', '<id>', json.dumps(recs)))


def _trajectories(run_dir: Path) -> list[Any]:
    return [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("n", [2, 5])
def test_a_parallel_frozen_phase_equals_the_sequential_one(tmp_path: Path, n: int) -> None:
    seq, par = tmp_path / "seq", tmp_path / "par"
    run(_config(seq, 1), env=CorridorEnv(20), llm=ScriptedLLM(responder=_hashed),
        progress=False)
    run(_config(par, n), env=CorridorEnv(20), llm=ScriptedLLM(responder=_hashed),
        progress=False, env_factory=lambda: CorridorEnv(20))
    a, b = _stable(seq), _stable(par)
    assert [r["index"] for r in b] == list(range(18))
    assert a == b  # outcome, steps, recall items and scores, usage: game for game
    assert 0 < sum(r["success"] for r in b if r["phase"] == "frozen") < 12  # varied games
    assert any(r["recall"]["items"] for r in b if r["phase"] == "frozen")
    assert _trajectories(seq) == _trajectories(par)
    assert (seq / "bank-frozen.db").read_bytes() == (seq / "bank.db").read_bytes()


def test_an_environment_object_needs_a_factory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env_factory"):
        run(_config(tmp_path / "r", 3), env=CorridorEnv(20), llm=ScriptedLLM(), progress=False)


def test_concurrency_does_not_change_what_a_run_is(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "r", 1, episodes=4)
    run(cfg, env=CorridorEnv(20), llm=ScriptedLLM(responder=_hashed), progress=False)
    first = _stable(tmp_path / "r")
    more = _config(tmp_path / "r", 4, episodes=8)
    with pytest.raises(ConfigError, match="episodes"):  # episodes still count, N does not
        run(more, env=CorridorEnv(20), llm=ScriptedLLM(responder=_hashed), progress=False,
            env_factory=lambda: CorridorEnv(20))
    run(_config(tmp_path / "r", 4, episodes=4), env=CorridorEnv(20),
        llm=ScriptedLLM(responder=_hashed), progress=False, env_factory=lambda: CorridorEnv(20))
    assert _stable(tmp_path / "r") == first


def _storm(index: int) -> str:
    return "429" if 35 <= index < 75 else "ok"  # 40 requests in a row are rate limited


def test_through_a_slow_server_in_a_429_storm_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    opts = {"backoff": 0.001, "max_retries": 2, "timeout": 10}
    walls, stables = [], []
    for n, plan in ((1, ()), (4, _storm)):
        with FaultServer(plan, answer=hashed_answer, delay=0.02, retry_after=0.02) as s:
            cfg = _config(tmp_path / f"n{n}", n, llm="openai:fault",
                          llm_options={**opts, "base_url": s.url})
            t0 = time.perf_counter()
            run(cfg, env=CorridorEnv(20), progress=False, env_factory=lambda: CorridorEnv(20))
            walls.append(time.perf_counter() - t0)
            stables.append([{k: v for k, v in r.items() if k != "usage"}
                            for r in _stable(tmp_path / f"n{n}")])
            if n > 1:
                assert s.count("429") == 40
                recs = read_episodes(tmp_path / f"n{n}" / "episodes.jsonl")
                assert sum(c.get("retries", 0) for r in recs for c in r["usage"].values()) == 40
    assert stables[0] == stables[1]  # every game, same outcome, none lost
    assert len([r for r in stables[1] if r["phase"] == "frozen"]) == 12


def test_the_cli_takes_concurrency() -> None:
    from typer.testing import CliRunner

    from deltamem.bench import load_config
    from deltamem.cli import app

    assert load_config(None, run_dir="r", concurrency=6).concurrency == 6
    res = CliRunner().invoke(app, ["run", "--help"])
    assert "--concurrency" in res.output
