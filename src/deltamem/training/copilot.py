"""The MCMA memory copilot: SFT then DPO training (§3.3, Eq. 7) of a small causal LM on
CPU, and the trained copilot as an LLM client (:func:`load_copilot`).

Run directory layout (everything resumable; ``run_dir`` is the only state)::

    run_dir/
      base_model.txt                 the base model folder used
      pairs.jsonl                    preference data set (:class:`~.utility.PairDataset`)
      <role>/split.json              train / held-out trajectory keys (by seed)
      <role>/sft/checkpoint-*/       SFT LoRA checkpoints; sft/final (adapter), sft/merged
      <role>/dpo/checkpoint-*/       DPO LoRA checkpoints (reference = the SFT model)
      <role>/dpo/final/              the trained copilot's adapter
      <role>/metrics.json            held-out DPO loss / accuracy before and after, timings
      <role>/curves.png              training and held-out loss curves

Roles are trained separately (success-summary and failure-reflection copilots). SFT
fits the preferred answers (prompt → chosen) with LoRA; its adapter is merged and the
merged model is both the DPO policy's starting point and its frozen reference. DPO
(TRL's ``DPOTrainer``, sigmoid loss = Eq. 7 with the reference log-ratio) trains a fresh
LoRA adapter. The held-out pairs come from trajectories never trained on (split by a
seeded hash of the trajectory key). Seeds fix data order, LoRA init and dropout; an
interrupted stage resumes from its last checkpoint.

Needs ``pip install 'deltamem[mcma]'``; runs on CPU (``use_cpu``), threads capped.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from deltamem.errors import ConfigError
from deltamem.llm.base import LLMClient
from deltamem.llm.factory import make_llm
from deltamem.memories.mcma.prompts import SYSTEM
from deltamem.memories.mcma.utility import PairDataset
from deltamem.training.gguf_export import export_gguf
from deltamem.training.hf import TransformersLLM, base_model_dir, copilot_files

__all__ = [
    "TrainConfig",
    "load_copilot",
    "plot_curves",
    "random_adapter_run",
    "split_keys",
    "train_copilot",
]



@dataclass(frozen=True)
class TrainConfig:
    """Training settings (defaults sized for a few minutes on 2 CPU cores)."""

    seed: int = 0
    sft_steps: int = 20
    dpo_steps: int = 30
    sft_lr: float = 2e-4
    dpo_lr: float = 5e-5
    beta: float = 0.1
    lora_r: int = 8
    lora_alpha: int = 16
    max_length: int = 1024
    batch_size: int = 2
    heldout_frac: float = 0.25
    eval_every: int = 10
    threads: int = 2
    max_heldout: int = 24
    #: adapt only the top N layers (None: all); backward then stops there, which is what
    #: makes CPU steps affordable
    lora_layers: int | None = 6
    #: evaluate the held-out pairs before DPO (else record log 2, exact at step 0)
    eval_before: bool = True


def split_keys(keys: Sequence[str], frac: float, seed: int) -> tuple[set[str], set[str]]:
    """(train, held-out) trajectory keys by a seeded hash: stable, independent of order."""
    if not 0.0 < frac < 1.0:
        raise ConfigError(f"heldout_frac must be in (0, 1), got {frac}")
    held = {k for k in keys
            if int(hashlib.sha256(f"{seed}/{k}".encode()).hexdigest()[:8], 16) / 2**32 < frac}
    return set(keys) - held, held


def _conv(rows: Sequence[dict[str, Any]], sft: bool) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": r["prompt"]}]
        if sft:
            out.append({"prompt": prompt,
                        "completion": [{"role": "assistant", "content": r["chosen"]}]})
        else:
            out.append({"prompt": prompt,
                        "chosen": [{"role": "assistant", "content": r["chosen"]}],
                        "rejected": [{"role": "assistant", "content": r["rejected"]}]})
    return out


def _lengths(tok: Any, conv: dict[str, Any]) -> tuple[int, int]:
    """Tokens of a pair's chat prompt and of its longer answer."""
    prompt = tok.apply_chat_template(conv["prompt"], add_generation_prompt=True,
                                     tokenize=False)
    answer = max(len(tok(m["content"], add_special_tokens=False)["input_ids"])
                 for m in (conv["chosen"][0], conv["rejected"][0]))
    return len(tok(prompt, add_special_tokens=False)["input_ids"]), answer + 1


