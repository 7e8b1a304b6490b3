"""Imports refuse every record that would leave a bank the loader cannot read (issue 17, item 1).

A refused import names the record and the reason and writes nothing; an accepted one gives
a bank that answers stats, recall, learn and export. The property test mutates a valid
export at random (a field's value or type, a missing field, a dropped, repeated or swapped
record) and checks exactly that dichotomy.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltamem.embed import HashingEmbedder
from deltamem.errors import EmbedderMismatchError, InvalidImportError, StoreError
from deltamem.memories.deltamem import DeltaMem, check_bank_config
from deltamem.store.jsonl import export_jsonl
from deltamem.store.sqlite import SQLiteStore
from deltamem.testing import make_episode

DIM = 16
GOALS = ["put a clean apple in fridge", "heat some egg and put it in garbagecan",
         "examine the book with the desklamp"]


def _export() -> list[dict[str, Any]]:
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(dim=DIM), domain="alfworld")
    for i, g in enumerate(GOALS):
        mem.learn(make_episode(g, episode_id=f"s{i}"))
    for i, g in enumerate(GOALS[:2]):  # failures of known tasks: residuals under the roots
        mem.learn(make_episode(g, episode_id=f"f{i}", success=False))
    mem.store.add_rejection(tree="task", role="task_root_success", reason="r", raw="x",
                            episode_id="s0")
    recs = list(mem.store.iter_export())
    mem.close()
    assert any(r["type"] == "node" and r["kind"] == "RESIDUAL" for r in recs)
    return recs


EXPORT = _export()
NODES = [i for i, r in enumerate(EXPORT) if r["type"] == "node"]
RESIDUAL = next(i for i in NODES if EXPORT[i]["kind"] == "RESIDUAL")


def emb(vec: Any) -> str:
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()


def fresh(tmp: Path) -> SQLiteStore:
    """An empty bank whose imports check configurations as DeltaMem does."""
    return SQLiteStore(tmp / "bank.db", config_check=check_bank_config)


def assert_nothing_written(store: SQLiteStore) -> None:
    assert store.load_nodes() == []
    assert "embedder_name" not in store.meta()
    assert store.learned_count() == 0 and store.rejections() == []


def mutated(**changes: Any) -> list[dict[str, Any]]:
    recs = copy.deepcopy(EXPORT)
    for where, fields in changes.items():
        i = RESIDUAL if where == "residual" else NODES[0] if where == "node" else int(where)
        recs[i].update(fields)
    return recs


def _other_tree_root() -> str:
    tree = EXPORT[RESIDUAL]["tree"]
    return next(EXPORT[i]["id"] for i in NODES if EXPORT[i]["tree"] != tree)


def _higher_seq() -> list[dict[str, Any]]:
    recs = copy.deepcopy(EXPORT)
    child = recs[RESIDUAL]
    parent = next(r for r in recs if r.get("id") == child["parent_id"])
    parent["seq"], child["seq"] = child["seq"], parent["seq"]
    return recs


CASES = {
    "own parent": (lambda: mutated(residual={"parent_id": EXPORT[RESIDUAL]["id"]}),
                   "is its own parent"),
    "parent with a higher seq": (_higher_seq, "comes before its parent"),
    "parent in the other tree": (lambda: mutated(residual={"parent_id": _other_tree_root()}),
                                 "has parent"),
    "unknown parent": (lambda: mutated(residual={"parent_id": "nobody"}),
                       "is not an earlier node"),
    "wrong depth": (lambda: mutated(residual={"depth": 3}), "its parent's is 1"),
    "deeper than D_max": (lambda: mutated(residual={
        "depth": check_bank_config({"domain": "alfworld"})["d_max"] + 1}), "D_max"),
    "ROOT with a parent": (lambda: mutated(node={"parent_id": EXPORT[NODES[1]]["id"]}),
                           "is a ROOT but has parent"),
    "RESIDUAL without parent": (lambda: mutated(residual={"parent_id": None}),
                                "is a RESIDUAL"),
    "wrong dimension": (lambda: mutated(node={"embedding": emb(np.ones(8) / math.sqrt(8))}),
                        "dimension 8, the bank 16"),
    "NaN in the embedding": (lambda: mutated(node={"embedding": emb(np.full(DIM, np.nan))}),
                             "non-finite"),
    "not base64": (lambda: mutated(node={"embedding": "%%%"}), "not valid base64"),
    "not unit norm": (lambda: mutated(node={"embedding": emb(np.full(DIM, 1.0))}),
                      "unit vectors"),
    "seq 0": (lambda: mutated(node={"seq": 0}), "seq must be an integer"),
    "seq -5": (lambda: mutated(node={"seq": -5}), "seq must be an integer"),
    "seq 2^63-1": (lambda: mutated(node={"seq": 2**63 - 1}), "seq must be an integer"),
    "seq as text": (lambda: mutated(node={"seq": "3"}), "seq must be an integer"),
    "dict as node id": (lambda: mutated(node={"id": {"a": 1}}), "id must be text"),
    "list as trigger": (lambda: mutated(node={"trigger": ["a"]}), "trigger must be text"),
    "dict as episode id": (lambda: mutated(node={"episode_id": {}}), "episode_id must be text"),
    "consolidated as text": (lambda: mutated(node={"consolidated": "yes"}),
                             "consolidated must be true or false"),
    "hits as float": (lambda: mutated(node={"success_hits": 1.5}), "success_hits"),
    "unknown tree": (lambda: mutated(node={"tree": "forest"}), "tree must be one of"),
    "NaN time": (lambda: mutated(node={"created_at": float("nan")}), "created_at"),
    "duplicate id": (lambda: mutated(**{str(NODES[1]): {"id": EXPORT[NODES[0]]["id"]}}),
                     "occurs twice"),
    "list as rejection reason": (
        lambda: [*copy.deepcopy(EXPORT), {"type": "rejection", "tree": "task", "role": "r",
                                          "reason": [1], "raw": "", "episode_id": "e",
                                          "created_at": 1.0}], "reason must be text"),
    "dict as learned id": (lambda: [*copy.deepcopy(EXPORT),
                                    {"type": "learned", "episode_id": {"x": 1},
                                     "learned_at": 1.0}], "episode_id must be text"),
    "second meta": (lambda: [*copy.deepcopy(EXPORT), copy.deepcopy(EXPORT[0])],
                    "may only be the first"),
    "bad config": (lambda: mutated(**{"0": {"config": {"tau_task": 7}}}),
                   "not a valid DeltaMem configuration"),
    "bad dimension in meta": (lambda: mutated(**{"0": {"embedder_dim": 0}}), "embedder_dim"),
    "embedder name without dimension": (
        lambda: [{k: v for k, v in EXPORT[0].items() if k != "embedder_dim"},
                 *copy.deepcopy(EXPORT[1:])], "must come together"),
    "NUL in text": (lambda: mutated(node={"trigger": "a\x00b"}), "NUL"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_import_that_breaks_an_invariant_is_refused_whole(case: str, tmp_path: Path) -> None:
    make, reason = CASES[case]
    store = fresh(tmp_path)
    with pytest.raises(InvalidImportError, match=r"record \d+") as info:
        store.import_records(make())
    assert reason in str(info.value)
    assert_nothing_written(store)
    assert store.import_records(copy.deepcopy(EXPORT)) == len(NODES)  # still usable
    store.close()


def test_an_empty_export_is_refused(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    with pytest.raises(InvalidImportError, match="no records"):
        store.import_records([])
    store.close()


def test_a_valid_export_round_trips(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    assert store.import_records(copy.deepcopy(EXPORT)) == len(NODES)
    assert list(store.iter_export()) == EXPORT
    store.close()


class _Named:
    """The hashing embedder under the name and dimension a bank records."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim
        self._inner = HashingEmbedder(dim=dim)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._inner.embed_queries(texts)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._inner.embed_passages(texts)


