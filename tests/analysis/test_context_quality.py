"""Q vs improvement over no memory (decocted experience, §4): Pearson r, by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from deltamem.analysis.context_quality import correlation_report, pearson
from deltamem.errors import InvalidInputError


def test_pearson_values():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) is None
    assert pearson([1], [1]) is None
    with pytest.raises(InvalidInputError):
        pearson([1, 2], [1])


def _write_run(path: Path, rows: list[tuple[str, float, dict | None]]) -> None:
    path.mkdir(parents=True)
    with open(path / "episodes.jsonl", "w", encoding="utf-8") as f:
        for i, (tid, reward, quality) in enumerate(rows):
            rec = {"index": i, "phase": "online", "task_id": tid, "reward": reward,
                   "success": reward == 1.0, "steps": 3,
                   "recall": {"chars": 0, "items": [],
                              "details": {"quality": quality} if quality else {}}}
            f.write(json.dumps(rec) + "\n")


def _q(rel: float, div: float) -> dict:
    return {"rel": rel, "div": div, "q": rel + 0.6 * div, "lambda": 0.6, "k": 2}


def test_correlation_report_matches_hand_computation(tmp_path):
    run, base = tmp_path / "run", tmp_path / "none"
    _write_run(run, [("a", 1.0, _q(0.9, -0.5)), ("b", 0.0, _q(0.5, -0.9)),
                     ("c", 1.0, _q(0.7, -0.2)), ("a", 1.0, _q(0.7, -0.3)),
                     ("d", 1.0, None)])
    _write_run(base, [("a", 0.0, None), ("b", 0.0, None), ("c", 0.0, None), ("c", 1.0, None),
                      ("d", 0.0, None)])
    rep = correlation_report(run, base, lambdas=(0.0, 1.0))
    # per task: a: rel .8 div -.4 delta 1; b: .5 -.9 delta 0; c: .7 -.2 delta .5
    rel, div, delta = [0.8, 0.5, 0.7], [-0.4, -0.9, -0.2], [1.0, 0.0, 0.5]
    assert [p.task_id for p in rep.points] == ["a", "b", "c"]
    assert [p.delta for p in rep.points] == pytest.approx(delta)
    expect = pearson([r + 0.6 * d for r, d in zip(rel, div, strict=True)], delta)
    assert rep.r == pytest.approx(expect)
    grid = dict(rep.r_by_lambda)
    assert set(grid) == {0.0, 0.6, 1.0}
    assert grid[0.0] == pytest.approx(pearson(rel, delta))
    assert rep.skipped_no_quality == 1
    assert "Pearson r" in rep.markdown() and not math.isnan(rep.r)


def test_correlation_report_needs_logged_quality(tmp_path):
    _write_run(tmp_path / "run", [("a", 1.0, None)])
    _write_run(tmp_path / "none", [("a", 0.0, None)])
    with pytest.raises(InvalidInputError, match=r"recall\.details\.quality"):
        correlation_report(tmp_path / "run", tmp_path / "none")


def test_undefined_correlation_says_why(tmp_path):
    # the memory changed no task's reward: Δavg = 0 everywhere, r undefined, and the report says so
    _write_run(tmp_path / "run", [("a", 0.0, _q(0.9, -0.5)), ("b", 0.0, _q(0.5, -0.9))])
    _write_run(tmp_path / "none", [("a", 0.0, None), ("b", 0.0, None)])
    rep = correlation_report(tmp_path / "run", tmp_path / "none")
    assert rep.r is None
    assert "every task" in (rep.undefined_reason() or "")
    assert "r is undefined: Δavg is +0 on every task" in rep.markdown()
    assert rep.to_dict()["undefined_reason"] == rep.undefined_reason()
    # a defined r has no reason
    _write_run(tmp_path / "run2", [("a", 1.0, _q(0.9, -0.5)), ("b", 0.0, _q(0.5, -0.9))])
    assert correlation_report(tmp_path / "run2", tmp_path / "none").undefined_reason() is None
