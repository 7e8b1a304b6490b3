"""A thin engine over llama.cpp's C API as shipped prebuilt by ``llama-cpp-py-sync``.

``llama-cpp-py-sync`` bundles llama.cpp's shared libraries in its wheel and
exposes the C API of ``llama.h`` through CFFI (ABI mode). This module calls
that C API through the package's own handle (``get_lib()``/``get_ffi()``);
it implements only what :class:`~deltamem.llm.local.LocalLLM` needs:

* load a GGUF model and one context (``llama_model_load_from_file``,
  ``llama_init_from_model``), llama.cpp's logging silenced;
* tokenize and read token texts, the end-of-generation test, the model's chat
  template string;
* :meth:`PrebuiltEngine.logits_after`: next-token logits after a token list,
  decoding only what differs from the tokens already in the KV cache
  (``llama_memory_seq_rm`` trims the cache to the common prefix);
* :meth:`PrebuiltEngine.generate`: sampling with an optional GBNF grammar
  (``llama_sampler_init_grammar``), greedy at temperature 0.

The binding is generated from a moving upstream header, so the project pins
the package version it was measured with (:data:`PINNED_VERSION`) and
:func:`load_library` checks that every function used here is present before
anything is called, naming the installed version when one is missing.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.errors import ConfigError, LLMError, LLMUnavailableError

PACKAGE = "llama-cpp-py-sync"
"""PyPI distribution that ships llama.cpp prebuilt with its CFFI binding."""

PINNED_VERSION = "0.11739"
"""The version measured in ``benchmarks/local_llm.py`` and pinned by the ``local`` extra."""

INSTALL_HINT = (f"install it with: pip install 'deltamem[local]' "
                f"(pins {PACKAGE}=={PINNED_VERSION}, a prebuilt wheel; nothing compiles)")

REQUIRED_FUNCTIONS: tuple[str, ...] = (
    "llama_backend_init", "llama_log_set",
    "llama_model_default_params", "llama_model_load_from_file", "llama_model_free",
    "llama_context_default_params", "llama_init_from_model", "llama_free",
    "llama_model_get_vocab", "llama_vocab_n_tokens", "llama_vocab_is_eog",
    "llama_vocab_eos", "llama_vocab_eot", "llama_vocab_bos", "llama_vocab_get_text",
    "llama_model_chat_template", "llama_tokenize", "llama_token_to_piece",
    "llama_get_memory", "llama_memory_seq_rm", "llama_memory_clear",
    "llama_batch_get_one", "llama_decode", "llama_get_logits_ith", "llama_n_batch",
    "llama_model_quantize_default_params", "llama_model_quantize",
    "llama_sampler_chain_default_params", "llama_sampler_chain_init",
    "llama_sampler_chain_add", "llama_sampler_init_grammar", "llama_sampler_init_greedy",
    "llama_sampler_init_top_k", "llama_sampler_init_top_p", "llama_sampler_init_min_p",
    "llama_sampler_init_temp", "llama_sampler_init_dist", "llama_sampler_sample",
    "llama_sampler_free", "llama_sampler_apply", "llama_sampler_accept",
)
"""Every C function this module calls (checked at load time)."""

SAMPLING = {"top_k": 40, "top_p": 0.95, "min_p": 0.05}
"""Sampling filters for temperature > 0 (llama.cpp's and llama-cpp-python's defaults)."""

_LOG_CALLBACK: Any = None  # keeps the CFFI callback alive for the process


FLASH_ATTN_DISABLED, FLASH_ATTN_ENABLED = 0, 1
"""``llama_flash_attn_type`` values (-1 is ``AUTO``, the library's default)."""


WEIGHT_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7}
"""Weight types :func:`requantize` can write (llama.cpp's ``enum llama_ftype`` values)."""


