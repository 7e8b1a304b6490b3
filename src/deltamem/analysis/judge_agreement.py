"""How often an outcome judge agrees with the environment (issue 31).

A run with ``judge`` set (``deltamem run --judge …``) keeps, in every record of
``episodes.jsonl`` a phase learned from, the environment's ``success`` beside the judge's
``verdict`` (:mod:`deltamem.bench.runner`). This module counts them: per run and phase,
true outcome × verdict (``success`` / ``failure`` / ``uncertain`` / ``refused``), the share
of episodes the judge decided (*coverage*: only those are learned), the agreement on the
decided ones, and the two errors that matter for a bank: a failure learned as a SUCCESS skill
(later recalls follow it) and a success learned as a FAILURE (later recalls are warned off
it by ε, Eq. 6).

    python -m deltamem.analysis.judge_agreement runs/judge-*/
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from deltamem.analysis.markdown import table
from deltamem.bench.results import read_episodes
from deltamem.errors import ConfigError

__all__ = ["Agreement", "agreement", "agreement_table", "main"]

OUTCOMES: tuple[str, ...] = ("success", "failure", "uncertain", "refused")


@dataclass(frozen=True)
class Agreement:
    """True outcome × verdict counts of one run's phase."""

    run: str
    phase: str
    judge: str
    counts: dict[tuple[bool, str], int]

    @property
    def episodes(self) -> int:
        return sum(self.counts.values())

    def count(self, won: bool, outcome: str) -> int:
        return self.counts.get((won, outcome), 0)

    @property
    def decided(self) -> int:
        return sum(self.count(w, o) for w in (True, False) for o in ("success", "failure"))

    @property
    def agree(self) -> int:
        return self.count(True, "success") + self.count(False, "failure")

    @property
    def coverage(self) -> float:
        return self.decided / self.episodes if self.episodes else 0.0

    @property
    def accuracy(self) -> float | None:
        """Agreement on the decided episodes (``None`` when the judge decided none)."""
        return self.agree / self.decided if self.decided else None


def agreement(records: Iterable[dict], run: str = "") -> list[Agreement]:
    """One :class:`Agreement` per phase of the records that carry a ``verdict``."""
    per: dict[tuple[str, str], Counter] = {}
    for r in records:
        v = r.get("verdict")
        if not v:
            continue
        outcome = v.get("outcome")
        if outcome not in OUTCOMES:
            raise ConfigError(f"{run}: episode {r.get('index')} has verdict {outcome!r}")
        key = (r.get("phase", "?"), v.get("judge", "?"))
        per.setdefault(key, Counter())[(bool(r.get("success")), outcome)] += 1
    return [Agreement(run, phase, judge, dict(c)) for (phase, judge), c in per.items()]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def agreement_table(rows: Sequence[Agreement]) -> str:
    """A Markdown table: one line per run and phase."""
    head = ["run", "phase", "judge", "episodes", "won (env)", "won → success",
            "won → failure", "lost → failure", "lost → success", "uncertain", "refused",
            "coverage %", "agreement % (decided)"]
    body = []
    for a in rows:
        body.append([
            a.run, a.phase, a.judge, str(a.episodes),
            str(sum(a.count(True, o) for o in OUTCOMES)),
            str(a.count(True, "success")), str(a.count(True, "failure")),
            str(a.count(False, "failure")), str(a.count(False, "success")),
            str(a.count(True, "uncertain") + a.count(False, "uncertain")),
            str(a.count(True, "refused") + a.count(False, "refused")),
            _pct(a.coverage), _pct(a.accuracy),
        ])
    return "\n".join(table(head, body))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of runs with a judge")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    rows: list[Agreement] = []
    for rd in args.runs:
        if not (rd / "episodes.jsonl").is_file():
            print(f"error: {rd} has no episodes.jsonl", file=sys.stderr)
            return 2
        found = agreement(read_episodes(rd / "episodes.jsonl"), rd.name)
        if not found:
            print(f"warning: {rd} has no judged episode (run it with --judge)", file=sys.stderr)
        rows += found
    if args.json:
        print(json.dumps([{"run": a.run, "phase": a.phase, "judge": a.judge,
                           "episodes": a.episodes, "coverage": a.coverage,
                           "accuracy": a.accuracy,
                           "counts": {f"{'won' if w else 'lost'}->{o}": n
                                      for (w, o), n in sorted(a.counts.items())}}
                          for a in rows], indent=1))
    else:
        print(agreement_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
