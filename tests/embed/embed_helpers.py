"""Helpers for the embedder tests: a tiny random BERT in sentence-transformers layout."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

TINY_WORDS = [
    "the", "cat", "dog", "sits", "on", "mat", "rug", "apple", "fridge", "put",
    "in", "go", "north", "south", "open", "door", "red", "blue", "box", "key",
]  # fmt: skip


def write_tiny_bert(
    folder: Path,
    *,
    seed: int = 0,
    layers: int = 2,
    pooling: str = "mean",
    modules: list[str] | None = None,
    max_seq_length: int = 32,
) -> Path:
    """A random 384-wide BERT in sentence-transformers layout (word-level vocab).

    Small (vocab 25, intermediate 64, 32 positions) so tests run without the
    bundled model; the forward pass is the same code.
    """
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])}
    for w in TINY_WORDS:
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.enable_padding(length=16)  # like the real file: padding pinned, must be undone
    tok.save(str(folder / "tokenizer.json"))

    hidden, inter, n_pos = 384, 64, 32
    cfg = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": 12,
        "num_hidden_layers": layers,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": n_pos,
        "type_vocab_size": 2,
        "vocab_size": len(vocab),
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    mods = modules or [
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.models.Normalize",
    ]
    (folder / "modules.json").write_text(
        json.dumps([{"idx": i, "name": str(i), "type": t} for i, t in enumerate(mods)])
    )
    (folder / "1_Pooling").mkdir(exist_ok=True)
    flags = {f"pooling_mode_{m}_tokens": m == pooling for m in ("mean", "max")}
    flags["pooling_mode_cls_token"] = pooling == "cls"
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(flags))
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False})
    )

    rng = np.random.default_rng(seed)

    def r(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": r(len(vocab), hidden, scale=0.5),
        "embeddings.position_embeddings.weight": r(n_pos, hidden, scale=0.5),
        "embeddings.token_type_embeddings.weight": r(2, hidden, scale=0.5),
        "embeddings.LayerNorm.weight": 1 + r(hidden),
        "embeddings.LayerNorm.bias": r(hidden),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value"):
            w[p + name + ".weight"] = r(hidden, hidden, scale=0.2)
            w[p + name + ".bias"] = r(hidden)
        w[p + "attention.output.dense.weight"] = r(hidden, hidden)
        w[p + "attention.output.dense.bias"] = r(hidden)
        w[p + "attention.output.LayerNorm.weight"] = 1 + r(hidden)
        w[p + "attention.output.LayerNorm.bias"] = r(hidden)
        w[p + "intermediate.dense.weight"] = r(inter, hidden, scale=0.3)
        w[p + "intermediate.dense.bias"] = r(inter)
        w[p + "output.dense.weight"] = r(hidden, inter, scale=0.3)
        w[p + "output.dense.bias"] = r(hidden)
        w[p + "output.LayerNorm.weight"] = 1 + r(hidden)
        w[p + "output.LayerNorm.bias"] = r(hidden)
    save_file(w, str(folder / "model.safetensors"))
    return folder


def reference_embed(folder: Path, texts: list[str], max_length: int = 512) -> np.ndarray:
    """Plain float64 BERT, one sentence at a time, no padding, loops over heads.

    Written independently of the implementation: weights straight from the
    file, GELU with ``math.erf``, pooling read from the folder's config.
    """
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    cfg = json.loads((folder / "config.json").read_text())
    pool_cfg = json.loads((folder / "1_Pooling" / "config.json").read_text())
    st_cfg = json.loads((folder / "sentence_bert_config.json").read_text())
    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(min(max_length, st_cfg["max_seq_length"]))
    heads, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    verf = np.vectorize(math.erf)

    def ln(x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    def dense(x: np.ndarray, name: str) -> np.ndarray:
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    out = []
    for text in texts:
        ids = tok.encode(text).ids
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = ln(x, "embeddings.LayerNorm")
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q = dense(x, p + "attention.self.query")
            k = dense(x, p + "attention.self.key")
            v = dense(x, p + "attention.self.value")
            d = q.shape[1] // heads
            ctx = np.zeros_like(q)
            for h in range(heads):
                sl = slice(h * d, (h + 1) * d)
                s = q[:, sl] @ k[:, sl].T / math.sqrt(d)
                a = np.exp(s - s.max(1, keepdims=True))
                a /= a.sum(1, keepdims=True)
                ctx[:, sl] = a @ v[:, sl]
            x = ln(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            hmid = dense(x, p + "intermediate.dense")
            hmid = 0.5 * hmid * (1.0 + verf(hmid / math.sqrt(2.0)))
            x = ln(x + dense(hmid, p + "output.dense"), p + "output.LayerNorm")
        if pool_cfg.get("pooling_mode_cls_token"):
            v_ = x[0]
        elif pool_cfg.get("pooling_mode_max_tokens"):
            v_ = x.max(0)
        else:
            v_ = x.mean(0)
        out.append(v_ / np.linalg.norm(v_))
    return np.array(out)