def requantize(src: Path, dst: Path, kind: str, *, threads: int = 1) -> None:
    """Write the model ``src`` with ``kind`` weights to ``dst``, by llama.cpp's own requantizer.

    ``allow_requantize`` is on: from an already quantized file the result carries that file's
    values (plus rounding), not the original model's.

    Raises:
        ConfigError: ``kind`` is not one of :data:`WEIGHT_TYPES`.
        LLMUnavailableError: the package or its library is missing.
        LLMError: llama.cpp refused (an unreadable source, a full disk).
    """
    if kind not in WEIGHT_TYPES:
        raise ConfigError(f"unknown weight type {kind!r}; choose one of "
                          + ", ".join(WEIGHT_TYPES))
    lib, ffi = load_library()
    params = lib.llama_model_quantize_default_params()
    params.ftype = WEIGHT_TYPES[kind]
    params.allow_requantize = True
    params.nthread = max(1, threads)
    rc = lib.llama_model_quantize(os.fsencode(str(src)), os.fsencode(str(dst)),
                                  ffi.new("llama_model_quantize_params *", params))
    if rc != 0:
        raise LLMError(f"llama.cpp ({PACKAGE} {installed_version()}) could not write {src} "
                       f"as {kind} to {dst} (code {rc})")


def installed_version() -> str | None:
    """The installed ``llama-cpp-py-sync`` version, or ``None``."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def missing_functions(lib: Any, names: Sequence[str] = REQUIRED_FUNCTIONS) -> list[str]:
    """The names in ``names`` that ``lib`` does not export."""
    missing = []
    for name in names:
        try:
            getattr(lib, name)
        except AttributeError:
            missing.append(name)
    return missing


def load_library() -> tuple[Any, Any]:
    """``(lib, ffi)`` of the installed package, checked to answer :data:`REQUIRED_FUNCTIONS`.

    Raises:
        LLMUnavailableError: the package is missing, its library cannot be
            loaded, or it lacks a function used here (the message names the version).
    """
    version = installed_version()
    try:
        from llama_cpp_py_sync import _cffi_bindings as bindings
    except ImportError as e:
        raise LLMUnavailableError(f"the {PACKAGE!r} package is missing; {INSTALL_HINT}") from e
    try:
        ffi = bindings.get_ffi()
        if _glibc_version() < (2, 38):
            lib = ffi.dlopen(str(_compat_library(bindings, version)))
        else:
            lib = bindings.get_lib()
    except (RuntimeError, OSError, ValueError) as e:
        raise LLMUnavailableError(
            f"{PACKAGE} {version}: its llama.cpp library did not load ({e}); {INSTALL_HINT}"
        ) from e
    missing = missing_functions(lib)
    if missing:
        raise LLMUnavailableError(
            f"{PACKAGE} {version} lacks llama.cpp functions deltamem uses "
            f"({', '.join(missing)}); deltamem was measured with {PACKAGE}=={PINNED_VERSION}: "
            + INSTALL_HINT
        )
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        _LOG_CALLBACK = ffi.callback("void(enum ggml_log_level, const char *, void *)",
                                     lambda level, text, data: None)
        lib.llama_log_set(_LOG_CALLBACK, ffi.NULL)
        lib.llama_backend_init()
    return lib, ffi


def _glibc_version() -> tuple[int, ...]:
    """The C library's version, e.g. ``(2, 36)``; ``(99,)`` when it is not glibc."""
    try:
        name, _, ver = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (ValueError, OSError, AttributeError):
        return (99,)
    if name != "glibc":
        return (99,)
    return tuple(int(x) for x in ver.split(".")[:2] if x.isdigit())


_LIBS = ("libllama.so", "libggml.so.0", "libggml-base.so.0", "libggml-cpu.so.0",
         "libggml-rpc.so.0")


def _compat_library(bindings: Any, version: str | None) -> Path:
    """A copy of the package's libraries re-linked for glibc < 2.38 (cached); its libllama.

    The wheel's libraries need glibc 2.38 only for four C23 ``strto*``/``sscanf``
    entry points; :func:`deltamem.llm.elf_compat.relink_c23` binds them to their
    classic versions in a copy under ``$XDG_CACHE_HOME/deltamem`` (or ``~/.cache``),
    made once per package version; the installed package is left untouched.
    """
    from deltamem.llm.elf_compat import relink_c23
    from deltamem.paths import user_cache_dir

    src = Path(bindings.__file__).parent
    cache = user_cache_dir()
    target = cache / f"{PACKAGE}-{version}-glibc2.2.5"
    if (target / _LIBS[0]).is_file():
        return target / _LIBS[0]
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=cache))
    try:
        for name in _LIBS:
            if (src / name).is_file():
                out = tmp / name
                out.write_bytes(relink_c23((src / name).read_bytes()))
                out.chmod(0o755)
        try:
            tmp.rename(target)
        except OSError:  # another process made it first
            if not (target / _LIBS[0]).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target / _LIBS[0]


