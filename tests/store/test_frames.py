"""Exports that prove they are whole (issue 51): header and trailer, the import's refusal of a
cut or altered file naming what is missing, ``--partial`` saying what it skipped, and older
exports (no trailer) importing with a warning."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from deltamem.cli import main
from deltamem.embed import HashingEmbedder
from deltamem.errors import IncompleteExportError, InvalidImportError
from deltamem.memories.deltamem import DeltaMem
from deltamem.portable import export_bank, import_bank
from deltamem.store.frames import FORMAT_VERSION, Tally, Unframe, frame
from deltamem.testing import make_episode

GOALS = ["put a clean apple in fridge", "heat some egg and put it in countertop",
         "find two pens and put them in drawer", "cool a tomato and put it in cabinet"]


@pytest.fixture
def export(tmp_path: Path) -> Path:
    bank = tmp_path / "bank.db"
    mem = DeltaMem.open(bank, embedder=HashingEmbedder(dim=16))
    for i, g in enumerate(GOALS * 2):
        mem.learn(make_episode(g, episode_id=f"e{i}", success=i % 3 != 2))
    mem.close()
    out = tmp_path / "bank.jsonl"
    export_bank(bank, out)
    return out


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def bank_rows(path: Path) -> dict[str, int]:
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("nodes", "learned")}
    finally:
        con.close()


def test_export_has_a_header_and_a_trailer_that_count_and_hash_the_records(export):
    recs = [json.loads(x) for x in lines_of(export)]
    head, body, tail = recs[0], recs[1:-1], recs[-1]
    assert head["type"] == "header" and tail["type"] == "trailer"
    assert head["format_version"] == tail["format_version"] == FORMAT_VERSION
    counts: dict[str, int] = {}
    for r in body:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
    assert head["counts"] == tail["counts"] == counts and head["records"] == len(body)
    # the checksum is SHA-256 over the record lines as written: checkable without deltamem
    import hashlib
    assert tail["sha256"] == hashlib.sha256("".join(lines_of(export)[1:-1]).encode()).hexdigest()
    tally = Tally()
    for r in body:
        tally.add(r)
    assert tally.sha256 == tail["sha256"]


def test_a_whole_export_imports_without_notes(export, tmp_path):
    notes: list[str] = []
    n = import_bank(export, tmp_path / "copy.db", on_note=notes.append)
    assert notes == [] and n == bank_rows(tmp_path / "copy.db")["nodes"] > 0


@pytest.mark.parametrize("keep", [1, 2, 5, 10, -1])
def test_a_cut_export_is_refused_naming_what_is_missing(export, tmp_path, keep):
    """The issue's case: the first lines of an export (and every other cut: only the header,
    everything but the trailer) are refused, no bank is left behind."""
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines_of(export)[:keep]), encoding="utf-8")
    with pytest.raises(IncompleteExportError) as e:
        import_bank(cut, tmp_path / "new.db")
    msg = str(e.value)
    assert "no trailer" in msg and "--partial" in msg
    if keep != -1:
        assert "learned episode ids" in msg and "missing" in msg
    assert not [p for p in os.listdir(tmp_path) if p.startswith("new.db")]


def test_partial_imports_what_is_there_and_says_what_it_skipped(export, tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines_of(export)[:10]), encoding="utf-8")
    head = json.loads(lines_of(export)[0])
    kept = [json.loads(x)["type"] for x in lines_of(export)[1:10]]
    notes: list[str] = []
    n = import_bank(cut, tmp_path / "new.db", partial=True, on_note=notes.append)
    assert n == kept.count("node") == bank_rows(tmp_path / "new.db")["nodes"]
    assert bank_rows(tmp_path / "new.db")["learned"] == kept.count("learned")
    text = "\n".join(notes)
    nodes, learned = head["counts"]["node"], head["counts"]["learned"]
    skipped = {"nodes": nodes - kept.count("node"),
               "learned episode ids": learned - kept.count("learned")}
    want = ", ".join(f"{v} {k}" for k, v in skipped.items() if v)
    assert skipped["learned episode ids"] and f"skipped (not in the file): {want}" in text
    assert "learning those episodes again would write them again" in text


def test_a_line_cut_mid_record_is_named(export, tmp_path):
    raw = export.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(IncompleteExportError, match=r"its last line \(\d+\) is cut off"):
        import_bank(cut, tmp_path / "new.db")
    notes: list[str] = []
    import_bank(cut, tmp_path / "new.db", partial=True, on_note=notes.append)
    assert "is cut off" in notes[0]


def test_an_altered_record_fails_the_checksum(export, tmp_path):
    lines = lines_of(export)
    i = next(i for i, x in enumerate(lines) if '"type": "learned"' in x)
    rec = json.loads(lines[i])
    rec["learned_at"] = rec["learned_at"] + 1.0  # still a valid record
    lines[i] = json.dumps(rec, sort_keys=True) + "\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(IncompleteExportError, match="checksum"):
        import_bank(bad, tmp_path / "new.db")


def test_a_removed_record_in_the_middle_is_named(export, tmp_path):
    lines = lines_of(export)
    i = next(i for i, x in enumerate(lines) if '"type": "node"' in x)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:i] + lines[i + 1:]), encoding="utf-8")
    with pytest.raises(IncompleteExportError, match=r"missing 1 of \d+ nodes"):
        import_bank(bad, tmp_path / "new.db")


def test_an_old_export_without_frames_imports_with_a_warning(export, tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text("".join(lines_of(export)[1:-1]), encoding="utf-8")
    with pytest.warns(UserWarning, match="no header or trailer"):
        n = import_bank(old, tmp_path / "new.db")
    assert n == bank_rows(tmp_path / "new.db")["nodes"]


def test_records_after_the_trailer_or_a_second_header_are_refused():
    recs = frame([{"type": "meta"}])
    with pytest.raises(InvalidImportError, match="follows the trailer"):
        list(Unframe([*recs, {"type": "learned"}]))
    with pytest.raises(InvalidImportError, match="header after"):
        list(Unframe([recs[1], recs[0]]))
    with pytest.raises(InvalidImportError, match="format version"):
        list(Unframe([{**recs[0], "format_version": FORMAT_VERSION + 1}]))


def cli(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["deltamem", *args])
    monkeypatch.setenv("COLUMNS", "60")
    code = 0
    try:
        main()
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_refuses_a_cut_export_in_one_line_and_partial_says_what_it_skipped(
        export, tmp_path, capsys, monkeypatch):
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines_of(export)[:10]), encoding="utf-8")
    code, _, err = cli(["import", str(cut), str(tmp_path / "new.db")], capsys, monkeypatch)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: ") and "missing" in err and "--partial" in err
    code, out, err = cli(["import", "--partial", str(cut), str(tmp_path / "new.db")], capsys,
                         monkeypatch)
    assert code == 0 and "imported " in out
    assert all(x.startswith("warning: ") for x in err.strip().splitlines())
    assert "skipped (not in the file)" in err
