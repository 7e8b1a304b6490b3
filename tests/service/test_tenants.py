"""The bank service without a web framework: what HTTP and MCP both call (TenantBanks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.embed import HashingEmbedder
from deltamem.errors import EmbedderMismatchError, IncompleteExportError, InvalidImportError
from deltamem.service import (
    BankNotEmpty,
    BankNotFound,
    BankSpace,
    ReadOnlyError,
    TenantBanks,
)
from deltamem.testing import make_episode

GOAL = "put a clean apple in fridge"


def service(folder: Path, **kw) -> TenantBanks:
    return TenantBanks(BankSpace(folder), embedder=HashingEmbedder(dim=64),
                       config={"domain": "alfworld"}, **kw)


def test_learn_creates_the_bank_and_recall_reads_it(tmp_path: Path) -> None:
    svc = service(tmp_path)
    task = make_episode(GOAL).task
    assert svc.recall("alice", "kitchen", task).empty  # no bank yet: nothing, nothing made
    assert svc.list("alice") == {}
    out = svc.learn("alice", "kitchen", make_episode(GOAL, episode_id="e1"))
    assert [c.kind for c in out.changes] == ["written", "written"]
    assert out.usage.total_tokens == 0  # no LLM behind the structural extractor
    assert svc.list("alice") == {"kitchen": {"task": 1, "env": 1}}
    assert not svc.recall("alice", "kitchen", task).empty
    stats = svc.stats("alice", "kitchen")
    assert stats.bank == "kitchen" and stats.nodes == {"task": 1, "env": 1}
    tree = svc.tree("alice", "kitchen", "task")
    assert [n.tree for n in tree.nodes] == ["task"] and tree.embedder == "hashing-64"
    explained = svc.explain("alice", "kitchen", GOAL)
    assert explained.trees["task"].match.accepted
    svc.close()


def test_a_tenant_reaches_only_its_own_banks(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.learn("alice", "kitchen", make_episode(GOAL))
    assert svc.list("bob") == {}
    assert svc.recall("bob", "kitchen", make_episode(GOAL).task).empty
    with pytest.raises(BankNotFound, match="no bank named 'kitchen'"):
        svc.stats("bob", "kitchen")
    with pytest.raises(BankNotFound, match="no bank named 'kitchen'"):
        svc.delete("bob", "kitchen")
    assert svc.delete("alice", "kitchen").deleted and svc.list("alice") == {}
    svc.close()


def test_export_imports_into_an_empty_bank_only(tmp_path: Path) -> None:
    svc = service(tmp_path)
    svc.learn("alice", "kitchen", make_episode(GOAL))
    records = svc.export("alice", "kitchen")
    assert records[0]["type"] == "header" and records[1]["type"] == "meta"
    assert svc.import_("alice", "copy", records).nodes == 2
    assert svc.stats("alice", "copy").nodes == svc.stats("alice", "kitchen").nodes
    with pytest.raises(BankNotEmpty):
        svc.import_("alice", "copy", records)
    with pytest.raises(InvalidImportError, match="meta record"):
        svc.import_("alice", "other", records[2:])
    assert "other" not in svc.list("alice")  # the bank made for a failed import is gone
    other = {**records[1], "embedder_name": "minilm", "embedder_dim": 384}
    with pytest.raises(EmbedderMismatchError):
        svc.import_("alice", "other", [records[0], other, *records[2:]])
    svc.close()


def test_a_read_only_service_refuses_every_write(tmp_path: Path) -> None:
    service(tmp_path).learn("alice", "kitchen", make_episode(GOAL))
    ro = service(tmp_path, readonly=True)
    assert ro.stats("alice", "kitchen").nodes == {"task": 1, "env": 1}
    for write in (lambda: ro.learn("alice", "kitchen", make_episode(GOAL, episode_id="e2")),
                  lambda: ro.import_("alice", "x", [{"type": "meta"}]),
                  lambda: ro.delete("alice", "kitchen")):
        with pytest.raises(ReadOnlyError):
            write()
    assert ro.stats("alice", "kitchen").episodes_learned == 1
    ro.close()


def test_a_cut_export_is_refused_and_partial_says_what_it_skipped(tmp_path: Path) -> None:
    """Issue 51: the service's import checks the export's trailer like ``deltamem import``."""
    svc = service(tmp_path)
    svc.learn("alice", "kitchen", make_episode(GOAL, episode_id="e1"))
    svc.learn("alice", "kitchen", make_episode(GOAL, episode_id="e2"))
    records = svc.export("alice", "kitchen")
    with pytest.raises(IncompleteExportError, match="missing 2 of 2 learned episode ids"):
        svc.import_("alice", "copy", records[:4])
    assert "copy" not in svc.list("alice")
    out = svc.import_("alice", "copy", records[:4], partial=True)
    assert out.nodes == 2 and any("skipped (not in the file): 2 learned" in n for n in out.notes)
    assert svc.import_("alice", "whole", records).notes == []
    old = svc.import_("alice", "old", records[1:-1]).notes
    assert len(old) == 1 and "no header or trailer" in old[0]
    svc.close()
