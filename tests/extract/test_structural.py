"""The structural extractor follows the paper's extraction rules without an LLM."""

from __future__ import annotations

import logging

import pytest

from deltamem import DeltaMem
from deltamem.core.payload import ChainEntry
from deltamem.embed import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.extract import LLMExtractor, StructuralExtractor
from deltamem.llm import ScriptedLLM
from deltamem.testing import make_episode
from deltamem.types import Episode, Step, Task

X = StructuralExtractor()


def test_root_success_abstracts_instances_and_goal_entities():
    p = X.extract("task_root_success", make_episode(), [], "alfworld")
    assert p is not None
    assert "{A}" in p.activation and "apple" in p.activation  # legend names the example
    assert "1." in p.procedure and "clean {A} with sinkbasin" in p.procedure
    assert "apple 1" not in p.procedure and "countertop 1" not in p.procedure


def test_literal_skill_words_keep_the_goals_words_and_drop_only_instance_numbers():
    p = StructuralExtractor(skill_words="literal").extract(
        "task_root_success", make_episode(), [], "alfworld")
    assert p is not None
    assert "{A}" not in p.activation + p.procedure
    assert "clean apple with sinkbasin" in p.procedure and "apple 1" not in p.procedure
    assert p.activation == "Tasks of the form: put a clean apple in fridge"


def test_skill_words_default_to_the_domains_setting(monkeypatch):
    from dataclasses import replace

    from deltamem import domains

    monkeypatch.setitem(domains.DOMAINS, "generic",
                        replace(domains.DOMAINS["generic"], skill_words="literal"))
    p = X.extract("task_root_success", make_episode(domain="generic"), [], "generic")
    assert p is not None and "{A}" not in p.procedure
    q = StructuralExtractor(skill_words="slots").extract(
        "task_root_success", make_episode(domain="generic"), [], "generic")
    assert q is not None and "{A}" in q.procedure  # the extractor's own setting wins


def test_textworld_skills_keep_literal_words_by_default():
    p = X.extract("task_root_success", make_episode(domain="textworld"), [], "textworld")
    assert p is not None
    assert "{A}" not in p.procedure and "take apple from countertop" in p.procedure


def test_unknown_skill_words_are_refused():
    with pytest.raises(ConfigError, match="skill_words"):
        StructuralExtractor(skill_words="verbatim")


def test_residual_success_keeps_only_new_steps_and_skips_when_covered():
    ep = make_episode()
    root = X.extract("task_root_success", ep, [], "alfworld")
    chain = [ChainEntry("ROOT", "SUCCESS", root)]
    assert X.extract("task_residual_success", ep, chain, "alfworld") is None
    longer = make_episode(
        actions=[
            *((a.action, a.observation) for a in ep.steps),
            ("close fridge 1", "You close the fridge 1."),
        ]
    )
    delta = X.extract("task_residual_success", longer, chain, "alfworld")
    assert delta is not None and "close {B}" in delta.procedure
    assert "clean {A}" not in delta.procedure  # already in the chain


def test_failure_records_failed_actions_and_unexplored_options():
    ep = make_episode(success=False, actions=[("open drawer 9", "Nothing happened.")])
    from dataclasses import replace

    step = replace(ep.steps[0], admissible=("go to fridge 1", "open drawer 9", "look"))
    ep = replace(ep, steps=(step,))
    p = X.extract("task_root_failure", ep, [], "alfworld")
    assert p.termination == ""
    assert "[FAILED]" in p.procedure and "open drawer -> Nothing happened." in p.procedure
    assert "[UNEXPLORED]" in p.procedure and "go to fridge" in p.procedure
    chain = [ChainEntry("ROOT", "FAILURE", p)]
    assert X.extract("task_residual_failure", ep, chain, "alfworld") is None  # same failure


