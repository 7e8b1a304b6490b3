"""Play every system on every setting of a leaderboard spec and write docs/leaderboard.md.

    python scripts/leaderboard.py SPEC --no-run [--no-plots] [--page FILE] [--json FILE]
    python scripts/leaderboard.py SPEC --runs DIR [--engine auto|local|ray] [--workers N]
        [--only TEXT ...] [--no-run] [--no-plots] [--page FILE] [--json FILE]

``--no-run`` without ``--runs``: the page is regenerated whole from the committed run digests
alone (the spec's ``digests`` folder, ``docs/data/leaderboard``), so a fresh clone rebuilds
it. With ``--runs``: each system x setting x seed is one resumable run directory under DIR
(a finished one is skipped; ``--only``: the cells whose name contains one of these); every
finished cell found there is then digested into the digest folder (its old digest replaced;
``--no-run``: digest without playing), and the page is written from the digests
(``deltamem.analysis.leaderboard``): success with 95 % intervals, paired differences against
the spec's ``versus`` systems, steps to success, bank size, memory tokens per episode, a
heat-map and an interval plot. A digest whose configuration is no longer its cell's is left
off the page and named.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deltamem.analysis.leaderboard import digest, load_spec, run, summary, write
from deltamem.errors import CellFailed, ConfigError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("--runs", type=Path, default=None,
                    help="folder of the run directories (play and digest the cells there)")
    ap.add_argument("--engine", default="auto", choices=("auto", "local", "ray"))
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=(), help="run only cells whose name has one")
    ap.add_argument("--no-run", action="store_true",
                    help="play nothing: digest the finished cells of --runs, if given, and "
                         "write the page from the digests")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--page", type=Path, default=None, help="default: the spec's page")
    ap.add_argument("--digests", type=Path, default=None,
                    help="the digest folder (default: the spec's)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if args.runs is None and not args.no_run:
        ap.error("give --runs DIR to play cells, or --no-run to write the page from digests")
    try:
        spec = load_spec(args.spec)
        failed = None
        if args.runs is not None:
            if not args.no_run:
                try:
                    run(spec, args.runs, engine=args.engine, workers=args.workers,
                        only=args.only)
                except CellFailed as e:  # the page still shows what finished
                    failed = e
            for path in digest(spec, args.runs, into=args.digests):
                print(f"digested {path}", file=sys.stderr)
        stale: list[str] = []
        cmd = f"python scripts/leaderboard.py {args.spec} --no-run"
        page, entries = write(spec, generator=cmd, plots=not args.no_plots, page=args.page,
                              digests=args.digests, stale=stale)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {page} ({sum(e.success is not None for e in entries)} of {len(entries)} "
          "cells finished)", file=sys.stderr)
    if stale:
        print(f"left off (digest of another configuration; play again): {', '.join(stale)}",
              file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(summary(entries), indent=1) + "\n", encoding="utf-8")
    if failed is not None:
        print(f"error: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
