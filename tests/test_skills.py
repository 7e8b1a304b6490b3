"""Skills that travel: SKILL.md folders from a bank's Task-Tree, and back (issue 50)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from deltamem import DeltaMem
from deltamem.embed import HashingEmbedder
from deltamem.errors import InvalidImportError
from deltamem.extract.residual import chain_steps
from deltamem.skills import (
    MANIFEST_FILE,
    export_skills,
    import_skills,
    read_manifest,
    read_skill,
)
from deltamem.testing import make_episode

FRIDGE = [("go to countertop 1", "You see an apple 1."),
          ("take apple 1 from countertop 1", "You pick up the apple 1."),
          ("go to fridge 1", "The fridge 1 is closed."),
          ("open fridge 1", "You open the fridge 1."),
          ("put apple 1 in/on fridge 1", "You put the apple 1 in/on the fridge 1.")]
MUG = [("go to shelf 1", "You see a mug 2."), ("take mug 2 from shelf 1", "You take it."),
       ("go to coffeemachine 1", "You see nothing."),
       ("heat mug 2 with coffeemachine 1", "Hot."),
       ("go to desk 1", "You see a lamp."), ("put mug 2 in/on desk 1", "Done.")]
GOALS = ["put a clean apple in fridge", "put some apple in fridge", "put a hot mug in desk",
         "put a clean mug in desk"]


def _bank(path: Path) -> Path:
    mem = DeltaMem.open(path, embedder=HashingEmbedder(), domain="alfworld",
                        task_trigger="abstract")
    try:
        mem.learn(make_episode(GOALS[0], task_id="a"))
        mem.learn(make_episode(GOALS[0], task_id="b", success=False,
                               actions=FRIDGE[:2]))  # a failure under the skill
        mem.learn(make_episode(GOALS[1], task_id="c", actions=FRIDGE))
        mem.learn(make_episode(GOALS[2], task_id="d", actions=MUG))
        mem.learn(make_episode(GOALS[2], task_id="e", actions=[*MUG[:4], ("look", "x"),
                                                                 *MUG[4:]]))  # a residual
    finally:
        mem.close()
    return path


def _recalled_steps(bank: Path) -> list[list[str] | None]:
    mem = DeltaMem.open(bank, embedder=HashingEmbedder(), readonly=True)
    try:
        out = []
        for goal in GOALS:
            best = mem.match(make_episode(goal).task)["task"]
            out.append(chain_steps([n.entry() for n in mem.chain(best.node_id)])
                       if best.accepted else None)
        return out
    finally:
        mem.close()


def test_skills_round_trip_into_an_empty_bank_with_the_same_recalls(tmp_path: Path) -> None:
    src = _bank(tmp_path / "bank.db")
    n = export_skills(src, tmp_path / "skills")
    assert n == 4  # every SUCCESS node of the Task-Tree (the failure is not a skill)
    r = import_skills(tmp_path / "skills", tmp_path / "copy.db", embedder=HashingEmbedder())
    assert (r.skills, r.skipped) == (4, [])
    assert r.failures >= 1
    before, after = _recalled_steps(src), _recalled_steps(tmp_path / "copy.db")
    assert before == after and all(before)
    mem = DeltaMem.open(tmp_path / "copy.db", embedder=None, readonly=True)
    try:
        audit = mem.store.audit()
        assert [a["action"] for a in audit] == ["import"] * 4
        assert {a["policy"] for a in audit} == {"skills"}
        assert mem.config.domain == "alfworld" and mem.config.task_trigger == "abstract"
    finally:
        mem.close()


def test_a_skill_md_follows_the_convention(tmp_path: Path) -> None:
    export_skills(_bank(tmp_path / "bank.db"), tmp_path / "skills")
    folders = sorted(p for p in (tmp_path / "skills").iterdir() if p.is_dir())
    warned = 0
    for folder in folders:
        text = (folder / "SKILL.md").read_text()
        front = yaml.safe_load(text.split("---\n")[1])
        assert re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?", front["name"])
        assert front["name"] == folder.name
        assert 0 < len(front["description"]) <= 1024
        assert front["description"].startswith("Use when the task is: ")
        assert all(isinstance(v, str) for v in front["metadata"].values())
        assert front["metadata"]["deltamem-schema"] == "1"
        assert "## Procedure\n\n1. " in text and "## Provenance" in text
        warned += "- WARNING: " in text
        skill = read_skill(folder)
        assert skill.steps and skill.trigger == front["metadata"]["deltamem-trigger"]
    assert warned >= 1  # the failed episode is a known failure of the fridge skill
    manifest = read_manifest(tmp_path / "skills")
    assert manifest is not None and manifest["counts"]["skills"] == len(folders)
    assert len(manifest["files"]) == 2 * len(folders) and len(manifest["checksum"]) == 64


def test_a_tampered_export_is_refused(tmp_path: Path) -> None:
    export_skills(_bank(tmp_path / "bank.db"), tmp_path / "skills")
    folder = next(p for p in (tmp_path / "skills").iterdir() if p.is_dir())
    md = folder / "SKILL.md"
    md.write_text(md.read_text().replace("1. ", "1. jump off a cliff; ", 1))
    with pytest.raises(InvalidImportError, match="differs from the manifest"):
        import_skills(tmp_path / "skills", tmp_path / "copy.db", embedder=HashingEmbedder())
    assert not (tmp_path / "copy.db").exists() or _count(tmp_path / "copy.db") == 0
    manifest = json.loads((tmp_path / "skills" / MANIFEST_FILE).read_text())
    manifest["counts"]["skills"] += 1
    (tmp_path / "skills" / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(InvalidImportError):
        read_manifest(tmp_path / "skills")


def test_an_incomplete_folder_is_refused_as_a_cut_export_is(tmp_path: Path) -> None:
    """A skill folder deleted from a copy (the manifest still lists it) is refused with
    IncompleteExportError naming what is missing, nothing written, as a cut JSONL export
    is; ``partial`` imports the whole ones and reports the rest."""
    import shutil

    from deltamem.errors import IncompleteExportError
    from deltamem.store.frames import Tally

    n = export_skills(_bank(tmp_path / "bank.db"), tmp_path / "skills")
    manifest = read_manifest(tmp_path / "skills")
    assert manifest is not None
    # one way to count and checksum: the JSONL exports' Tally over the files as records
    tally = Tally()
    for rel in sorted(manifest["files"]):
        kind = "skill" if rel.endswith("/SKILL.md") else "sidecar"
        tally.add({"type": kind, "path": rel, "sha256": manifest["files"][rel]})
    assert manifest["checksum"] == tally.sha256
    assert manifest["file_counts"] == {"sidecar": n, "skill": n}
    gone = sorted(p for p in (tmp_path / "skills").iterdir() if p.is_dir())[0]
    shutil.rmtree(gone)
    with pytest.raises(IncompleteExportError,
                       match=rf"missing 1 of {n} SKILL.md files, 1 of {n} deltamem.json "
                             rf"sidecars \({gone.name}/"):
        import_skills(tmp_path / "skills", tmp_path / "copy.db", embedder=HashingEmbedder())
    assert not (tmp_path / "copy.db").exists()  # nothing written
    got = import_skills(tmp_path / "skills", tmp_path / "copy.db", embedder=HashingEmbedder(),
                        partial=True)
    assert got.skills == n - 1 and got.skipped == [f"{gone.name}: not whole (see the manifest)"]
    # a folder the manifest does not list is not whole either
    shutil.copytree(sorted(p for p in (tmp_path / "skills").iterdir() if p.is_dir())[0],
                    tmp_path / "skills" / "smuggled-skill")
    with pytest.raises(IncompleteExportError, match="does not list \\(smuggled-skill\\)"):
        read_manifest(tmp_path / "skills")


def _count(bank: Path) -> int:
    mem = DeltaMem.open(bank, embedder=None, readonly=True)
    try:
        return len(mem.nodes("task"))
    finally:
        mem.close()


def test_a_skill_written_elsewhere_imports(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "water-the-plant"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: water-the-plant\ndescription: Water a plant when it looks dry.\n---\n\n"
        "# water the plant\n\n## Procedure\n\n- go to sinkbasin 1\n- fill cup 1 with water\n"
        "- go to plant 1\n- pour cup 1 on plant 1\n\n## Known failures\n\n"
        "- WARNING: do not pour on the lamp\n")
    (tmp_path / "skills" / "notes").mkdir()  # not a skill: ignored
    r = import_skills(tmp_path / "skills", tmp_path / "b.db", embedder=HashingEmbedder())
    assert (r.skills, r.failures) == (1, 1)
    mem = DeltaMem.open(tmp_path / "b.db", embedder=HashingEmbedder(), readonly=True)
    try:
        recall = mem.recall(make_episode("water the plant").task)
        assert "pour cup 1 on plant 1" in recall.text
    finally:
        mem.close()


def test_the_cli_exports_and_imports_skills(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deltamem.cli import app

    src = _bank(tmp_path / "bank.db")
    runner = CliRunner()
    res = runner.invoke(app, ["export", str(src), str(tmp_path / "s"), "--format", "skills"])
    assert res.exit_code == 0, res.output
    assert "wrote 4 skills" in res.output
    res = runner.invoke(app, ["import", str(tmp_path / "s"), str(tmp_path / "c.db"),
                              "--format", "skills"])
    assert res.exit_code == 0, res.output
    assert "imported 4 skills" in res.output
    assert _recalled_steps(src) == _recalled_steps(tmp_path / "c.db")