def test_env_knowledge_reads_places_and_behaviour():
    p = X.extract("env_root", make_episode(), [], "alfworld")
    assert "apple: found in/on countertop" in p.procedure
    assert "egg: found in/on fridge" in p.procedure
    assert "fridge: starts closed" in p.procedure
    chain = [ChainEntry("ROOT", "SUCCESS", p)]
    assert X.extract("env_residual", make_episode(), chain, "alfworld") is None


def _textworld_cleaning_episode():
    scene = ("-= Hallway =-\nYou are in a hallway. You can make out a shoe rack. On the shoe "
             "rack you can make out a tv remote and a sneakers, so there's that. There is an "
             "iron on the floor.")
    task = Task(id="cleaning-0", goal="Put each item back where it belongs.", scene=scene,
                domain="textworld", split="test", observation=scene, max_steps=30)
    steps = (
        Step("take iron", "You pick up the iron from the ground.", reward=1 / 6),
        Step("go north", "-= Laundry Room =-\nYou see a stapler on the ironing board. The "
             "washing machine contains a dirty sock."),
        Step("put iron on ironing board", "You put the iron on the ironing board.",
             reward=1 / 6),
        Step("put stapler on washing machine", "You put the stapler on the washing machine."),
    )
    return Episode(task, steps, success=False, reward=1 / 3, max_steps=30)


def test_textworld_knowledge_reads_the_prose_and_the_scored_placements_first():
    ep = _textworld_cleaning_episode()
    lines = X.extract("env_root", ep, [], "textworld").procedure.splitlines()
    assert lines[0] == "- iron: belongs in/on ironing board (putting it there scored)"
    # a placement the game did not score is no rule of the world
    assert not any("stapler: belongs" in line for line in lines)
    for fact in ("tv remote: found in/on shoe rack", "sneakers: found in/on shoe rack",
                 "iron: found in/on hallway", "stapler: found in/on ironing board",
                 "dirty sock: found in/on washing machine"):
        assert f"- {fact}" in lines
    # the household patterns find nothing in TextWorld's prose
    assert "(no object locations" in X.extract("env_root", ep, [], "alfworld").procedure


def test_textworld_knowledge_residual_keeps_only_new_facts():
    ep = _textworld_cleaning_episode()
    root = X.extract("env_root", ep, [], "textworld")
    assert X.extract("env_residual", ep, [ChainEntry("ROOT", "SUCCESS", root)],
                     "textworld") is None


def test_unknown_domain_is_refused():
    from deltamem.errors import ConfigError

    with pytest.raises(ConfigError):
        X.extract("env_root", make_episode(), [], "mars")


def test_invalid_llm_output_is_rejected_logged_and_never_stored(caplog):
    llm = ScriptedLLM(["not json", '{"activation_condition": 3}'] * 2)
    mem = DeltaMem.open(
        ":memory:", embedder=HashingEmbedder(), domain="alfworld", extractor=LLMExtractor(llm)
    )
    with caplog.at_level(logging.WARNING, logger="deltamem.extract"):
        ch = mem.learn(make_episode(episode_id="e"))
    assert [c.kind for c in ch] == ["rejected", "rejected"]
    assert mem.stats()["nodes"] == {"task": 0, "env": 0}
    assert len(mem.store.rejections()) == 2
    assert (
        sum("rejected" in r.message or "invalid" in r.message.lower() for r in caplog.records) >= 2
    )
    assert llm.usage.by_purpose["extract"].calls == 4  # one repair retry per role


def _sw_episode(success: bool = True):
    from dataclasses import replace

    look_kitchen = ("This room is called the kitchen. In it, you see: \n\tthe agent\n\t"
                    "a substance called air\n\ta counter. On the counter is: a bowl (containing "
                    "a red apple, a banana), a drawer.\n\ta oven, which is turned off. The oven "
                    "door is closed. \n\ta thermometer, currently reading a temperature of 10 "
                    "degrees celsius\nYou also see:\n\tA door to the hallway (that is open)")
    ep = make_episode(
        goal="Your task is to boil chocolate. First, focus on the substance. Then, take "
             "actions that will cause it to change its state of matter.",
        scene="This room is called the hallway. In it, you see: \n\tthe agent\n\ta picture\n"
              "You also see:\n\tA door to the kitchen (that is open)",
        actions=[
            ("open door to kitchen", "The door is already open."),
            ("teleport to kitchen", "You teleport to the kitchen."),
            ("look around", look_kitchen),
            ("pick up thermometer", "You move the thermometer to the inventory."),
            ("0", "No known action matches that input."),
            ("focus on chocolate", "You focus on the chocolate."),
            ("look around", look_kitchen),
        ],
        domain="scienceworld", success=success)
    return replace(ep, task=replace(ep.task, observation=ep.task.scene))


