"""Run digests: the compact committed copy of a run keeps everything the results page shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.analysis.run_digest import (
    RunRecord,
    from_run_dir,
    model_settings,
    read_digest,
    write_digest,
)
from deltamem.errors import ConfigError

from .analysis_toys import fake_run


def test_a_digest_round_trips_what_the_page_reads(tmp_path: Path) -> None:
    d = fake_run(tmp_path, "dm", "deltamem", [1, 0, 1], commit="aef4ddf5af79")
    rec = from_run_dir(d)
    assert rec.name == "dm" and rec.build_episodes == 2 and rec.trajectories
    assert (rec.commit, rec.date, rec.model) == ("aef4ddf", "2026-11-28", "`scripted`")
    assert [r["phase"] for r in rec.rows] == ["frozen"] * 3  # build episodes are counted only
    assert [r["search"] for r in rec.rows] == [0, 1, 2]
    assert [r["tokens"] for r in rec.rows] == [105, 205, 305]
    path = write_digest(rec, tmp_path / "digests" / "dm.jsonl")
    back = read_digest(path)
    assert back == rec
    assert len(path.read_text().splitlines()) == 4  # the header, one line per episode


def test_reading_a_damaged_or_foreign_digest_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    with pytest.raises(ConfigError):
        read_digest(bad)  # missing
    bad.write_text(json.dumps({"digest": 99}) + "\n")
    with pytest.raises(ConfigError, match="version"):
        read_digest(bad)
    rec = from_run_dir(fake_run(tmp_path, "dm", "deltamem", [1]))
    good = write_digest(rec, tmp_path / "dm.jsonl").read_text().splitlines()
    bad.write_text(good[0] + "\n" + json.dumps({"phase": "frozen"}) + "\n")
    with pytest.raises(ConfigError, match="lack"):
        read_digest(bad)
    with pytest.raises(ConfigError, match="not a run directory"):
        from_run_dir(tmp_path)


def test_a_record_filters_its_rows_by_phase(tmp_path: Path) -> None:
    rec = from_run_dir(fake_run(tmp_path, "dm", "deltamem", [1, 0], phase="unfrozen"))
    assert isinstance(rec, RunRecord)
    assert len(rec.phase("unfrozen")) == 2 and rec.phase("frozen") == []


def test_model_settings_come_from_versions_then_from_the_llm_cache(tmp_path: Path) -> None:
    assert model_settings(tmp_path) is None  # nothing recorded
    (tmp_path / "llm-cache.jsonl").write_text(
        json.dumps({"key": "k:0", "model": "local:SmolLM2-135M-Instruct@q8_0"}) + "\n")
    assert model_settings(tmp_path) == "`local:SmolLM2-135M-Instruct@q8_0`"
    sessions = [{"session": 0, "llm": None},
                {"session": 1, "llm": {"name": "local:m@q8_0", "flash_attn": False,
                                       "n_ubatch": None, "n_ctx": 4096}}]
    (tmp_path / "versions.json").write_text(json.dumps(sessions))
    assert model_settings(tmp_path) == "`local:m@q8_0` (flash_attn false)"


def test_a_digest_keeps_what_the_run_cost_and_the_page_says_it(tmp_path: Path) -> None:
    from deltamem.analysis.results_page import tables

    d = fake_run(tmp_path, "dm", "deltamem", [1, 0, 1])
    rec = from_run_dir(d)
    assert rec.cost is not None
    assert rec.cost["by_purpose"] == {"act": {"calls": 0, "input_tokens": 600,
                                              "output_tokens": 15}}
    assert rec.cost["money"] is None  # no cost.json: not priced
    (d / "cost.json").write_text(json.dumps({"money": 0.0123, "currency": "USD"}))
    priced = from_run_dir(d)
    assert (priced.cost["money"], priced.cost["currency"]) == (0.0123, "USD")
    back = read_digest(write_digest(priced, tmp_path / "dm.jsonl"))
    assert back.cost == priced.cost
    page = "\n".join(tables([back], ["deltamem"]))
    assert "What the runs cost" in page
    assert "* deltamem: act 600 in / 15 out (0 calls); money: 0.0123 USD" in page
    silent = RunRecord(name="x", cfg=back.cfg, rows=back.rows)  # an older digest: no cost
    assert "What the runs cost" not in "\n".join(tables([silent], ["deltamem"]))


def test_a_version_1_digest_reads_with_the_newer_fields_empty(tmp_path: Path) -> None:
    rec = from_run_dir(fake_run(tmp_path, "dm", "deltamem", [1, 0]))
    assert all(isinstance(r["bank_tokens"], int) for r in rec.rows)
    lines = write_digest(rec, tmp_path / "v2.jsonl").read_text().splitlines()
    header = {**json.loads(lines[0]), "digest": 1}
    rows = [{k: v for k, v in json.loads(ln).items() if k not in ("recall_tokens",
                                                                  "bank_tokens")}
            for ln in lines[1:]]
    old = tmp_path / "v1.jsonl"
    old.write_text("\n".join(json.dumps(x) for x in [header, *rows]) + "\n")
    back = read_digest(old)
    assert [r["success"] for r in back.rows] == [True, False]
    assert all(r["recall_tokens"] is None and r["bank_tokens"] is None for r in back.rows)
