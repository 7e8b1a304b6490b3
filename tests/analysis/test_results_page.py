"""The results page's tables: drawn alike from run directories and from their digests."""

from __future__ import annotations

from pathlib import Path

from deltamem.analysis.results_page import build, tables
from deltamem.analysis.run_digest import from_run_dir, read_digest, write_digest

from .analysis_toys import fake_run


def test_the_page_from_digests_is_the_page_from_run_directories(tmp_path: Path) -> None:
    dirs = [fake_run(tmp_path, "none", "none", [0, 0, 0, 1]),
            fake_run(tmp_path, "awm", "awm", [1, 0, 1, 1], trajectories=False),
            fake_run(tmp_path, "dm", "deltamem", [1, 1, 1, 1])]
    page = build(dirs, ["none", "awm", "deltamem"], "")
    digests = [read_digest(write_digest(from_run_dir(d), tmp_path / f"{d.name}.jsonl"))
               for d in dirs]
    again = tables(digests, ["none", "awm", "deltamem"])
    assert "\n".join(again).strip() in page
    assert "| deltamem | expert x 2 (train) | frozen | 4 | 100.0 |" in page
    assert "| awm | expert x 2 (train) | frozen | 4 | 75.0 |" in page
    assert "- |" in next(x for x in page.splitlines() if x.startswith("| awm"))  # no search


def test_two_runs_of_one_name_are_told_apart_by_their_paths(tmp_path: Path) -> None:
    a = fake_run(tmp_path / "a", "dm", "deltamem", [1, 0])
    b = fake_run(tmp_path / "b", "dm", "deltamem", [1, 1])
    page = build([a, b], ["deltamem"], "")
    rows = [x for x in page.splitlines() if x.startswith("| deltamem (")]
    assert len(rows) == 2 and str(a) in rows[0] and str(b) in rows[1]