def _last_checkpoint(d: Path) -> str | None:
    cks = sorted(d.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return str(cks[-1]) if cks else None


def _lora(cfg: TrainConfig, n_layers: int) -> Any:
    from peft import LoraConfig

    layers = None
    if cfg.lora_layers and cfg.lora_layers < n_layers:
        layers = list(range(n_layers - cfg.lora_layers, n_layers))
    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.05,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      layers_to_transform=layers, task_type="CAUSAL_LM")


def train_copilot(run_dir: str | Path, role: str, cfg: TrainConfig = TrainConfig(), *,
                  base: str | Path | None = None, log: Any = print) -> dict[str, Any]:
    """Train the ``role`` copilot from ``run_dir/pairs.jsonl``; returns its metrics."""
    try:
        import torch
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer
    except ImportError as e:
        raise ConfigError(f"copilot training needs: pip install 'deltamem[mcma]' ({e})") from e
    run = Path(run_dir)
    out = run / role
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    base_dir = Path(base) if base else base_model_dir()
    (run / "base_model.txt").write_text(str(base_dir) + "\n")
    rows = PairDataset(run / "pairs.jsonl").pairs(role)
    if not rows:
        raise ConfigError(f"no {role} pairs in {run / 'pairs.jsonl'}")
    train_keys, held_keys = split_keys(sorted({r["key"] for r in rows}), cfg.heldout_frac,
                                       cfg.seed)
    (out / "split.json").write_text(json.dumps({"train": sorted(train_keys),
                                                "heldout": sorted(held_keys)}, indent=1))
    train_rows = [r for r in rows if r["key"] in train_keys]
    held_rows = [r for r in rows if r["key"] in held_keys][: cfg.max_heldout]
    if not train_rows or not held_rows:
        raise ConfigError(f"{role}: {len(train_rows)} training and {len(held_rows)} held-out "
                          "pairs; need both (collect more trajectories)")
    log(f"[{role}] {len(train_rows)} training pairs, {len(held_rows)} held-out pairs")
    tok = AutoTokenizer.from_pretrained(base_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    common = dict(seed=cfg.seed, data_seed=cfg.seed, use_cpu=True, report_to=[],
                  per_device_train_batch_size=cfg.batch_size,
                  per_device_eval_batch_size=cfg.batch_size, logging_steps=1,
                  save_strategy="steps", save_steps=cfg.eval_every, save_total_limit=2,
                  dataloader_num_workers=0, disable_tqdm=True)
    timings: dict[str, float] = {}
    # TRL drops a pair whose prompt alone fills max_length: an empty set must stop here,
    # with the reason, not deep inside the trainer. A pair whose answer is cut at
    # max_length teaches the copilot an answer that never ends (its JSON is never
    # closed), so those are counted and reported.
    cut: dict[str, int] = {}
    for what, part in (("training", train_rows), ("held-out", held_rows)):
        lengths = [_lengths(tok, c) for c in _conv(part, sft=False)]
        if not any(p < cfg.max_length for p, _ in lengths):
            raise ConfigError(f"no {what} {role} pair fits max_length={cfg.max_length} "
                              f"tokens (of {len(part)}); raise max_length or collect "
                              "shorter trajectories")
        cut[what] = sum(1 for p, a in lengths if p + a > cfg.max_length)
        if cut[what]:
            longest = max(p + a for p, a in lengths)
            log(f"[{role}] warning: {cut[what]} of {len(part)} {what} pairs are cut at "
                f"max_length={cfg.max_length} (longest {longest} tokens); the copilot "
                "does not learn how those answers end")

    # -- SFT ------------------------------------------------------------------------------
    sft_dir = out / "sft"
    merged = sft_dir / "merged"
    if not (merged / "config.json").exists():
        t0 = time.time()
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        sft = SFTTrainer(
            model=model, processing_class=tok,
            peft_config=_lora(cfg, model.config.num_hidden_layers),
            train_dataset=Dataset.from_list(_conv(train_rows, sft=True)),
            args=SFTConfig(output_dir=str(sft_dir), max_steps=cfg.sft_steps,
                           learning_rate=cfg.sft_lr, max_length=cfg.max_length, **common))
        sft.train(resume_from_checkpoint=_last_checkpoint(sft_dir))
        sft.model.save_pretrained(sft_dir / "final")
        m = sft.model.merge_and_unload()
        m.save_pretrained(merged)
        tok.save_pretrained(merged)
        (sft_dir / "log_history.json").write_text(json.dumps(sft.state.log_history))
        timings["sft_s"] = round(time.time() - t0, 1)
        del sft, model, m

    # -- DPO ------------------------------------------------------------------------------
    t0 = time.time()
    dpo_dir = out / "dpo"
    torch.manual_seed(cfg.seed)
    policy = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32)
    dpo = DPOTrainer(
        model=policy, processing_class=tok,
        peft_config=_lora(cfg, policy.config.num_hidden_layers),
        train_dataset=Dataset.from_list(_conv(train_rows, sft=False)),
        eval_dataset=Dataset.from_list(_conv(held_rows, sft=False)),
        args=DPOConfig(output_dir=str(dpo_dir), max_steps=cfg.dpo_steps,
                       learning_rate=cfg.dpo_lr, beta=cfg.beta, max_length=cfg.max_length,
                       eval_strategy="steps", eval_steps=cfg.eval_every, **common))
    resume = _last_checkpoint(dpo_dir)
    before_path = out / "heldout_before.json"
    if before_path.exists() and "eval_loss" in json.loads(before_path.read_text()):
        before = json.loads(before_path.read_text())
    elif cfg.eval_before:
        before = dpo.evaluate()
        before_path.write_text(json.dumps(before))
    else:
        # LoRA's B matrices start at zero, so at step 0 the policy IS the reference and
        # every pair's DPO loss is log 2 (the slow test checks this against evaluate())
        before = {"eval_loss": math.log(2.0), "analytic": True}
        before_path.write_text(json.dumps(before))
    log(f"[{role}] held-out before DPO: loss {before.get('eval_loss'):.4f}")
    dpo.train(resume_from_checkpoint=resume)
    after = dpo.evaluate()
    dpo.model.save_pretrained(dpo_dir / "final")
    (dpo_dir / "log_history.json").write_text(json.dumps(dpo.state.log_history))
    timings["dpo_s"] = round(time.time() - t0, 1)
    metrics = {
        "role": role, "config": asdict(cfg), "base_model": str(base_dir),
        "pairs": {"train": len(train_rows), "heldout": len(held_rows),
                  "cut_at_max_length": cut},
        "heldout_before": before, "heldout_after": after, "timings": timings,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    plot_curves(dpo.state.log_history, before, out / "curves.png", role)
    log(f"[{role}] held-out after DPO: loss {after.get('eval_loss'):.4f}")
    return metrics


def plot_curves(history: Sequence[dict[str, Any]], before: dict[str, Any], path: Path,
                title: str) -> None:
    """Training loss per step and held-out loss per evaluation (step 0 = before DPO)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(h["step"], h["loss"]) for h in history if "loss" in h and "step" in h]
    held = [(0, before.get("eval_loss"))] + [(h["step"], h["eval_loss"]) for h in history
                                              if "eval_loss" in h]
    fig, ax = plt.subplots(figsize=(6, 4))
    if train:
        ax.plot(*zip(*train, strict=True), label="train DPO loss", alpha=0.6)
    ax.plot(*zip(*held, strict=True), "o-", label="held-out DPO loss")
    ax.set_xlabel("DPO step")
    ax.set_ylabel("loss")
    ax.set_title(f"MCMA {title} copilot")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the trained copilot as an LLM ---------------------------------------------------------


def load_copilot(run_dir: str | Path, role: str, *, threads: int | None = None,
                 backend: Literal["gguf", "transformers"] = "gguf") -> LLMClient:
    """The trained ``role`` (``success``/``failure``) copilot of a training run (§3.3), as
    the memory's copilot LLM (§3.4).

    ``backend="gguf"`` (default): exported once by
    :func:`~deltamem.training.gguf_export.export_gguf` and run by llama.cpp (the ``local:PATH``
    backend of :func:`~deltamem.llm.factory.make_llm`; answer schema enforced by grammar).
    ``"transformers"``: :class:`~deltamem.training.hf.TransformersLLM` on the base +
    adapter (free generation; callers validate every answer).

    The memory reaches it by name, as the LLM spec ``copilot:RUN_DIR`` (MCMA's
    ``copilot_model`` option).
    """
    run = Path(run_dir)
    name = f"copilot:{run.name}/{role}"
    if backend == "transformers":
        base, adapter = copilot_files(run, role)
        return TransformersLLM(base, adapter, threads=threads, name=name)
    if backend != "gguf":
        raise ConfigError(f"unknown copilot backend {backend!r}; choose gguf or transformers")

    llm = make_llm("local", model_path=export_gguf(run, role), n_threads=threads)
    llm.name = name
    return llm


def random_adapter_run(run_dir: str | Path, role: str = "success", *, layers: int = 2,
                       seed: int = 0, std: float = 0.2, rank: int = 8) -> Path:
    """A stand-in training run for tests and benchmarks: a LoRA adapter (rank ``rank``, on
    q/k/v/o of the top ``layers`` layers of :func:`base_model_dir`, as :func:`train_copilot`
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
