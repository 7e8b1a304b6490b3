"""Recall-failure analysis: the guide replayed over a recorded episode, one cause per episode."""

from __future__ import annotations

from dataclasses import dataclass, field

from deltamem.analysis.recall_failures import (
    Diagnosis,
    StepAdvice,
    cause_table,
    diagnose,
    family_of,
    guide_trace,
)
from deltamem.types import Recall, RecallItem


@dataclass
class _Rooms:
    """A toy world: rooms joined in a line, one object per room; 'take X' picks it up."""

    rooms: tuple[str, ...] = ("hall", "kitchen", "garden")
    objects: dict[str, str] = field(default_factory=lambda: {"kitchen": "pot",
                                                             "garden": "seed"})
    here: str = "hall"
    held: set[str] = field(default_factory=set)

    def reset(self, task_id: str) -> None:
        self.here, self.held = "hall", set()

    def admissible_actions(self) -> list[str]:
        i = self.rooms.index(self.here)
        near = [r for j, r in enumerate(self.rooms) if abs(i - j) == 1]
        out = [f"go to {r}" for r in near] + ["look around"]
        obj = self.objects.get(self.here)
        if obj and obj not in self.held:
            out.append(f"take {obj}")
        return sorted(out)

    def step(self, action: str) -> str:
        if action.startswith("go to "):
            self.here = action[6:]
            return f"You move to the {self.here}."
        if action.startswith("take "):
            self.held.add(action[5:])
            return f"You take the {action[5:]}."
        return f"This is the {self.here}."


def _recall(text: str) -> Recall:
    return Recall(text=text, items=(RecallItem("task", "n1", text, 1.0, "base"),))


def _play(env: _Rooms, actions: list[str]) -> list[tuple[str, str, bool]]:
    env.reset("t")
    return [(a, env.step(a), True) for a in actions]


def test_trace_asks_the_guide_before_each_step_as_the_agent_does() -> None:
    env = _Rooms()
    recall = _recall("Task: take a pot\n1. go to kitchen\n2. take pot")
    played = _play(env, ["go to kitchen", "take pot"])
    trace = guide_trace(env, "t", recall, "take a pot", played)
    assert [s.advised for s in trace] == [("go to kitchen",), ("take pot",)]
    assert all(s.followed and s.forward and s.same_observation for s in trace)


def test_a_step_naming_an_object_absent_here_is_a_variation_word() -> None:
    env = _Rooms()
    recall = _recall("Task: take a pot\n1. go to kitchen\n2. take kettle")
    played = _play(env, ["go to kitchen", "look around", "look around"])
    trace = guide_trace(env, "t", recall, "take a pot", played)
    cause, blocked, detail = diagnose(trace, goal="take a pot", recall=recall, success=False,
                                      cap=3, ended_by_cap=True,
                                      observations=[o for _, o, _ in played])
    assert (cause, blocked) == ("variation-words", "take kettle")
    assert "kettle" in detail


def test_a_step_whose_words_occur_but_cannot_be_done_is_no_realisation() -> None:
    env = _Rooms(rooms=("hall",))  # nowhere to go: the guide has no search to offer
    # the gate is named here ("This is the hall" lists it below) but never opens
    recall = _recall("Task: take a seed\n1. open gate\n2. take seed")
    played = _play(env, ["look around", "look around", "look around"])
    played = [(a, o + " A locked gate.", v) for a, o, v in played]
    trace = guide_trace(env, "t", recall, "take a seed", played)
    assert all(not s.advised for s in trace)
    cause, blocked, _ = diagnose(trace, goal="take a seed", recall=recall, success=False,
                                 cap=3, ended_by_cap=True,
                                 observations=[o for _, o, _ in played])
    assert (cause, blocked) == ("no-realisation", "open gate")
    # without the gate anywhere in the game, the same step is a variation word
    bare = [(a, o.replace(" A locked gate.", ""), v) for a, o, v in played]
    assert diagnose(trace, goal="take a seed", recall=recall, success=False, cap=3,
                    ended_by_cap=True, observations=[o for _, o, _ in bare])[0] == (
        "variation-words")


