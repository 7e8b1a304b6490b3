"""What a run cost: tokens per phase and purpose, priced by a TOML table (issue 50)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.bench import RunConfig, report, run
from deltamem.bench.cost import PriceTable, find_price_table, run_cost
from deltamem.errors import ConfigError
from deltamem.llm import ScriptedLLM

from .bench_toys import CorridorEnv

TABLE = """
version = 1
currency = "EUR"
[models."gpt-4o-mini"]
input = 0.15
output = 0.60
[models."deepseek-*"]
input = 1.0
output = 2.0
"""


def _records() -> list[dict]:
    return [
        {"phase": "build", "usage": {"act": {"calls": 3, "prompt_tokens": 1000,
                                             "completion_tokens": 100},
                                     "extract": {"calls": 1, "prompt_tokens": 500,
                                                 "completion_tokens": 200}}},
        {"phase": "frozen", "usage": {"act": {"calls": 2, "prompt_tokens": 1_000_000,
                                              "completion_tokens": 0}}},
        {"phase": "frozen", "usage": {}},
    ]


def test_tokens_add_up_per_phase_and_purpose_and_are_priced(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(TABLE)
    table = PriceTable.load(tmp_path / "p.toml")
    cost = run_cost(_records(), "openai:gpt-4o-mini", table)
    assert cost.by_purpose() == {"act": (5, 1_001_000, 100), "extract": (1, 500, 200)}
    assert (cost.input_tokens, cost.output_tokens, cost.episodes) == (1_001_500, 300, 3)
    assert cost.price_key == "gpt-4o-mini" and cost.currency == "EUR"
    assert cost.money == pytest.approx((1_001_500 * 0.15 + 300 * 0.60) / 1e6)
    frozen = [x for x in cost.lines if x.phase == "frozen"]
    assert [x.money for x in frozen] == [pytest.approx(0.15)]
    d = cost.to_dict()
    assert d["by_purpose"]["extract"] == {"calls": 1, "input_tokens": 500,
                                          "output_tokens": 200, "money": 0.000195}
    assert run_cost(_records(), "openai:deepseek-chat", table).price_key == "deepseek-*"
    unpriced = run_cost(_records(), "openai:other", table)
    assert unpriced.money is None and "no entry" in unpriced.notes[0]
    assert "| **all** | **all** | 6 | 1001500 | 300 | - |" in unpriced.markdown()


@pytest.mark.parametrize("text, match", [("version = 2", "version"),
                                         ("version = 1\n[models.m]\ninput = -1\noutput = 1",
                                          "input"),
                                         ("version = 1\n[models.m]\nin = 1", "models"),
                                         ("version = [", "cannot read")])
def test_a_bad_price_table_is_a_config_error(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "p.toml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        PriceTable.load(tmp_path / "p.toml")


def test_the_table_comes_from_the_flag_then_the_environment_then_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DELTAMEM_PRICES", raising=False)
    assert find_price_table(tmp_path) is None
    (tmp_path / "prices.toml").write_text("version = 1\ncurrency = 'A'")
    (tmp_path / "env.toml").write_text("version = 1\ncurrency = 'B'")
    (tmp_path / "flag.toml").write_text("version = 1\ncurrency = 'C'")
    assert find_price_table(tmp_path).currency == "A"
    monkeypatch.setenv("DELTAMEM_PRICES", str(tmp_path / "env.toml"))
    assert find_price_table(tmp_path).currency == "B"
    assert find_price_table(tmp_path, tmp_path / "flag.toml").currency == "C"


def test_a_run_report_has_the_cost_table_and_cost_json(tmp_path: Path) -> None:
    cfg = RunConfig(run_dir=tmp_path / "r", env="corridor", split="test", llm="scripted",
                    memory="none", episodes=3, constrained=True)
    run(cfg, env=CorridorEnv(), llm=ScriptedLLM(), progress=False)
    (tmp_path / "p.toml").write_text('version = 1\n[models.scripted]\ninput = 2\noutput = 4\n')
    text = report(cfg.run_dir, plots=False, prices=tmp_path / "p.toml").read_text()
    assert "## Cost" in text and "priced as `scripted`" in text
    assert "| online | act |" in text
    cost = json.loads((cfg.run_dir / "cost.json").read_text())
    assert cost["version"] == 1 and cost["episodes"] == 3 and cost["money"] > 0
    assert set(cost["by_purpose"]) == {"act"}


def test_report_command_prints_tokens_and_money(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deltamem.cli import app

    cfg = RunConfig(run_dir=tmp_path / "r", env="corridor", split="test", llm="scripted",
                    memory="none", episodes=2, constrained=True)
    run(cfg, env=CorridorEnv(), llm=ScriptedLLM(), progress=False)
    (tmp_path / "p.toml").write_text('version = 1\n[models.scripted]\ninput = 2\noutput = 4\n')
    res = CliRunner().invoke(app, ["report", str(cfg.run_dir), "--no-plots",
                                   "--prices", str(tmp_path / "p.toml")])
    assert res.exit_code == 0, res.output
    assert "tokens in" in res.output and "USD" in res.output
