"""What each tree embeds: abstracted goals and place lists (no model, no LLM)."""

from __future__ import annotations

import pytest

from deltamem import DeltaMem, Episode, Step, Task
from deltamem.core.triggers import abstract_goal, place_list, tree_texts
from deltamem.embed import HashingEmbedder


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("put a clean cup in diningtable", "put a clean {A} in {B}"),
        ("clean some cup and put it in diningtable", "clean some {A} and put it in {B}"),
        ("find two cellphone and put them in sofa", "find two {A} and put them in {B}"),
        ("look at bowl under the desklamp", "look at {A} under the {B}"),
        ("examine the bowl with the desklamp", "examine the {A} with the {B}"),
        ("put a hot apple 1 in fridge 2", "put a hot {A} in {B}"),
        ("put a cool mug in mug", "put a cool {A} in {A}"),
    ],
)
def test_abstract_goal_replaces_object_and_place_words(goal, expected):
    assert abstract_goal(goal) == expected


def test_goals_of_one_type_with_other_objects_abstract_to_the_same_text():
    assert abstract_goal("put a clean egg in shelf") == abstract_goal("put a clean mug in sofa")
    assert abstract_goal("put a clean egg in shelf") != abstract_goal("put a hot egg in shelf")


def test_place_list_is_sorted_kinds_without_numbers():
    scene = ("You are in the middle of a room. Looking quickly around you, you see a "
             "cabinet 4, a cabinet 3, a countertop 1, a fridge 1, and a sinkbasin 1.")
    assert place_list(scene) == "places: cabinet, countertop, fridge, sinkbasin"
    other = scene.replace("cabinet 4, a cabinet 3", "cabinet 1")
    assert place_list(other) == place_list(scene)
    assert place_list("A dark room.") == "A dark room."


def test_tree_texts_falls_back_to_the_goal_without_a_scene():
    t = Task(id="t", goal="put a clean cup in shelf", domain="alfworld")
    assert tree_texts(t, "abstract", "places") == {"task": "put a clean {A} in {B}",
                                                  "env": "put a clean cup in shelf"}


def _episode(goal: str, i: int, success: bool = True) -> Episode:
    task = Task(id=f"t{i}", goal=goal, domain="alfworld",
                scene="You are in the middle of a room. You see a fridge 1 and a shelf 1.")
    return Episode(task, (Step("go to fridge 1", "The fridge 1 is closed.", done=True),),
                   success=success, reward=float(success), id=f"e{i}")


def test_deltamem_stores_and_queries_the_configured_trigger_text(tmp_path):
    mem = DeltaMem.open(tmp_path / "b.db", embedder=HashingEmbedder(), domain="alfworld",
                        task_trigger="abstract", env_trigger="places")
    mem.learn(_episode("put a clean egg in shelf", 1))
    (root,) = mem.nodes("task")
    assert root.trigger == "put a clean {A} in {B}"
    assert mem.nodes("env")[0].trigger == "places: fridge, shelf"
    # another object and place: the same abstract text, so an exact match
    assert mem.match(_episode("put a clean mug in sofa", 2).task)["task"].score == 1.0
    mem.close()
    reopened = DeltaMem.open(tmp_path / "b.db", embedder=HashingEmbedder())
    assert reopened.config.task_trigger == "abstract" and reopened.config.env_trigger == "places"


def test_env_nodes_are_success_even_when_the_episode_failed():
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")
    mem.learn(_episode("put a clean egg in shelf", 1, success=False))
    assert mem.nodes("task")[0].label == "FAILURE"
    assert mem.nodes("env")[0].label == "SUCCESS"


def test_thresholds_and_their_provenance_are_stored_with_the_bank(tmp_path):
    mem = DeltaMem.open(tmp_path / "b.db", embedder=HashingEmbedder(), domain="alfworld",
                        tau_task=0.6)
    assert mem.config.tau_source["task"] == "set by the user"
    assert "Table 4" in mem.config.tau_source["env"]
    mem.close()
    again = DeltaMem.open(tmp_path / "b.db", embedder=HashingEmbedder())
    assert again.config.tau_task == 0.6 and again.config.tau_source == mem.config.tau_source


def test_a_bank_written_before_trigger_modes_reopens_with_raw_texts(tmp_path):
    import json
    import sqlite3

    mem = DeltaMem.open(tmp_path / "old.db", embedder=HashingEmbedder(), domain="alfworld")
    mem.learn(_episode("put a clean egg in shelf", 1))
    mem.close()
    con = sqlite3.connect(tmp_path / "old.db")
    cfg = json.loads(con.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
    for key in ("task_trigger", "env_trigger", "tau_source"):
        cfg.pop(key)
    con.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(cfg),))
    con.commit()
    con.close()
    again = DeltaMem.open(tmp_path / "old.db", embedder=HashingEmbedder())
    assert (again.config.task_trigger, again.config.env_trigger) == ("goal", "scene")
    assert again.queries(_episode("put a clean egg in shelf", 2).task)["task"] == (
        "put a clean egg in shelf")


def test_a_measured_quantity_is_not_an_instance_number() -> None:
    from deltamem.core.triggers import drop_numbers

    # "cabinet 3" names an instance; "above 200.0 degrees" is the task's threshold, and
    # dropping its integer part left "above.0", which misaligned every goal-word binding
    assert drop_numbers("go to cabinet 3, then table 12.") == "go to cabinet, then table."
    assert drop_numbers("if it is above 200.0 degrees") == "if it is above 200.0 degrees"