def test_scienceworld_skill_drops_no_ops_and_keeps_template_words():
    p = X.extract("task_root_success", _sw_episode(), [], "scienceworld")
    assert p is not None
    lines = p.procedure.splitlines()
    assert lines[:5] == ["1. teleport to kitchen", "2. look around", "3. pick up thermometer",
                         "4. focus on {A}", "5. look around"]
    assert "open door to kitchen" not in p.procedure  # the door was already open: a no-op
    assert "0" not in [ln.split(". ", 1)[-1] for ln in lines]
    assert "{A} = e.g. chocolate" in p.activation
    # the rooms where the handled items were, with the goal's words abstracted
    assert "- thermometer: found in/on kitchen" in lines
    assert "- {A}: found in/on kitchen" in lines


def test_scienceworld_knowledge_maps_items_to_rooms_handled_first():
    p = X.extract("env_root", _sw_episode(), [], "scienceworld")
    facts = [ln[2:] for ln in p.procedure.splitlines()]
    assert facts[0] == "thermometer: found in/on kitchen"  # handled by the episode: first
    for item in ("counter", "bowl", "red apple", "banana", "drawer", "oven", "picture"):
        room = "hallway" if item == "picture" else "kitchen"
        assert f"{item}: found in/on {room}" in facts, item
    assert not any(f.startswith(("agent", "air", "door to", "which")) for f in facts)
    assert "pitfall: 'open door to kitchen' had no effect" in facts
    # the same episode in another domain is read with the household rules
    other = X.extract("env_root", _sw_episode(), [], "generic")
    assert "thermometer: found in/on kitchen" not in other.procedure


def test_household_skills_leave_out_the_search_detours_of_the_agents_own_play():
    from deltamem.extract.structural import StructuralExtractor
    from deltamem.testing import make_episode

    played = [("go to microwave 1", "The microwave 1 is closed."),
              ("open microwave 1", "You open the microwave 1. In it, you see a cup 1."),
              ("go to drawer 2", "The drawer 2 is closed."),
              ("open drawer 2", "You open the drawer 2. The drawer 2 is empty."),
              ("close drawer 2", "You close the drawer 2."),
              ("go to stoveburner 1", "On the stoveburner 1, you see a pot 1."),
              ("take pot 1 from stoveburner 1", "You pick up the pot 1."),
              ("go to fridge 1", "The fridge 1 is closed."),
              ("cool pot 1 with fridge 1", "You cool the pot 1 using the fridge 1."),
              ("go to cabinet 1", "The cabinet 1 is closed."),
              ("open cabinet 1", "You open the cabinet 1."),
              ("move pot 1 to cabinet 1", "You move the pot 1 to the cabinet 1.")]
    ep = make_episode("cool some pot and put it in cabinet", actions=played)
    x = StructuralExtractor()
    assert x.skill_steps(ep, "alfworld") == [
        "go to stoveburner", "take {A} from stoveburner", "go to fridge", "cool {A} with fridge",
        "go to {B}", "open {B}", "move {A} to {B}"]
    root = x.extract("task_root_success", ep, (), "alfworld")
    assert "microwave" not in root.procedure and "drawer" not in root.procedure
    # elsewhere a move is a step of its own (TextWorld's rooms, ScienceWorld's doors)
    assert "go to microwave" in x.skill_steps(ep, "generic")