def json_schema_grammar(schema: Mapping[str, Any]) -> str:
    """A GBNF grammar for ``schema``, by the package's own converter.

    The converter covers objects, arrays (``minItems``/``maxItems``), strings
    (``minLength``/``maxLength``), ``enum``/``const``, ``anyOf``/``oneOf`` and
    the scalar types. Numeric bounds and string formats/patterns are not
    grammar-enforced: an integer with ``minimum`` and ``maximum`` at most 100
    apart becomes an ``enum`` of its values; other numeric bounds, ``format``,
    ``pattern`` and the bounds on an object's keys (``minProperties``,
    ``maxProperties``, ``propertyNames``) are dropped here, and a map with free keys
    and typed values (``additionalProperties: {schema}``) admits any JSON object
    (callers validate the parsed output against the full schema anyway).

    Local ``$ref`` s (``#/$defs/Name``, as pydantic writes for nested and recursive
    models) are inlined first by :func:`inline_refs`: a recursive schema becomes a
    grammar for values nested at most :data:`MAX_REF_DEPTH` recursive definitions
    deep. Each schema is compiled once per process.

    Raises:
        ConfigError: the schema uses a construct the converter rejects (a remote
            ``$ref``, ...).
    """
    try:
        # not sort_keys: the converter writes properties in the schema's order, and a
        # grammar in alphabetical order made a trained copilot write keys in an order it
        # never saw (its answers ran to the token cap)
        key = json.dumps(schema)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"cannot compile a grammar for this schema: {e}") from e
    return _compiled_grammar(key)


@functools.lru_cache(maxsize=64)
def _compiled_grammar(key: str) -> str:
    """The grammar of one schema (JSON text), compiled once per process."""
    schema = json.loads(key)
    try:
        from llama_cpp_py_sync.constraints import response_format_to_grammar
    except ImportError as e:
        raise LLMUnavailableError(f"the {PACKAGE!r} package is missing; {INSTALL_HINT}") from e
    try:
        flat = inline_refs(schema)
        if flat is None:
            raise ValueError("the schema admits no value once its recursion is bounded")
        grammar = response_format_to_grammar(
            {"type": "json_schema", "json_schema": {"schema": _grammar_schema(flat)}})
    except (ValueError, TypeError) as e:
        raise ConfigError(f"cannot compile a grammar for this schema: {e}") from e
    assert grammar is not None
    return grammar


MAX_REF_DEPTH = 7
"""Recursive definitions one path through a schema may unroll in :func:`inline_refs`: 7
covers MCMA's nested memories (a tree of sub-goal nodes with chain leaves) and keeps the
grammar, which the converter builds per path, small (about 50 kB, compiled in < 1 s)."""


def _ref_name(ref: str, defs: Mapping[str, Any]) -> str:
    name = ref.rsplit("/", 1)[-1]
    if not ref.startswith(("#/$defs/", "#/definitions/")) or name not in defs:
        raise ValueError(f"unsupported $ref {ref!r} (only local #/$defs/ names)")
    return name


def _refs_in(node: Any) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
        elif isinstance(n, Mapping):
            if isinstance(n.get("$ref"), str):
                out.add(n["$ref"].rsplit("/", 1)[-1])
            stack.extend(v for k, v in n.items() if k != "$ref")
    return out