def test_a_step_searched_for_in_vain_is_search() -> None:
    env = _Rooms()
    recall = _recall("Task: take a seed\n1. open gate\n2. take seed")
    played = _play(env, ["go to kitchen", "go to garden", "look around"])
    played = [(a, o + " A locked gate.", v) for a, o, v in played]
    trace = guide_trace(env, "t", recall, "take a seed", played)
    assert trace[0].backtrack and trace[0].followed  # the search: a place not visited
    cause, blocked, _ = diagnose(trace, goal="take a seed", recall=recall, success=False,
                                 cap=3, ended_by_cap=True,
                                 observations=[o for _, o, _ in played])
    assert (cause, blocked) == ("search", "open gate")


def test_budget_ended_and_won_are_told_apart() -> None:
    env = _Rooms()
    recall = _recall("Task: take a seed\n1. go to kitchen\n2. go to garden\n3. take seed")
    played = _play(env, ["go to kitchen", "go to garden"])
    trace = guide_trace(env, "t", recall, "take a seed", played)
    assert diagnose(trace, goal="take a seed", recall=recall, success=False, cap=2,
                    ended_by_cap=True)[0] == "budget"
    assert diagnose(trace, goal="take a seed", recall=recall, success=True, cap=2,
                    ended_by_cap=True)[0] is None
    short = _recall("Task: take a seed\n1. go to kitchen")
    played = _play(env, ["go to kitchen", "look around", "look around", "look around"])
    trace = guide_trace(env, "t", short, "take a seed", played)
    assert diagnose(trace, goal="take a seed", recall=short, success=False, cap=4,
                    ended_by_cap=True)[0] == "ended"


def test_a_followed_exact_step_that_ends_the_task_is_a_wrong_choice() -> None:
    env = _Rooms()
    recall = _recall("Task: take a pot\n1. go to kitchen\n2. take pot")
    played = _play(env, ["go to kitchen", "take pot"])
    trace = guide_trace(env, "t", recall, "take a pot", played)
    cause, blocked, _ = diagnose(trace, goal="take a pot", recall=recall, success=False,
                                 cap=10, ended_by_cap=False)
    assert (cause, blocked) == ("wrong-choice", "take pot")


def test_no_recall_is_cold_and_knowledge_only_is_no_step() -> None:
    trace = [StepAdvice("look around", ("look around",), None, (), False, False)]
    assert diagnose(trace, goal="g", recall=Recall(), success=False, cap=1,
                    ended_by_cap=True)[0] is None
    facts = _recall("- pot: found in/on kitchen")
    assert diagnose(trace, goal="g", recall=facts, success=False, cap=1,
                    ended_by_cap=True)[0] == "no-step"


def test_cause_table_counts_per_family() -> None:
    def d(task_id: str, cause: str | None, warm: bool = True, success: bool = False,
          other: bool | None = False) -> Diagnosis:
        return Diagnosis(0, task_id, family_of(task_id), success, 0.0, 1, 1, warm, cause,
                         None, "", 0, other, None)

    table = cause_table([d("boil:1", "budget"), d("boil:2", "budget", other=True),
                         d("melt:3", None, warm=False), d("melt:4", None, success=True)])
    lines = table.splitlines()
    assert lines[0].startswith("| group | episodes | cold | warm won | no-step")
    boil = next(line for line in lines if line.startswith("| boil"))
    cells = [c.strip() for c in boil.strip("|").split("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[head.index("budget")] == "2" and cells[head.index("other family")] == "1"
    melt = next(line for line in lines if line.startswith("| melt"))
    cells = [c.strip() for c in melt.strip("|").split("|")]
    assert cells[head.index("cold")] == "1" and cells[head.index("warm won")] == "1"
    assert family_of("find-living-thing:12") == "find-living-thing"
