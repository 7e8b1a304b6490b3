"""What one agent step costs the bundled model: context, weights, attention kernel, micro-batch.

A ReAct step appends ~25-35 tokens (the action and what it produced) to a prompt whose prefix
is cached, then decodes the few tokens that tell the admissible actions apart; a game's first
call evaluates its whole prompt (with a memory block, ~1,000 tokens) cold. This script times
both on the bundled SmolLM2-135M with the prebuilt llama.cpp backend: for each weight type,
attention setting, micro-batch size and context length, the time to evaluate the context cold,
the median time to append 32 tokens to it and to decode one more token, whether the context's
logits are the same bits when its last token is decoded alone after the rest was cached
(``cache path``: a resumed run chooses as an uninterrupted one only if they are), and how far
each setting's next-token logits are from the first row's setting's (by default the shipped
weights with llama.cpp's kernel and micro-batch; max |difference|, and how often the arg-max
token is the same).

Weight types other than the shipped ``q4_1`` are made from the shipped file with llama.cpp's
own requantizer (``llama_model_quantize``, ``allow_requantize``) in a temporary directory:
they carry the shipped values (plus rounding), not the original model's.

    python benchmarks/decode_cost.py [--contexts 100,1000] [--weights q4_1,q8_0]
        [--flash-attn auto,off] [--ubatch 512,32] [--repeats 6] [--threads 1]
    python benchmarks/decode_cost.py --smoke      # tiny sizes, for the test suite

Run it on a quiet machine: the times are wall-clock medians of one process (the defaults take
~5 minutes on one thread; a 2,000-token context adds ~20 s a setting).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from deltamem.llm.llama_prebuilt import WEIGHT_TYPES as FTYPES  # noqa: E402
from deltamem.llm.llama_prebuilt import PrebuiltEngine  # noqa: E402
from deltamem.llm.llama_prebuilt import requantize as write_weights  # noqa: E402
from deltamem.llm.local import BATCH_INVARIANT_UBATCH, default_model_path  # noqa: E402
from deltamem.llm.local import SHIPPED_WEIGHTS as SHIPPED  # noqa: E402

FLASH = {"auto": None, "on": True, "off": False}
APPEND = 32


def requantize(src: Path, kind: str, out_dir: Path) -> Path:
    """``src`` written as ``kind`` into ``out_dir`` (the shipped file itself for ``q4_1``)."""
    if kind == SHIPPED:
        return src
    out = out_dir / f"model-{kind}.gguf"
    write_weights(src, out, kind)
    return out


@dataclass
class Calls:
    """One context length's calls: seconds to append 32 tokens, seconds to decode one more,
    and the next-token logits after each call (appends first)."""

    cold: float = 0.0
    same_by_path: bool = False
    append: list[float] = field(default_factory=list)
    one: list[float] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(path: Path, tokens: list[int], contexts: list[int], *, flash: bool | None,
            ubatch: int, threads: int, repeats: int) -> dict[int, Calls]:
    """Per context length: the context cold (and again with its last token alone after the
    rest), then one step appended ``repeats`` times and one token ``repeats`` times, each to
    the context cached by the previous call."""
    engine = PrebuiltEngine(path, n_ctx=max(contexts) + APPEND * repeats + repeats + 8,
                            n_threads=threads, flash_attn=flash, n_ubatch=ubatch)
    out: dict[int, Calls] = {}
    try:
        for n in contexts:
            engine.logits_after(tokens[:1])  # the cache emptied but for the first token
            t = time.perf_counter()
            cold = engine.logits_after(tokens[:n])
            calls = out[n] = Calls(cold=time.perf_counter() - t)
            engine.logits_after(tokens[:n - 1])  # its last token decoded again, alone
            calls.same_by_path = bool(np.array_equal(cold, engine.logits_after(tokens[:n])))
            for k in range(1, repeats + 1):
                t = time.perf_counter()
                calls.logits.append(engine.logits_after(tokens[:n + APPEND * k]))
                calls.append.append(time.perf_counter() - t)
            end = n + APPEND * repeats
            for k in range(1, repeats + 1):
                t = time.perf_counter()
                calls.logits.append(engine.logits_after(tokens[:end + k]))
                calls.one.append(time.perf_counter() - t)
    finally:
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", default="100,1000",
                    help="cached context lengths in tokens (at least 2), comma-separated")
    ap.add_argument("--weights", default="q4_1,q8_0",
                    help=f"weight types, comma-separated, from {', '.join(FTYPES)} "
                         f"({SHIPPED} is the shipped file)")
    ap.add_argument("--flash-attn", default="auto,off",
                    help="attention kernel settings: auto (llama.cpp decides: on, on CPU), "
                         "on, off")
    ap.add_argument("--ubatch", default=f"512,{BATCH_INVARIANT_UBATCH}",
                    help="micro-batch sizes in tokens, comma-separated (llama.cpp's 512, "
                         f"LocalLLM's default; {BATCH_INVARIANT_UBATCH}: logits independent "
                         "of the cache path)")
    ap.add_argument("--repeats", type=int, default=6, help="calls per figure (median)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes (contexts 32,96; q4_1,q8_0; 2 repeats)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.contexts, args.weights, args.repeats = "32,96", "q4_1,q8_0", 2
    try:
        contexts = sorted({int(c) for c in args.contexts.split(",")})
        ubatches = [int(u) for u in args.ubatch.split(",")]
    except ValueError as e:
        ap.error(f"--contexts and --ubatch take integers: {e}")
    weights = [w.strip() for w in args.weights.split(",")]
    flashes = [f.strip() for f in args.flash_attn.split(",")]
    bad = [w for w in weights if w not in FTYPES] + [f for f in flashes if f not in FLASH]
    if bad:
        ap.error(f"unknown weight type or attention setting: {', '.join(bad)}")
    if args.repeats < 1 or args.threads < 1 or contexts[0] < 2 or min(ubatches) < 1:
        ap.error("--repeats, --threads and --ubatch must be >= 1, --contexts >= 2")
    src = default_model_path()
    engine = PrebuiltEngine(src, n_ctx=64, n_threads=1)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    tokens = engine.tokenize(text)
    engine.close()
    need = contexts[-1] + (APPEND + 1) * args.repeats
    while len(tokens) < need:
        tokens = tokens + tokens
    settings = [(w, f, u) for w in weights for f in flashes for u in ubatches]
    print(f"# One step's cost: bundled model {src.name}, {args.threads} thread(s), a context "
          f"evaluated cold, then +{APPEND} tokens appended (median of {args.repeats})")
    print(f"{load()} before\n")
    w0, f0, u0 = settings[0]
    print("| weights | flash attention | micro-batch | context | ms cold | cache path "
          "| ms / +32 tokens | ms / +1 token | max abs logit diff vs the first row's "
          "| same arg-max |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ref: dict[int, list[np.ndarray]] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        paths = {w: requantize(src, w, Path(tmp)) for w in weights}
        for w, f, u in settings:
            res = measure(paths[w], tokens, contexts, flash=FLASH[f], ubatch=u,
                          threads=args.threads, repeats=args.repeats)
            if ref is None:
                ref = {n: c.logits for n, c in res.items()}
            for n in contexts:
                c = res[n]
                pairs = list(zip(c.logits, ref[n], strict=True))
                diff = max(float(np.abs(a - b).max()) for a, b in pairs)
                hits = sum(int(np.argmax(a) == np.argmax(b)) for a, b in pairs)
                path = "same" if c.same_by_path else "differs"
                print(f"| {w} | {f} | {u} | {n} | {c.cold * 1000:.0f} | {path} "
                      f"| {statistics.median(c.append) * 1000:.0f} "
                      f"| {statistics.median(c.one) * 1000:.0f} | {diff:.3f} "
                      f"| {hits}/{len(pairs)} |")
    print(f"\nfirst row: weights {w0}, flash attention {f0}, micro-batch {u0}")
    print(f"{load()} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
