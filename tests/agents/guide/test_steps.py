"""Recalled steps: the lines of a recall that read as actions."""

from __future__ import annotations

from deltamem.agents.guide import recalled_steps
from tests.agents.guide.recalls import DELTAMEM_RECALL


def test_failure_records_and_unknown_verbs_are_not_steps() -> None:
    steps = recalled_steps(DELTAMEM_RECALL, ["go"])
    assert "go to garbagecan" not in steps  # a failure record
    assert steps[:3] == ["go to fridge", "open fridge", "take {A} from fridge"]  # numbered
    assert recalled_steps("Knowledge: - cloth: found in/on countertop\nwalk the dog",
                          ["go"]) == []  # a fact and an unmarked line with an unknown verb


def test_tree_sub_goals_are_headings_not_steps() -> None:
    """A bulleted sub-goal over indented steps (MCMA's tree plans) is not itself a step,
    even when it starts with an action verb; a step over an indented note still is."""
    tree = """[tree] Tree plan: heat some potato and put it in garbagecan
  * heat some potato and put it in garbagecan
    * Take potato from sinkbasin
      1. go to sinkbasin
      2. take potato from sinkbasin
    * Heat potato with microwave
      1. go to microwave
      2. heat potato with microwave
"""
    verbs = {"go", "take", "heat", "put"}
    assert recalled_steps(tree, verbs) == [
        "go to sinkbasin", "take potato from sinkbasin", "go to microwave",
        "heat potato with microwave"]
    flat = "- go to fridge\n- take apple from fridge\n  (it was on the top shelf)\n"
    assert recalled_steps(flat, verbs) == ["go to fridge", "take apple from fridge"]
