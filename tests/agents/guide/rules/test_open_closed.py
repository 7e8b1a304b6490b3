"""The open-closed rule: a blocked step looks inside what is closed here first."""

from __future__ import annotations

from deltamem.agents.guide import Guide
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL, PLACES


def test_a_blocked_step_opens_what_is_closed_here_first() -> None:
    g = Guide(HEAT_RECALL, HEAT_GOAL)
    here = [*PLACES, "open cabinet 1", "examine cabinet 1"]
    advice = g.advise(here, ["go to sinkbasin 1", "go to cabinet 1"], PLACES)
    assert advice.actions == ("open cabinet 1",) and advice.backtrack
    opened = g.advise(PLACES, ["go to sinkbasin 1", "go to cabinet 1", "open cabinet 1"], PLACES)
    assert "open cabinet 1" not in opened.actions  # opened once is enough
    inside = g.advise([*PLACES, "take cup 1 from cabinet 1"],
                      ["go to sinkbasin 1", "go to cabinet 1", "open cabinet 1"], PLACES)
    assert inside.actions == ("take cup 1 from cabinet 1",)