def inline_refs(schema: Any, *, max_depth: int = MAX_REF_DEPTH) -> Any:
    """``schema`` with every local ``$ref`` replaced by its ``$defs`` entry.

    Pydantic writes nested and recursive models this way; the GBNF converter takes
    none. A *recursive* definition (one that can reach itself) is unrolled at most
    ``max_depth`` times along any path: past that, an ``anyOf``/``oneOf`` alternative
    that needs it is dropped, an optional property that needs it is left out, and an
    array whose items need it must be empty. ``None`` means no finite value is left (a
    required part needs the cut). ``discriminator`` hints (OpenAPI) are dropped. The
    result admits a subset of what ``schema`` admits: every value nested at most
    ``max_depth`` recursive definitions deep.

    Raises:
        ValueError: a ``$ref`` that is not a local definition.
    """
    if not isinstance(schema, Mapping):
        return schema
    defs = dict(schema.get("$defs") or schema.get("definitions") or {})
    graph = {k: _refs_in(v) for k, v in defs.items()}
    recursive = set()
    for name in defs:
        seen: set[str] = set()
        stack = list(graph[name])
        while stack:
            x = stack.pop()
            if x not in seen and x in graph:
                seen.add(x)
                stack.extend(graph[x])
        if name in seen:
            recursive.add(name)

    def walk(node: Any, budget: int) -> Any:
        if isinstance(node, list):
            return [walk(x, budget) for x in node]
        if not isinstance(node, Mapping):
            return node
        if "$ref" in node:
            name = _ref_name(str(node["$ref"]), defs)
            if name in recursive:
                if budget == 0:
                    return None
                budget -= 1
            target = walk(defs[name], budget)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if target is None or not rest:
                return target
            merged = walk(rest, budget)
            return None if merged is None else {**target, **merged}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions", "discriminator"):
                continue
            if key in ("anyOf", "oneOf") and isinstance(value, list):
                alts = [a for a in (walk(v, budget) for v in value) if a is not None]
                if not alts:
                    return None
                out[key] = alts
            elif key == "properties" and isinstance(value, Mapping):
                props = {}
                for name, sub in value.items():
                    flat = walk(sub, budget)
                    if flat is None:
                        if name in node.get("required", ()):
                            return None
                        continue
                    props[name] = flat
                out[key] = props
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                flat = walk(value, budget)
                if flat is not None:
                    out[key] = flat
                elif key == "additionalProperties":
                    out[key] = False
                elif node.get("minItems", 0):
                    return None
                else:
                    out[key] = {}
                    out["maxItems"] = 0
            elif key in ("enum", "const", "required"):
                out[key] = value
            elif not (key == "maxItems" and out.get("maxItems") == 0):
                out[key] = walk(value, budget)
        return out

    return walk(schema, max_depth)


_DROPPED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
            "format", "pattern", "minProperties", "maxProperties", "propertyNames")
_MAX_INT_ENUM = 100


def _grammar_schema(schema: Any) -> Any:
    """``schema`` with the bounds the GBNF converter rejects rewritten or dropped (recursive)."""
    if isinstance(schema, list):
        return [_grammar_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _grammar_schema(v) if k not in ("enum", "const") else v
           for k, v in schema.items() if k not in _DROPPED}
    if "properties" in schema and isinstance(schema["properties"], Mapping):
        out["properties"] = {k: _grammar_schema(v) for k, v in schema["properties"].items()}
    if isinstance(schema.get("additionalProperties"), Mapping) and not schema.get("properties"):
        # a map with free keys: the converter has no rule for typed values, so the grammar
        # admits any JSON object there (the caller's validation checks the values)
        out["additionalProperties"] = True
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if (schema.get("type") == "integer" and "enum" not in schema
            and isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo <= _MAX_INT_ENUM):
        out.pop("type")
        out["enum"] = list(range(lo, hi + 1))
    return out


