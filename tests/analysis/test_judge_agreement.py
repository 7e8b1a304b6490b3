"""Judge agreement: counts of true outcome × verdict per phase, coverage and agreement."""

from __future__ import annotations

import json

import pytest

from deltamem.analysis.judge_agreement import agreement, agreement_table, main
from deltamem.errors import ConfigError


def rec(i, won, outcome, phase="unfrozen"):
    return {"index": i, "phase": phase, "success": won,
            "verdict": {"outcome": outcome, "reason": "r", "judge": "scripted"}}


RECORDS = [rec(0, True, "success"), rec(1, True, "failure"), rec(2, False, "failure"),
           rec(3, False, "success"), rec(4, False, "uncertain"), rec(5, True, "refused"),
           rec(6, True, "success", phase="build"), {"index": 7, "phase": "frozen", "success": 1}]


def test_counts_coverage_and_agreement_per_phase():
    rows = {a.phase: a for a in agreement(RECORDS, "r")}
    assert set(rows) == {"unfrozen", "build"}  # a record without a verdict is not counted
    a = rows["unfrozen"]
    assert a.episodes == 6 and a.decided == 4 and a.agree == 2
    assert a.coverage == pytest.approx(4 / 6) and a.accuracy == pytest.approx(0.5)
    assert a.count(False, "success") == 1  # a loss the bank would learn as a SUCCESS
    assert rows["build"].accuracy == 1.0


def test_no_decided_episode_has_no_accuracy_and_table_says_so():
    (a,) = agreement([rec(0, True, "uncertain")], "r")
    assert a.accuracy is None and a.coverage == 0.0
    line = agreement_table([a]).splitlines()[-1]
    assert line.rstrip(" |").endswith("-")


def test_unknown_verdict_is_refused():
    with pytest.raises(ConfigError, match="verdict 'maybe'"):
        agreement([rec(0, True, "maybe")], "r")


def test_main_prints_a_row_per_run_and_phase(tmp_path, capsys):
    run = tmp_path / "judge-run"
    run.mkdir()
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count("| judge-run |") == 2
    assert main([str(tmp_path / "missing")]) == 2
