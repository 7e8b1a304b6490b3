"""The follow rule: the pointed step, done by the admissible actions that realise it."""

from __future__ import annotations

from deltamem.agents.guide import Position
from deltamem.agents.guide.rules.follow import Follow
from tests.agents.guide.recalls import decision

STEPS = ["go to fridge", "take tomato from fridge", "heat tomato with microwave"]
WORDS = frozenset({"hot", "tomato", "diningtable"})


def test_exact_realisations_win_over_loose_ones() -> None:
    here = ["take tomato 1 from countertop 1", "take tomato 2 from fridge 1", "go to fridge 1"]
    at = Position.locate(STEPS, decision(here, ["go to fridge 1"], WORDS))
    advice = Follow().advise(at)
    assert advice is not None and advice.actions == ("take tomato 2 from fridge 1",)
    loose = Position.locate(STEPS, decision(here[:1], ["go to fridge 1"], WORDS))
    advice = Follow().advise(loose)
    assert advice is not None and advice.actions == ("take tomato 1 from countertop 1",)
    assert advice.step == "take tomato from fridge" and not advice.backtrack


def test_a_loose_move_goes_first_where_the_agent_has_not_been() -> None:
    here = ["go to cabinet 1", "go to cabinet 2", "go to shelf 1"]
    steps = ["take tomato from fridge", "go to microwave", "heat tomato with microwave"]
    taken = ["go to cabinet 1", "take tomato 1 from cabinet 1"]
    at = Position.locate(steps, decision(here, taken, WORDS))
    assert at.step == "go to microwave"  # no microwave here: every move realises it loosely
    advice = Follow().advise(at)
    assert advice is not None and advice.actions == ("go to cabinet 2", "go to shelf 1")


def test_the_rule_passes_when_nothing_here_realises_the_step() -> None:
    at = Position.locate(STEPS, decision(["look", "examine fridge 1"], ["go to fridge 1"], WORDS))
    assert Follow().advise(at) is None
