"""A trained copilot as a GGUF file for the project's llama.cpp backend (MCMA §3.3).

:func:`export_gguf` builds the file from the bundled Q4_1 GGUF without llama.cpp's
conversion script: every tensor the training left unchanged is copied as it is
(quantised bytes), the changed ones (LoRA's attention projections) are written in F32
as the de-quantised original plus the trained delta. The file runs on the local
backend (``make_llm("local:PATH")``), which enforces the copilot's answer schema
(recursive, ``$ref``) by grammar while decoding
(:func:`deltamem.llm.llama_prebuilt.inline_refs`).

Needs ``pip install deltamem[mcma]`` (torch, transformers, peft, gguf); running the file
also the local backend (``deltamem[local]``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.training.hf import base_model_dir, bundled_gguf, copilot_files

__all__ = ["export_gguf"]

_EXPORT_LOCK = threading.Lock()


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

    The weights are exactly those :func:`~deltamem.training.copilot.load_copilot` uses
    with ``backend="transformers"``
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
    source, ref_dir = bundled_gguf(), base_model_dir()
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
