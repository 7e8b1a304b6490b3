"""The OpenTelemetry span tree of recall → play → learn episodes (issue 50).

Plays ``--episodes`` household games through the real runner (``deltamem.bench.run``,
DeltaMem, constrained ReAct agent) against the scripted loopback OpenAI-compatible server
(:class:`deltamem.llm.fault_server.FaultServer` with
:func:`~deltamem.llm.fault_server.hashed_answer`), collects the spans with the
OpenTelemetry SDK's in-memory exporter and prints each episode's tree: name, duration and
the attributes that matter (GenAI conventions; no content, as by default).

    python benchmarks/otel_episode.py --out runs/otel
    python benchmarks/otel_episode.py --smoke

Needs the ``otel`` extra (``pip install 'deltamem[otel]'``). Writes ``spans.json`` (every
span, as the SDK renders it) under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

SHOWN = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
         "gen_ai.memory.store.id", "gen_ai.memory.record.count", "gen_ai.usage.input_tokens",
         "gen_ai.usage.output_tokens", "deltamem.purpose", "deltamem.match.task.score",
         "deltamem.match.task.accepted", "deltamem.match.env.score", "deltamem.success",
         "deltamem.steps", "deltamem.changes.written", "deltamem.changes.hit",
         "server.address", "server.port")


def tree(spans: list[Any]) -> list[str]:
    by_parent: dict[int | None, list[Any]] = {}
    ids = {s.context.span_id for s in spans}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)
    lines: list[str] = []

    def walk(s: Any, depth: int) -> None:
        ms = (s.end_time - s.start_time) / 1e6
        attrs = ", ".join(f"{k}={s.attributes[k]}" for k in SHOWN if k in s.attributes)
        lines.append(f"{'  ' * depth}{s.name}  [{ms:.0f} ms]  {attrs}")
        for c in sorted(by_parent.get(s.context.span_id, []), key=lambda x: x.start_time):
            walk(c, depth + 1)

    for root in sorted(by_parent.get(None, []), key=lambda x: x.start_time):
        walk(root, 0)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    if args.smoke:
        args.episodes, args.max_steps = 1, 3
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from deltamem import telemetry
    from deltamem.bench import RunConfig, run
    from deltamem.llm.fault_server import FaultServer, hashed_answer

    out = args.out or Path(tempfile.mkdtemp(prefix="deltamem-otel-"))
    out.mkdir(parents=True, exist_ok=True)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    with FaultServer(answer=hashed_answer) as server:
        cfg = RunConfig(run_dir=out / "run", env="household", split="seen",
                        episodes=args.episodes, memory="deltamem", embedder="hashing",
                        constrained=True, max_steps=args.max_steps, llm="openai:scripted-policy",
                        env_options={"cache_dir": str(out / "games")},
                        llm_options={"base_url": server.url})
        run(cfg, progress=False)
    spans = list(exporter.get_finished_spans())
    lines = tree(spans)
    print("\n".join(lines))
    (out / "spans.json").write_text(
        "[\n" + ",\n".join(s.to_json(indent=None) for s in spans) + "\n]\n")
    (out / "tree.txt").write_text("\n".join(lines) + "\n")
    print(f"{len(spans)} spans; {out / 'spans.json'}")
    return 0 if any(s.name.startswith("episode ") for s in spans) else 1


if __name__ == "__main__":
    sys.exit(main())
