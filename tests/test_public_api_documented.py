"""The public names an independent test suite or tool needs: typed matches, listing
nodes, export/import from Python, the extractor's types, the table embedder."""

from __future__ import annotations

import json

import pytest

import deltamem
from deltamem import DeltaMem, Match, Payload, Recall, export_bank, import_bank
from deltamem.embed import HashingEmbedder, TableEmbedder
from deltamem.errors import EmbedderMismatchError, InvalidInputError, StoreError
from deltamem.extract import (
    CONSOLIDATION_ROLES,
    EXTRACTION_ROLES,
    SKIPPABLE,
    ChainEntry,
    Extractor,
)
from deltamem.testing import make_episode

H = HashingEmbedder(dim=64)


def _bank(path):
    mem = DeltaMem.open(path, embedder=H, domain="alfworld", tau_task=0.5, tau_env=0.5)
    first = make_episode(episode_id="e1")
    mem.learn(first)
    return mem, first


def test_recall_matches_are_typed(tmp_path):
    mem, first = _bank(tmp_path / "b.db")
    r = mem.recall(first.task)
    m = r.matches
    assert set(m) == {"task", "env"}
    for tree, match in m.items():
        assert isinstance(match, Match) and match.tree == tree
        assert match.accepted and match.score == pytest.approx(1.0)
        assert match.tau == 0.5
        assert match.chain and match.chain[-1] == match.node_id
        assert match.node_id in {n.id for n in mem.nodes(tree)}  # type: ignore[arg-type]
    # the typed view is the same as the documented detail keys
    assert r.details["task"]["node_id"] == m["task"].node_id
    # a cold tree gives a match that was not accepted and no chain
    empty = DeltaMem.open(":memory:", embedder=H, domain="alfworld")
    cold = empty.recall(first.task).matches["task"]
    assert (cold.node_id, cold.score, cold.accepted, cold.chain) == (None, None, False, ())
    # memories without trees have no matches; details survive a JSON round trip
    assert Recall(details={"lessons": [1, 2]}).matches == {}
    back = Recall(**{**r.to_dict(), "items": ()})
    assert json.loads(json.dumps(r.to_dict()))["details"] == back.details
    assert back.matches == m


def test_nodes_lists_a_tree_parents_first(tmp_path):
    mem, first = _bank(tmp_path / "b.db")
    # same goal, other steps: a residual under the root
    mem.learn(make_episode(episode_id="e2", actions=[
        ("go to cabinet 4", "On the cabinet 4, you see a apple 3."),
        ("take apple 3 from cabinet 4", "You pick up the apple 3."),
    ]))
    nodes = mem.nodes("task")
    assert [n.kind for n in nodes] == ["ROOT", "RESIDUAL"]
    assert nodes[1].parent == nodes[0].id and nodes[1].depth == 2
    assert nodes[0].trigger == mem.queries(first.task)["task"]  # the text that was embedded
    assert DeltaMem.nodes.__doc__ and "parents before children" in DeltaMem.nodes.__doc__


def test_export_and_import_from_python(tmp_path):
    mem, first = _bank(tmp_path / "b.db")
    n = mem.export(tmp_path / "a.jsonl")
    mem.close()
    assert n == export_bank(tmp_path / "b.db", tmp_path / "b.jsonl")
    assert import_bank(tmp_path / "b.jsonl", tmp_path / "c.db") == 2
    copy = DeltaMem.import_(tmp_path / "a.jsonl", tmp_path / "d.db", embedder=H)
    assert copy.stats()["nodes"] == {"task": 1, "env": 1}
    assert copy.recall(first.task).matches["task"].accepted
    copy.close()
    with pytest.raises(EmbedderMismatchError):
        DeltaMem.import_(tmp_path / "a.jsonl", tmp_path / "e.db",
                         embedder=HashingEmbedder(dim=32))
    with pytest.raises(StoreError):  # the target must be empty
        import_bank(tmp_path / "b.jsonl", tmp_path / "c.db")
    with pytest.raises(InvalidInputError):
        import_bank(tmp_path / "missing.jsonl", tmp_path / "f.db")


def test_custom_extractor_needs_only_public_names(tmp_path):
    class Terse:
        name = "terse"

        def extract(self, role, episode, chain, domain):
            if role in SKIPPABLE and chain:
                return None
            return Payload(activation=episode.task.goal, procedure=episode.steps[-1].action)

        def consolidate(self, tree, chain, domain):
            assert all(isinstance(c, ChainEntry) for c in chain)
            return Payload(activation="fused", procedure=" ; ".join(
                c.payload.procedure for c in chain))

    assert isinstance(Terse(), Extractor)
    assert set(EXTRACTION_ROLES) > SKIPPABLE and len(CONSOLIDATION_ROLES) == 2
    mem = DeltaMem.open(":memory:", embedder=H, extractor=Terse(), domain="alfworld")
    mem.learn(make_episode(episode_id="a"))
    changes = mem.learn(make_episode(episode_id="b"))
    assert [c.kind for c in changes.skipped] == ["skipped", "skipped"]


def test_table_embedder_is_an_embedder():
    e = TableEmbedder({"a": [3.0, 4.0], "b": [0.0, 1.0]})
    assert e.dim == 2 and e.name == "table-2"
    assert e.embed_queries(["a"])[0].tolist() == pytest.approx([0.6, 0.8])
    from deltamem.testing import TableEmbedder as T

    assert T is TableEmbedder


def test_new_names_are_public():
    for name in ("Match", "Payload", "export_bank", "import_bank"):
        assert name in deltamem.__all__


def test_every_name_in_the_api_doc_imports():
    """docs/api.md's table: each backticked name imports from the module its row names."""
    import importlib
    import re
    from pathlib import Path

    doc = Path(__file__).parents[1] / "docs" / "api.md"
    rows = [ln for ln in doc.read_text(encoding="utf-8").splitlines()
            if ln.startswith("| `") and "from deltamem" in ln]
    assert len(rows) >= 10
    checked = 0
    for row in rows:
        names_cell, where = row.split("|")[1], row.split("|")[2]
        module = re.search(r"from (deltamem[\w.]*) import", where).group(1)  # type: ignore[union-attr]
        mod = importlib.import_module(module)
        for name in re.findall(r"`(\w+)`", names_cell):
            if name == "DeltaMemError" or hasattr(mod, name):
                checked += 1
                continue
            raise AssertionError(f"docs/api.md: {name} is not importable from {module}")
    assert checked >= 30
