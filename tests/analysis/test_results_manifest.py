"""The results page regenerated whole from a manifest of runs and their digests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deltamem.analysis.results_manifest import (
    draw_plots,
    load_manifest,
    load_runs,
    render,
    slug,
)
from deltamem.analysis.run_digest import from_run_dir, write_digest
from deltamem.errors import ConfigError

from .analysis_toys import fake_run

MANIFEST = '''
title = "Results"
intro = "Toy runs."
notebook = "notebook.md"

[[question]]
id = "helps"
title = "Does memory help?"
reading = "It does, on the toy."
headline = true
plot = true
runs = [{ name = "none" }, { name = "awm" }, { name = "dm" }]

[[question]]
id = "own-play"
title = "What does learning from its own play add?"
reading = "Only the unfrozen phase is shown."

[[question.runs]]
name = "dm-both"
phase = ["unfrozen"]
label = "deltamem, learning"
group = "Own play"
command = "python -m deltamem run -c own.toml"

[[question]]
id = "babyai"
title = "BabyAI"
reading = "Not measured at the current code."

[[question]]
id = "household"
title = "Household"
reading = "The first question's runs are household games."
see = ["helps"]
'''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A docs folder: the manifest, digests of four runs under data/runs."""
    runs = tmp_path / "runs"
    dirs = [fake_run(runs, "none", "none", [0, 0, 0, 1]),
            fake_run(runs, "awm", "awm", [1, 0, 1, 1]),
            fake_run(runs, "dm", "deltamem", [1, 1, 1, 1], commit="aef4ddf5af79"),
            fake_run(runs, "dm-both", "deltamem", [1, 1, 0, 1], phase="unfrozen")]
    docs = tmp_path / "docs"
    for d in dirs:
        write_digest(from_run_dir(d), docs / "data" / "runs" / f"{d.name}.jsonl")
    (docs / "results.toml").write_text(MANIFEST)
    return docs


def _page(site: Path) -> str:
    manifest = load_manifest(site / "results.toml")
    return render(manifest, load_runs(manifest, site / "data" / "runs"))


def test_the_page_has_contents_a_headline_and_one_section_per_question(site: Path) -> None:
    page = _page(site)
    heads = [x for x in page.splitlines() if x.startswith("## ")]
    assert heads == ["## Contents", "## Headline", "## How to read the tables",
                     "## Does memory help?", "## What does learning from its own play add?",
                     "## BabyAI", "## Household"]
    for q in ("Does memory help?", "BabyAI"):
        assert f"* [{q}](#{slug(q)})" in page
    row = next(x for x in page.splitlines() if x.startswith("| [Does memory help?]"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == ["25.0", "100.0", "awm 75.0"]
    assert cells[5].startswith("+75.0 [")
    assert "[lab notebook](notebook.md)" in page
    # when and where the runs were played, as far as they recorded it
    assert ("Played 2026-11-28 at `aef4ddf`, an unrecorded day at an unrecorded commit."
            in page)
    assert "![Does memory help?: success with 95 % intervals](data/plots/helps.png)" in page


def test_a_question_shows_only_its_phases_under_its_group_with_its_label(site: Path) -> None:
    page = _page(site)
    section = page.split("## What does learning from its own play add?")[1].split("## BabyAI")[0]
    assert "### Own play" in section and "#### corridor, split `test`" in section
    assert "| deltamem, learning | expert x 2 (train) | unfrozen | 4 | 75.0 |" in section
    assert "python -m deltamem run -c own.toml" in section
    babyai, household = page.split("## BabyAI")[1].split("## Household")
    assert "No current run answers this yet." in babyai
    assert "Tables: [Does memory help?](#does-memory-help)." in household
    assert "No current run" not in household


def test_the_page_is_the_same_text_every_time(site: Path) -> None:
    assert _page(site) == _page(site)


def test_a_manifest_is_checked_before_anything_is_drawn(tmp_path: Path, site: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(MANIFEST.replace('reading = "It does', 'colour = "red"\nreading = "It does'))
    with pytest.raises(ConfigError, match="colour"):
        load_manifest(bad)
    bad.write_text(MANIFEST.replace('id = "babyai"', 'id = "helps"'))
    with pytest.raises(ConfigError, match="share an id"):
        load_manifest(bad)
    bad.write_text(MANIFEST.replace('see = ["helps"]', 'see = ["nowhere"]'))
    with pytest.raises(ConfigError, match="nowhere"):
        load_manifest(bad)
    bad.write_text(MANIFEST.replace('phase = ["unfrozen"]', 'phase = ["build"]'))
    with pytest.raises(ConfigError, match="unknown phase"):
        load_manifest(bad)
    manifest = load_manifest(site / "results.toml")
    (site / "data" / "runs" / "awm.jsonl").unlink()
    with pytest.raises(ConfigError, match="awm"):
        load_runs(manifest, site / "data" / "runs")


def test_slug_is_github_s_anchor() -> None:
    assert slug("Does memory help?") == "does-memory-help"
    assert slug("DeltaMem against each baseline (`awm`, `synapse`)") == \
        "deltamem-against-each-baseline-awm-synapse"
    assert slug("Bundled model − model-free") == "bundled-model--model-free"


def test_plots_are_drawn_per_question_that_asks(site: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    manifest = load_manifest(site / "results.toml")
    written = draw_plots(manifest, load_runs(manifest, site / "data" / "runs"), tmp_path / "p")
    assert written == [tmp_path / "p" / "helps.png"]
    assert written[0].read_bytes()[:4] == b"\x89PNG"


def _script():
    spec = importlib.util.spec_from_file_location(
        "results_script", Path(__file__).parents[2] / "scripts" / "results.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_script_digests_runs_then_writes_the_page_from_the_manifest(
        tmp_path: Path, site: Path) -> None:
    mod = _script()
    runs = tmp_path / "runs"
    (runs / "notes.log").write_text("a log a glob also matches")
    out = tmp_path / "digests"
    assert mod.main(["--digest", str(runs / "dm"), str(runs / "notes.log"), "--prefix", "x-",
                     "--digest-dir", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["x-dm.jsonl"]
    assert '"run_dir": "runs/x-dm"' in (out / "x-dm.jsonl").read_text()
    assert mod.main(["--manifest", str(site / "results.toml"), "--no-plots"]) == 0
    assert (site / "results.md").read_text() == _page(site)
    assert not (site / "data" / "plots").exists()