class PrebuiltEngine:
    """One GGUF model and one context, driven through ``llama-cpp-py-sync``'s C API.

    Not thread-safe: the caller serialises calls (``LocalLLM`` holds a lock).
    """

    def __init__(self, path: Path, *, n_ctx: int, n_threads: int,
                 extra_buffer_types: bool = False, flash_attn: bool | None = None,
                 n_ubatch: int | None = None) -> None:
        lib, ffi = load_library()
        self.lib, self.ffi = lib, ffi
        self.version = installed_version()
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        mparams.use_extra_bufts = extra_buffer_types
        model = lib.llama_model_load_from_file(os.fsencode(path), mparams)
        if model == ffi.NULL:
            raise LLMError(f"llama.cpp ({PACKAGE} {self.version}) could not load {path}")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        if flash_attn is not None:  # None: llama.cpp decides (its "auto": on, on CPU)
            cparams.flash_attn_type = FLASH_ATTN_ENABLED if flash_attn else FLASH_ATTN_DISABLED
        if n_ubatch is not None:  # None: llama.cpp's default (512 tokens)
            cparams.n_ubatch = n_ubatch
        ctx = lib.llama_init_from_model(model, cparams)
        if ctx == ffi.NULL:
            lib.llama_model_free(model)
            raise LLMError(f"llama.cpp could not create a context of n_ctx={n_ctx} for {path}")
        self.model, self.ctx = model, ctx
        self.vocab = lib.llama_model_get_vocab(model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.n_ctx = n_ctx
        self._n_batch = max(1, int(lib.llama_n_batch(ctx)))
        self._memory = lib.llama_get_memory(ctx)
        self._cached: list[int] = []  # tokens whose K/V sit in sequence 0, in order

    def set_threads(self, n: int) -> None:
        """Decode with ``n`` threads from the next call on (prompt batches too)."""
        self.lib.llama_set_n_threads(self.ctx, n, n)

    def close(self) -> None:
        """Free the context and the model (idempotent)."""
        if getattr(self, "ctx", None) is not None:
            self.lib.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None) is not None:
            self.lib.llama_model_free(self.model)
            self.model = None

    def __del__(self) -> None:
        self.close()

    # -- vocabulary ------------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokens of ``text`` (no BOS added); ``special`` parses ``<|im_start|>``-style tokens."""
        data = text.encode("utf-8")
        cap = len(data) + 8
        for _ in range(2):
            buf = self.ffi.new("llama_token[]", cap)
            n = self.lib.llama_tokenize(self.vocab, data, len(data), buf, cap, False, special)
            if n >= 0:
                return list(buf[0:n])
            cap = -n
        raise LLMError(f"llama_tokenize failed for a text of {len(data)} bytes")

    def piece(self, token: int) -> bytes:
        """The bytes ``token`` stands for (special tokens rendered empty)."""
        cap = 64
        for _ in range(2):
            buf = self.ffi.new("char[]", cap)
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, cap, 0, False)
            if n >= 0:
                return bytes(self.ffi.buffer(buf, n))
            cap = -n
        raise LLMError(f"llama_token_to_piece failed for token {token}")

    def token_text(self, token: int) -> str:
        """The vocabulary entry of ``token`` ("" for a negative id)."""
        if token < 0:
            return ""
        return self.ffi.string(self.lib.llama_vocab_get_text(self.vocab, token)).decode(
            "utf-8", "replace")

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends generation (EOS, end-of-turn, ...)."""
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    @property
    def eos(self) -> int:
        return int(self.lib.llama_vocab_eos(self.vocab))

    @property
    def bos(self) -> int:
        return int(self.lib.llama_vocab_bos(self.vocab))

    def chat_template(self) -> str | None:
        """The model's Jinja chat template (GGUF ``tokenizer.chat_template``), if any."""
        ptr = self.lib.llama_model_chat_template(self.model, self.ffi.NULL)
        return None if ptr == self.ffi.NULL else self.ffi.string(ptr).decode("utf-8")

    # -- decoding --------------------------------------------------------------------------

    def _feed(self, tokens: Sequence[int]) -> None:
        """Make the KV cache hold ``tokens``, decoding only past the cached common prefix.

        At least the last token is always decoded, so fresh logits are available.
        """
        tokens = list(tokens)
        if not tokens:
            raise LLMError("nothing to decode")
        if len(tokens) > self.n_ctx:
            raise LLMError(f"{len(tokens)} tokens do not fit n_ctx={self.n_ctx}")
        n_cached = len(self._cached)
        if n_cached < len(tokens) and tokens[:n_cached] == self._cached:
            same = n_cached  # the common case: the cache is a prefix (next token, same prompt)
        else:
            same, limit = 0, min(n_cached, len(tokens) - 1)
            while same < limit and self._cached[same] == tokens[same]:
                same += 1
        if same < len(self._cached):
            if not self.lib.llama_memory_seq_rm(self._memory, 0, same, -1):
                self.lib.llama_memory_clear(self._memory, True)
                same = 0
            del self._cached[same:]
        for start in range(same, len(tokens), self._n_batch):
            chunk = list(tokens[start:start + self._n_batch])
            arr = self.ffi.new("llama_token[]", chunk)
            rc = self.lib.llama_decode(self.ctx, self.lib.llama_batch_get_one(arr, len(chunk)))
            if rc != 0:
                self.lib.llama_memory_clear(self._memory, True)
                self._cached = []
                raise LLMError(f"llama_decode failed with code {rc}")
            self._cached.extend(chunk)

    def logits_after(self, tokens: Sequence[int]) -> np.ndarray:
        """Next-token logits after ``tokens`` (a copy), re-using the longest cached prefix."""
        self._feed(tokens)
        ptr = self.lib.llama_get_logits_ith(self.ctx, -1)
        if ptr == self.ffi.NULL:
            raise LLMError("llama.cpp returned no logits")
        return np.frombuffer(self.ffi.buffer(ptr, 4 * self.n_vocab), dtype=np.float32).copy()

    def generate(self, prompt: Sequence[int], *, grammar: str | None, max_tokens: int,
                 temperature: float, seed: int) -> tuple[str, int]:
        """Sample after ``prompt`` until an end token, ``max_tokens`` or the context is full.

        With a grammar, each token is first sampled without it and kept if the
        grammar accepts it; only a rejected token makes the grammar filter the
        whole vocabulary and the token be drawn again (llama.cpp's own sampling
        loop does the same). At temperature 0 the result is the arg-max token the
        grammar allows either way.

        Returns the text (end token excluded) and the number of generated tokens.

        Raises:
            ConfigError: llama.cpp rejected the grammar.
        """
        lib, ffi = self.lib, self.ffi
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        gram = ffi.NULL
        try:
            if grammar is not None:
                gram = lib.llama_sampler_init_grammar(self.vocab, grammar.encode("utf-8"),
                                                      b"root")
                if gram == ffi.NULL:
                    raise ConfigError("llama.cpp rejected the grammar for this schema")
            if temperature <= 0:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            else:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_k(SAMPLING["top_k"]))
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(
                    SAMPLING["top_p"], 1))
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_min_p(
                    SAMPLING["min_p"], 1))
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temperature))
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(
                    seed & 0xFFFFFFFF))
            tokens: list[int] = list(prompt)
            out = bytearray()
            n = 0
            self._feed(tokens)
            while n < max_tokens and len(tokens) < self.n_ctx:
                tok = int(lib.llama_sampler_sample(chain, self.ctx, -1))
                if gram != ffi.NULL:
                    if not self._grammar_allows(gram, tok):
                        tok = self._resample_with_grammar(chain, gram)
                    lib.llama_sampler_accept(gram, tok)
                if self.is_end(tok):
                    break
                out += self.piece(tok)
                n += 1
                tokens.append(tok)
                if n < max_tokens and len(tokens) < self.n_ctx:
                    self._feed(tokens)
        finally:
            lib.llama_sampler_free(chain)
            if gram != ffi.NULL:
                lib.llama_sampler_free(gram)
        return out.decode("utf-8", "replace"), n

    def _grammar_allows(self, gram: Any, token: int) -> bool:
        one = self.ffi.new("llama_token_data[1]", [(token, 1.0, 0.0)])
        arr = self.ffi.new("llama_token_data_array *", (one, 1, -1, False))
        self.lib.llama_sampler_apply(gram, arr)
        return bool(np.isfinite(one[0].logit))

    def _resample_with_grammar(self, chain: Any, gram: Any) -> int:
        """Draw the next token from the current logits with the grammar filtering the vocabulary."""
        ptr = self.lib.llama_get_logits_ith(self.ctx, -1)
        logits = np.frombuffer(self.ffi.buffer(ptr, 4 * self.n_vocab), dtype=np.float32)
        cand = np.zeros(self.n_vocab, dtype=_TOKEN_DATA)
        cand["id"] = np.arange(self.n_vocab, dtype=np.int32)
        cand["logit"] = logits
        data = self.ffi.cast("llama_token_data *", self.ffi.from_buffer(cand))
        arr = self.ffi.new("llama_token_data_array *", (data, self.n_vocab, -1, False))
        self.lib.llama_sampler_apply(gram, arr)
        self.lib.llama_sampler_apply(chain, arr)
        if arr.selected < 0 or arr.selected >= arr.size:
            raise LLMError("the grammar allows no token here")
        return int(arr.data[arr.selected].id)


_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
"""The memory layout of ``llama_token_data``."""
