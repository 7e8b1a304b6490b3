"""Every failure a user can provoke from the command line is one plain line (issue 17, item 5).

Each case runs ``deltamem.cli.main`` as the console script does and checks: exit code 1,
no traceback, exactly one line on stderr, the message printed literally (brackets kept),
and nothing left behind (no ``.tmp`` file, no half-made bank, no folder created).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from deltamem.cli import main
from deltamem.embed import HashingEmbedder
from deltamem.memories.deltamem import DeltaMem
from deltamem.testing import make_episode


def cli(args: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["deltamem", *args])
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal must not wrap the message
    code = 0
    try:
        main()
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err
    return code, err


def one_line_error(code: int, err: str) -> str:
    assert code == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    path = tmp_path / "bank.db"
    mem = DeltaMem.open(path, embedder=HashingEmbedder(dim=16), domain="alfworld")
    mem.learn(make_episode(episode_id="e0"))
    mem.close()
    return path


@pytest.fixture
def export(tmp_path: Path, bank: Path, capsys, monkeypatch) -> Path:
    out = tmp_path / "bank.jsonl"
    assert cli(["export", str(bank), str(out)], capsys, monkeypatch)[0] == 0
    return out


def test_export_to_a_missing_folder(tmp_path, bank, capsys, monkeypatch) -> None:
    line = one_line_error(*cli(["export", str(bank), str(tmp_path / "no" / "x.jsonl")],
                               capsys, monkeypatch))
    assert "does not exist" in line and not (tmp_path / "no").exists()


def test_export_to_a_folder_leaves_no_tmp(tmp_path, bank, capsys, monkeypatch) -> None:
    folder = tmp_path / "some"
    folder.mkdir()
    line = one_line_error(*cli(["export", str(bank), str(folder)], capsys, monkeypatch))
    assert "is a folder" in line and not Path(str(folder) + ".tmp").exists()


@pytest.mark.parametrize(("content", "reason"), [
    (b"[1, 2]\n", "record 1 is not an object: list"),
    (b'"text"\n', "record 1 is not an object: str"),
    (b"\xff\xfe{}\n", "not UTF-8"),
    (b"{not json\n", "not valid JSON"),
    (b"", "no records"),
    (b"\n\n", "no records"),
])
def test_import_of_a_malformed_file(tmp_path, content, reason, capsys, monkeypatch) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(content)
    line = one_line_error(*cli(["import", str(src), str(tmp_path / "new.db")],
                               capsys, monkeypatch))
    assert reason in line
    assert not [p for p in os.listdir(tmp_path) if p.startswith("new.db")]


def test_import_of_an_invalid_export_leaves_no_half_made_bank(tmp_path, export, capsys,
                                                              monkeypatch) -> None:
    recs = [json.loads(x) for x in export.read_text().splitlines()]
    node = next(r for r in recs if r["type"] == "node")
    node["parent_id"] = node["id"]
    export.write_text("".join(json.dumps(r) + "\n" for r in recs))
    line = one_line_error(*cli(["import", str(export), str(tmp_path / "new.db")],
                               capsys, monkeypatch))
    assert "record 2" in line
    assert not [p for p in os.listdir(tmp_path) if p.startswith("new.db")]


def test_import_of_a_directory(tmp_path, capsys, monkeypatch) -> None:
    line = one_line_error(*cli(["import", str(tmp_path), str(tmp_path / "new.db")],
                               capsys, monkeypatch))
    assert "cannot read" in line


def test_import_into_a_missing_folder_creates_nothing(tmp_path, export, capsys,
                                                      monkeypatch) -> None:
    line = one_line_error(*cli(["import", str(export), str(tmp_path / "missing" / "b.db")],
                               capsys, monkeypatch))
    assert "does not exist" in line and not (tmp_path / "missing").exists()


def test_messages_are_printed_literally(tmp_path, capsys, monkeypatch) -> None:
    missing = tmp_path / "x[envs][/red].jsonl"
    line = one_line_error(*cli(["import", str(missing), str(tmp_path / "b.db")],
                               capsys, monkeypatch))
    assert str(missing) in line


def test_a_damaged_bank(tmp_path, bank, capsys, monkeypatch) -> None:
    data = bytearray(bank.read_bytes())
    for off in range(4096, len(data), 4096):
        data[off + 8: off + 400] = bytes(range(256)) + bytes(136)
    bank.write_bytes(bytes(data))
    for command in (["stats", str(bank)], ["export", str(bank), str(tmp_path / "o.jsonl")]):
        line = one_line_error(*cli(command, capsys, monkeypatch))
        assert "damaged" in line


def test_run_dir_that_is_a_file(tmp_path, capsys, monkeypatch) -> None:
    target = tmp_path / "afile"
    target.write_text("x")
    line = one_line_error(*cli(["run", "--env", "household", "--split", "seen", "--memory",
                                "none", "--llm", "scripted", "--embedder", "hashing",
                                "--episodes", "1", "--run-dir", str(target)],
                               capsys, monkeypatch))
    assert str(target) in line


@pytest.mark.parametrize("case", ["storage is a file", "port out of range"])
def test_serve_refuses_bad_arguments(tmp_path, case, capsys, monkeypatch) -> None:
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    afile = tmp_path / "afile"
    afile.write_text("x")
    args = (["serve", str(afile)] if case == "storage is a file"
            else ["serve", str(tmp_path / "banks"), "--port", "99999"])
    line = one_line_error(*cli([*args, "--keys", str(tmp_path / "keys.json"),
                                "--embedder", "hashing"], capsys, monkeypatch))
    assert ("is a file" in line) if case == "storage is a file" else ("65535" in line)


def test_api_key_with_a_malformed_key_file(tmp_path, capsys, monkeypatch) -> None:
    keys = tmp_path / "keys.json"
    for text in ("{not json", "[1, 2]", '{"keys": 3}'):
        keys.write_text(text)
        line = one_line_error(*cli(["api-key", "bob", "--keys", str(keys)],
                                   capsys, monkeypatch))
        assert "malformed" in line
        assert keys.read_text() == text