def answers_every_call(path: Path) -> None:
    meta = SQLiteStore(path, readonly=True)
    info = meta.meta()
    meta.close()
    embedder = _Named(info.get("embedder_name", "hashing"), int(info.get("embedder_dim", DIM)))
    mem = DeltaMem.open(path, embedder=embedder)
    try:
        mem.stats()
        for n in [*mem.nodes("task"), *mem.nodes("env")]:
            assert n.seq >= 1
        task = make_episode(GOALS[0]).task
        rec = mem.recall(task)
        mem.learn(make_episode(GOALS[0], episode_id="after-import"), rec)
        mem.learn(make_episode("a goal never seen before", episode_id="after-import-2"))
        export_jsonl(mem.store, path.with_suffix(".jsonl"))
        again = [json.loads(x) for x in path.with_suffix(".jsonl").read_text().splitlines()]
        assert sum(r["type"] == "node" for r in again) == len(mem.store.load_nodes())
    finally:
        mem.close()


FIELD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, 2, 5, 6, -1, 2**53, 2**63 - 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["task", "env", "ROOT", "RESIDUAL", "SUCCESS", "FAILURE", "", "\x00",
                     *(EXPORT[i]["id"] for i in NODES), emb(np.ones(DIM) / 4),
                     emb(np.ones(8) / math.sqrt(8)), emb(np.zeros(DIM)), "AAAA"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2),
)


@st.composite
def mutations(draw: st.DrawFn) -> list[dict[str, Any]]:
    recs = copy.deepcopy(EXPORT)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "set", "set", "drop_field", "drop", "repeat", "swap"]))
        i = draw(st.integers(0, len(recs) - 1))
        if op == "set":
            keys = [*sorted(recs[i]), "extra"]
            recs[i][draw(st.sampled_from(keys))] = draw(FIELD_VALUES)
        elif op == "drop_field" and recs[i]:
            del recs[i][draw(st.sampled_from(sorted(recs[i])))]
        elif op == "drop" and len(recs) > 1:
            del recs[i]
        elif op == "repeat":
            recs.insert(draw(st.integers(0, len(recs))), copy.deepcopy(recs[i]))
        elif op == "swap":
            j = draw(st.integers(0, len(recs) - 1))
            recs[i], recs[j] = recs[j], recs[i]
    return recs


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(recs=mutations())
def test_any_mutation_imports_to_a_working_bank_or_is_refused_with_nothing_written(
    recs: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bank.db"
        store = SQLiteStore(path)
        try:
            store.import_records(recs)
        except EmbedderMismatchError:
            raise
        except StoreError as e:
            assert isinstance(e, InvalidImportError), e
            assert_nothing_written(store)
            store.close()
            return
        store.close()
        answers_every_call(path)
