"""The analysis commands on a typer app: thin wrappers around the library functions."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from deltamem.cli.analysis import register
from deltamem.errors import DeltaMemError
from tests.analysis.analysis_toys import MakeRun, make_run

__all__ = ["make_run"]  # the fixture, shared with tests/analysis

COMMANDS = ("compare", "table2", "table3", "table5", "depth-bars", "grid", "calibrate")


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register(app)
    return app


def test_every_command_is_registered_with_help(app: typer.Typer) -> None:
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "Usage" in result.output


def test_compare_and_table5_write_next_to_the_runs(
    app: typer.Typer, make_run: MakeRun, tmp_path: Path
) -> None:
    a, b = make_run("a"), make_run("b", memory="deltamem")
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "compare.md").exists()
    result = CliRunner().invoke(app, ["table5", str(b)])
    assert result.exit_code == 0, result.output
    assert (b / "table5.md").exists()
    result = CliRunner().invoke(app, ["depth-bars", str(b), "--out", str(tmp_path / "o"),
                                      "--no-plots"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "depth_bars.md").exists()


def test_library_errors_reach_the_entry_point(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["table2", str(tmp_path)])
    assert isinstance(result.exception, DeltaMemError)
    result = CliRunner().invoke(app, ["grid", "--env", "x", "--split", "s", "--out",
                                      str(tmp_path), "--k-cons", "3,x"])
    assert isinstance(result.exception, DeltaMemError)
