"""Write docs/results.md: whole from the manifest of runs, or a page from run directories.

    python scripts/results.py --manifest docs/results.toml [--out docs/results.md] [--no-plots]
    python scripts/results.py --digest RUN_DIR… [--prefix NAME-] [--digest-dir docs/data/runs]
    python scripts/results.py RUN_DIR… [--out FILE] \
        [--expect none,synapse,awm,reasoningbank,deltamem] [--note "text"] \
        [--versus deltamem] [--section "title"] [--blocks 20 --plot docs/curves.png]

``--manifest``: the results page, regenerated whole from ``docs/results.toml`` (one section per
question a user asks, each listing its runs) and the runs' committed digests
(``docs/data/runs/NAME.jsonl``), with a contents list, a headline table and, where a question
asks for one, an interval plot (``deltamem.analysis.results_manifest``). It needs no run
directory, so a fresh clone regenerates it, and the suite checks that the committed page is
what it gives.

``--digest``: write the digest of each finished run directory (its configuration and, per
evaluation episode, what the tables show; ``deltamem.analysis.run_digest``), named after the
directory (with ``--prefix`` in front); add the names to the manifest to show them.

Run directories (positional): the tables of those runs on one page, as before the manifest
(``deltamem sweep`` writes the same page for its cells). Every run directory holds
``config.json`` and ``episodes.jsonl`` (deltamem.bench). Runs are grouped by setting
(environment, evaluation split and seed, model, agent guide); within a group, one row per
memory system and evaluation phase: success and reward with 95 % bootstrap intervals, the
success difference to ``none`` in the same phase (paired by task when both played the same
games), LLM tokens and wall time per episode, and the bank size; where the run kept
``trajectories.jsonl``, the mean steps of won episodes and the mean search steps. The command
that reproduces each run is rebuilt from its ``config.json``. Systems named by ``--expect``
with no run in a group are listed as missing. ``--section`` writes the tables as one named
section of the page and keeps the others.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from deltamem.analysis.results_manifest import draw_plots, load_manifest, load_runs, render
from deltamem.analysis.results_page import build, command, splice
from deltamem.analysis.run_digest import from_run_dir, write_digest
from deltamem.errors import ConfigError

__all__ = ["build", "command", "main", "splice"]


def _manifest(args: argparse.Namespace) -> int:
    manifest = load_manifest(args.manifest)
    records = load_runs(manifest, args.manifest.parent / manifest.digests)
    out = args.out or args.manifest.with_suffix(".md")
    out.write_text(render(manifest, records), encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    if not args.no_plots:
        try:
            for path in draw_plots(manifest, records, out.parent / manifest.plots):
                print(f"wrote {path}", file=sys.stderr)
        except ConfigError as e:
            print(f"plots skipped: {e}", file=sys.stderr)
    return 0


def _digest(args: argparse.Namespace) -> int:
    for d in args.runs:
        try:
            rec = from_run_dir(d)
        except ConfigError as e:  # a log file beside the runs a glob also matched
            print(f"skipped: {e}", file=sys.stderr)
            continue
        name = f"{args.prefix}{rec.name}"
        # the command shown for a digest writes the run again under runs/NAME
        rec = replace(rec, name=name,
                      cfg=rec.cfg.model_copy(update={"run_dir": Path("runs") / name}))
        path = write_digest(rec, args.digest_dir / f"{name}.jsonl")
        print(f"wrote {path} ({len(rec.rows)} episodes)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run directories")
    ap.add_argument("--manifest", type=Path, default=None,
                    help="regenerate the whole page from this manifest and its run digests")
    ap.add_argument("--no-plots", action="store_true",
                    help="with --manifest: write the page only, not its plots")
    ap.add_argument("--digest", action="store_true",
                    help="write a digest of each run directory instead of a page")
    ap.add_argument("--prefix", default="", help="with --digest: put this before each name")
    ap.add_argument("--digest-dir", type=Path, default=Path("docs/data/runs"),
                    help="with --digest: where the digests go")
    ap.add_argument("--out", type=Path, default=None,
                    help="the page to write (default: docs/results.md; with --manifest, the "
                         "manifest's name with .md)")
    ap.add_argument("--expect", default="none,synapse,awm,reasoningbank,deltamem",
                    help="comma-separated memory systems each setting should have")
    ap.add_argument("--note", default="", help="a paragraph put under the title")
    ap.add_argument("--versus", default="deltamem",
                    help="the memory compared with each other memory on shared games")
    ap.add_argument("--section", default="",
                    help="write the tables as this named section of --out, replacing that "
                         "section if it is there and keeping the rest of the file")
    ap.add_argument("--blocks", type=int, default=0,
                    help="also a table of success per block of this many games (curves)")
    ap.add_argument("--plot", type=Path, default=None,
                    help="with --blocks: write the curves as PNG files named after this "
                         "path (one per setting) and link them")
    args = ap.parse_args(argv)
    if args.manifest is not None:
        return _manifest(args)
    if not args.runs:
        ap.error("give run directories, or --manifest FILE")
    if args.digest:
        return _digest(args)
    out = args.out or Path("docs/results.md")
    text = build(sorted(args.runs), [m for m in args.expect.split(",") if m], args.note,
                 versus=args.versus, blocks=args.blocks, plot=args.plot)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.section:
        old = out.read_text(encoding="utf-8") if out.exists() else "# Results\n"
        text = splice(old, args.section, text)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
