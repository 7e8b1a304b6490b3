"""Copilot training (SFT + DPO) and the transformers backend, on a tiny random model.

Slow; skipped without torch/transformers/trl/peft. The tiny model uses the tokenizer of
the bundled SmolLM2 (converted once by ``base_model_dir``), so the chat template and the
data path are the real ones; only the network is small.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from deltamem.errors import ConfigError
    from deltamem.training.hf import base_model_dir

    try:
        real = base_model_dir()
    except ConfigError as e:
        pytest.skip(f"no bundled SmolLM2: {e}")
    tok = AutoTokenizer.from_pretrained(real)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=2048, tie_word_embeddings=True,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    d = tmp_path_factory.mktemp("tiny")
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _pairs(run, n=12):
    from deltamem.memories.mcma.utility import PairDataset

    ds = PairDataset(run / "pairs.jsonl")
    for k in range(n):
        ds.add(f"t{k}", [{"role": "success", "prompt": f"Task {k}: summarise.",
                          "chosen": '{"knowledge": []}', "rejected": "no json at all",
                          "gap": 1.0, "s_chosen": 1.0, "s_rejected": 0.0}], {"role": "success"})


def test_sft_dpo_run_is_complete_resumable_and_seeded(tmp_path, tiny_base) -> None:
    from deltamem.training.copilot import TrainConfig, train_copilot

    cfg = TrainConfig(seed=3, sft_steps=2, dpo_steps=3, eval_every=2, max_length=128,
                      heldout_frac=0.3, batch_size=2)
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        _pairs(run)
        runs.append(train_copilot(run, "success", cfg, base=tiny_base, log=lambda *_: None))
    out = tmp_path / "a" / "success"
    for p in ("split.json", "sft/final", "sft/merged/config.json", "dpo/final",
              "metrics.json", "curves.png", "heldout_before.json"):
        assert (out / p).exists(), p
    a, b = runs
    assert a["pairs"] == b["pairs"] and a["pairs"]["heldout"] >= 1
    # same seed, same data: same held-out losses
    assert a["heldout_before"]["eval_loss"] == pytest.approx(b["heldout_before"]["eval_loss"])
    assert a["heldout_after"]["eval_loss"] == pytest.approx(b["heldout_after"]["eval_loss"],
                                                            rel=1e-4)
    # before DPO the policy is the reference: the DPO loss is log 2
    assert a["heldout_before"]["eval_loss"] == pytest.approx(0.6931, abs=1e-3)
    # resume: the SFT stage is not redone (its merged model is reused)
    stamp = (out / "sft" / "merged" / "config.json").stat().st_mtime
    train_copilot(tmp_path / "a", "success", cfg, base=tiny_base, log=lambda *_: None)
    assert (out / "sft" / "merged" / "config.json").stat().st_mtime == stamp
    assert json.loads((out / "metrics.json").read_text())["role"] == "success"
    # the trained copilot serves MCMA through the LLM interface; the tiny random model
    # writes no valid memory: its answer is rejected and logged, never stored
    from deltamem.embed import HashingEmbedder
    from deltamem.memories.mcma.memory import MCMA
    from deltamem.testing import make_episode
    from deltamem.training.copilot import load_copilot

    # a tiny random model has no GGUF counterpart: it runs on the transformers backend
    llm = load_copilot(tmp_path / "a", "success", threads=1, backend="transformers")
    assert llm.name.endswith("a/success")
    mem = MCMA.open(embedder=HashingEmbedder(), mode="llm", llm=llm, max_tokens=64,
                    copilot_model=str(tmp_path / "a"), copilot_backend="transformers")
    kinds = [c.kind for c in mem.learn(make_episode(episode_id="x"))]
    assert kinds == ["written", "rejected"]
    assert mem.stats()["levels"]["h1"] == 0 and mem.stats()["rejections"] == 1


def test_no_pairs_is_a_config_error(tmp_path, tiny_base) -> None:
    from deltamem.errors import ConfigError
    from deltamem.training.copilot import train_copilot

    with pytest.raises(ConfigError, match="no failure pairs"):
        train_copilot(tmp_path, "failure", base=tiny_base)


def test_transformers_backend_choices_and_copilot_loading(tmp_path, tiny_base) -> None:
    from deltamem.errors import ConfigError
    from deltamem.training.copilot import load_copilot
    from deltamem.training.hf import TransformersLLM

    llm = TransformersLLM(tiny_base, threads=1)
    out = llm.complete([{"role": "user", "content": "pick"}], purpose="act",
                       choices=["turn left", "move forward"])
    assert out.text in ("turn left", "move forward")
    free = llm.complete([{"role": "user", "content": "hi"}], purpose="abstract", max_tokens=4)
    assert free.completion_tokens <= 4 and llm.usage.by_purpose["abstract"].calls == 1
    with pytest.raises(ConfigError, match="no trained failure copilot"):
        load_copilot(tmp_path, "failure")


def test_held_out_pairs_longer_than_max_length_are_a_config_error(tmp_path, tiny_base) -> None:
    """TRL drops pairs whose prompt fills ``max_length``; an empty held-out set must stop
    the run with a reason, not end in a missing loss."""
    from deltamem.errors import ConfigError
    from deltamem.memories.mcma.utility import PairDataset
    from deltamem.training.copilot import TrainConfig, train_copilot

    ds = PairDataset(tmp_path / "pairs.jsonl")
    long = "go to the shelf and look around. " * 80
    for k in range(8):
        ds.add(f"t{k}", [{"role": "success", "prompt": f"Task {k}: {long}",
                          "chosen": '{"knowledge": []}', "rejected": "no json",
                          "gap": 1.0, "s_chosen": 1.0, "s_rejected": 0.0}], {"role": "success"})
    cfg = TrainConfig(sft_steps=1, dpo_steps=1, max_length=32, heldout_frac=0.5, batch_size=1)
    with pytest.raises(ConfigError, match="success pair fits max_length=32 tokens"):
        train_copilot(tmp_path, "success", cfg, base=tiny_base, log=lambda *_: None)
