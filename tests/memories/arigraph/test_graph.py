"""The memory graph: updates, replacement, Algorithm 2 (BFS d/w), Eq. 1, persistence."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("networkx")

from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError, InvalidInputError
from deltamem.memories.arigraph.graph import AriGraph, episodic_score
from deltamem.memories.arigraph.triplets import Triplet

T = Triplet


def chain() -> AriGraph:
    g = AriGraph()
    g.update(0, "a b", [T("alpha", "links", "beta")])
    g.update(1, "b c", [T("beta", "links", "gamma")])
    g.update(2, "c d", [T("gamma", "links", "delta")])
    return g


def test_triplet_normalises_and_rejects_empty() -> None:
    assert T(" The Red  Apple ", "Is On", "a Table.") == T("red apple", "is on", "table")
    assert T.parse("kitchen, contains, apple").text == "kitchen, contains, apple"
    with pytest.raises(InvalidInputError):
        T(" . ", "is", "x")
    with pytest.raises(InvalidInputError):
        T.parse("only, two")


def test_update_records_growth_and_episodic_vertex() -> None:
    g = AriGraph()
    row = g.update(0, "obs", [T("kitchen", "contains", "apple"), T("apple", "is on", "table")])
    assert (row.added, row.replaced, row.triplets) == (2, 0, 2)
    row = g.update(1, "obs2", [T("kitchen", "contains", "apple")])
    assert (row.added, row.replaced, row.triplets) == (0, 0, 2)
    assert [o.step for o in g.observations] == [0, 1]
    assert g.observations[1].triplets == (T("kitchen", "contains", "apple"),)


def test_replacement_removes_outdated_and_keeps_unrelated() -> None:
    g = AriGraph()
    keep = [T("kitchen", "has exit", "east"), T("knife", "used for", "cutting")]
    old = T("apple", "is on", "table")
    g.update(0, "o", [old, *keep])
    new = T("apple", "is in", "inventory")
    row = g.update(1, "You take the apple.", [new], outdated=[old])
    assert row.replaced == 1 and row.added == 1
    assert old not in g and new in g
    assert all(t in g for t in keep)
    assert "table" not in g.vertices  # vertex left without edges is dropped
    # an episodic edge keeps its triplet even after the triplet left E_s
    assert old in g.observations[0].triplets


def test_incident_is_one_hop() -> None:
    g = chain()
    assert set(g.incident(["beta"])) == {T("alpha", "links", "beta"), T("beta", "links", "gamma")}


@pytest.mark.parametrize(("d", "expected"), [
    (0, []),
    (1, [T("alpha", "links", "beta")]),
    (2, [T("alpha", "links", "beta"), T("beta", "links", "gamma")]),
    (3, [T("alpha", "links", "beta"), T("beta", "links", "gamma"), T("gamma", "links", "delta")]),
])
def test_bfs_respects_depth(d: int, expected: list[Triplet]) -> None:
    assert chain().semantic_search(HashingEmbedder(), "alpha", d=d, w=5) == expected


def test_bfs_respects_width() -> None:
    g = AriGraph()
    spokes = [T("hub", "has", x) for x in ("red apple", "green pear", "blue cup", "old book")]
    leaves = [T(s.object, "is in", "box") for s in spokes]
    g.update(0, "o", spokes + leaves)
    got = g.semantic_search(HashingEmbedder(), "hub", d=1, w=2)
    assert len(got) == 2 and set(got) <= set(spokes)
    # depth 2: the 2 leaves found expand (their one other edge each); the hub is not redone
    got2 = g.semantic_search(HashingEmbedder(), "hub", d=2, w=2)
    assert got2[:2] == got and len(got2) == 4
    assert {t.subject for t in got2[2:]} == {t.object for t in got}


def test_free_text_query_ranks_all_edges_by_embedding() -> None:
    g = AriGraph()
    g.update(0, "o", [T("hub", "has", "red apple"), T("hub", "has", "blue cup")])
    assert g.semantic_search(HashingEmbedder(), "where is the apple", d=1, w=1) == [
        T("hub", "has", "red apple")]
    with pytest.raises(ConfigError):
        g.semantic_search(HashingEmbedder(), "x", d=-1)


def test_eq1_scores_match_hand_computed_values() -> None:
    t = [T(f"e{i}", "r", f"f{i}") for i in range(10)]
    g = AriGraph()
    g.update(0, "four", t[0:4])          # n=2, N=4 -> 2/4*log2(4) = 1.0
    g.update(1, "one", t[0:1])           # N=1 -> 0 (zero weight)
    g.update(2, "two", t[0:2])           # n=2, N=2 -> 1.0
    g.update(3, "eight", t[0:2] + t[4:10])  # n=2, N=8 -> 2/8*3 = 0.75
    g.update(4, "none", t[4:6])          # n=0 -> 0
    got = g.episodic_search(t[0:2], k=10)
    assert [(o.text, s) for o, s in got] == [("two", 1.0), ("four", 1.0), ("eight", 0.75)]
    assert [o.text for o, _ in g.episodic_search(t[0:2], k=1)] == ["two"]
    assert episodic_score(3, 5) == pytest.approx(3 / 5 * math.log2(5))
    assert episodic_score(1, 1) == 0.0 and episodic_score(0, 0) == 0.0
    with pytest.raises(InvalidInputError):
        episodic_score(3, 2)


def test_search_is_algorithm_1() -> None:
    g = chain()
    g.update(3, "all", [T("alpha", "links", "beta"), T("beta", "links", "gamma")])
    triplets, episodes = g.search(HashingEmbedder(), ["alpha", "alpha"], d=2, w=5, k=1)
    assert triplets == [T("alpha", "links", "beta"), T("beta", "links", "gamma")]
    assert [o.text for o, _ in episodes] == ["all"]


def test_round_trip_and_exports(tmp_path) -> None:  # type: ignore[no-untyped-def]
    g = chain()
    g.update(3, "x", [T("alpha", "links", "delta")], outdated=[T("alpha", "links", "beta")])
    back = AriGraph.from_dict(g.to_dict())
    assert back.triplets() == g.triplets()
    assert back.observations == g.observations and back.growth == g.growth
    nx = pytest.importorskip("networkx")
    path = g.to_graphml(tmp_path / "g.graphml")
    read = nx.read_graphml(path)
    assert read.nodes["alpha"]["kind"] == "semantic"
    assert read.nodes["obs:0"]["kind"] == "episodic"
    assert g.to_json(tmp_path / "g.json").read_text().startswith("{")
