"""The episode recorder (``Memory.episode``): recall on entry, learn on exit, failures learned."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from deltamem import DeltaMem, Memory, NoMemory, Task
from deltamem.embed import HashingEmbedder
from deltamem.errors import InvalidInputError
from deltamem.types import Changes, Episode, Recall, Step, Verdict

TASK = Task(id="t1", goal="put a clean apple in fridge", domain="alfworld",
            scene="You are in a kitchen. You see a countertop 1, a sinkbasin 1 and a fridge 1.")


class Spy(Memory):
    """Counts recall/learn calls and keeps what learn got."""

    name = "spy"

    def __init__(self) -> None:
        self.recalls = 0
        self.learned: list[tuple[Episode, Recall | None]] = []
        self.observed: list[Step] = []

    def recall(self, task: Task) -> Recall:
        self.recalls += 1
        return Recall(text=f"memory for {task.goal}")

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        episode.validate()
        self.learned.append((episode, recall))
        return Changes()

    def observe(self, step: Step) -> Recall | None:
        self.observed.append(step)
        return Recall(text=f"after {step.action}")

    def stats(self) -> dict[str, int]:
        return {"units": len(self.learned)}


def test_recall_on_entry_learn_on_exit_with_the_recall_and_outcome() -> None:
    spy = Spy()
    with spy.episode(TASK, max_steps=9) as ep:
        assert spy.recalls == 1 and ep.recall.text == "memory for put a clean apple in fridge"
        ep.step("go to countertop 1", "On the countertop 1, you see a apple 1.")
        ep.step("take apple 1 from countertop 1", "You pick up the apple 1.", reward=0.5)
        ep.finish(True, 0.75)
        assert spy.learned == []  # learning waits for the end of the block
    (episode, recall), = spy.learned
    assert recall is ep.recall and spy.recalls == 1
    assert episode.success is True and episode.reward == 0.75 and episode.max_steps == 9
    assert [s.action for s in episode.steps] == ["go to countertop 1",
                                                  "take apple 1 from countertop 1"]
    assert episode.steps[1].reward == 0.5 and episode.task == TASK
    assert ep.episode is episode and ep.changes == Changes()


def test_exception_is_learned_as_failure_and_reraised() -> None:
    spy = Spy()
    with pytest.raises(RuntimeError, match="tool crashed"), spy.episode(TASK) as ep:
        ep.step("go to fridge 1", "The fridge 1 is closed.")
        ep.finish(True)  # a crash after finish still is a failure
        raise RuntimeError("tool crashed")
    (episode, _), = spy.learned
    assert episode.success is False and episode.reward == 0.0
    assert [s.action for s in episode.steps] == ["go to fridge 1"]


def test_no_finish_is_a_failure_and_finish_defaults_reward() -> None:
    spy = Spy()
    with spy.episode(TASK) as ep:
        ep.step("look", "You see nothing special.")
    with spy.episode(TASK) as ep2:
        ep2.step("look", "You see nothing special.")
        ep2.finish(True)
    assert [(e.success, e.reward) for e, _ in spy.learned] == [(False, 0.0), (True, 1.0)]
    assert ep.closed and ep2.closed


def test_interrupt_is_not_learned_and_empty_episode_is_skipped() -> None:
    spy = Spy()
    with pytest.raises(KeyboardInterrupt), spy.episode(TASK) as ep:
        ep.step("look", "x")
        raise KeyboardInterrupt
    assert spy.learned == [] and ep.changes is None
    with spy.episode(TASK) as empty:
        pass
    assert spy.learned == []
    assert [c.kind for c in empty.changes] == ["skipped"]


def test_a_failing_learn_does_not_mask_the_original_error() -> None:
    class Broken(Spy):
        def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
            raise OSError("disk full")

    with pytest.raises(ValueError, match="agent bug"), Broken().episode(TASK) as ep:
        ep.step("look", "x")
        raise ValueError("agent bug")
    # without an exception in the block, the learning error itself surfaces
    with pytest.raises(OSError, match="disk full"), Broken().episode(TASK) as ep:
        ep.step("look", "x")


def test_bad_input_is_refused_and_closed_recorder_is_final() -> None:
    spy = Spy()
    with pytest.raises(InvalidInputError):
        spy.episode(Task(id="x", goal="  "))
    with spy.episode(TASK) as ep:
        with pytest.raises(InvalidInputError):
            ep.step("look", "x", reward=float("nan"))
        with pytest.raises(InvalidInputError):
            ep.finish(True, float("inf"))
        ep.step("look", "x")
    with pytest.raises(InvalidInputError):
        ep.step("look", "again")
    assert ep.close() is ep.changes and len(spy.learned) == 1  # never learns twice


def test_observe_passes_steps_to_step_level_memories() -> None:
    spy = Spy()
    with spy.episode(TASK, observe=True) as ep:
        ep.step("open fridge 1", "You open the fridge 1.")
        assert ep.step_recall is not None and ep.step_recall.text == "after open fridge 1"
    assert [s.action for s in spy.observed] == ["open fridge 1"]


def test_async_with_and_a_real_bank_learn_then_recall() -> None:
    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")

    async def play() -> None:
        async with mem.episode(TASK) as ep:
            assert ep.recall.empty
            ep.step("take apple 1 from countertop 1", "You pick up the apple 1.")
            ep.step("clean apple 1 with sinkbasin 1", "You clean the apple 1.")
            ep.step("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.")
            ep.finish(True)
        assert [c.kind for c in ep.changes] == ["written", "written"]

    asyncio.run(play())
    with mem.episode(TASK) as again:
        assert "clean {A} with sinkbasin" in again.recall.text
    assert [c.kind for c in again.changes] == ["skipped"]


def test_no_memory_baseline_records_too() -> None:
    with NoMemory().episode(TASK) as ep:
        ep.step("look", "x")
        ep.finish(False)
    assert ep.changes == Changes() and ep.episode is not None


# -- the outcome judge -------------------------------------------------------------------------

class FixedJudge:
    """Answers one verdict and counts the calls."""

    name = "fixed"

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.calls: list[tuple[Task, tuple[Step, ...]]] = []

    def judge(self, task: Task, steps) -> Verdict:  # type: ignore[no-untyped-def]
        self.calls.append((task, tuple(steps)))
        return Verdict(self.outcome, f"said {self.outcome}", self.name)  # type: ignore[arg-type]


def test_a_judge_decides_when_the_loop_gives_no_outcome() -> None:
    spy, judge = Spy(), FixedJudge("success")
    with spy.episode(TASK, judge=judge) as ep:
        ep.step("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.")
    (episode, _), = spy.learned
    assert episode.success is True and episode.reward == 1.0
    assert ep.verdict == Verdict("success", "said success", "fixed")
    assert episode.verdict == ep.verdict and episode.to_dict()["verdict"]["judge"] == "fixed"
    assert Episode.from_dict(episode.to_dict()).verdict == ep.verdict
    assert [s.action for s in judge.calls[0][1]] == ["move apple 1 to fridge 1"]


@pytest.mark.parametrize("outcome", ["uncertain", "refused"])
def test_an_undecided_verdict_learns_nothing(outcome: str) -> None:
    spy = Spy()
    with spy.episode(TASK, judge=FixedJudge(outcome)) as ep:
        ep.step("look", "x")
        ep.finish()  # ended; the judge decides
    assert spy.learned == [] and ep.episode is None
    (change,) = ep.changes
    assert change.kind == "skipped" and change.source == "judge"
    assert f"{outcome} verdict from fixed" in change.reason
    assert ep.verdict is not None and ep.verdict.success is None


def test_an_explicit_outcome_and_an_exception_do_not_ask_the_judge() -> None:
    spy, judge = Spy(), FixedJudge("success")
    with spy.episode(TASK, judge=judge) as ep:
        ep.step("look", "x")
        ep.finish(False)
    with pytest.raises(RuntimeError), spy.episode(TASK, judge=judge) as ep2:
        ep2.step("look", "x")
        raise RuntimeError("crash")
    assert judge.calls == [] and ep.verdict is None and ep2.verdict is None
    assert [e.success for e, _ in spy.learned] == [False, False]
    assert all(e.verdict is None for e, _ in spy.learned)


def test_finish_without_success_needs_a_judge() -> None:
    with Spy().episode(TASK) as ep:
        ep.step("look", "x")
        with pytest.raises(InvalidInputError, match="needs a judge"):
            ep.finish()


def test_the_scripted_judge_learns_a_real_bank_without_success() -> None:
    """The recorder example of the docs: no ``success=`` anywhere, the judge reads the steps."""
    from deltamem.judge import ScriptedJudge

    mem = DeltaMem.open(":memory:", embedder=HashingEmbedder(), domain="alfworld")
    with mem.episode(TASK, judge=ScriptedJudge()) as ep:
        ep.step("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.")
        ep.step("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1.")
        ep.step("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.")
    assert ep.verdict is not None and ep.verdict.outcome == "success"
    assert "apple 1 was cleaned" in ep.verdict.reason
    assert [c.kind for c in ep.changes] == ["written", "written"]
    assert mem.nodes("task")[0].label == "SUCCESS"


# -- async: the loop stays responsive ------------------------------------------------------------

class BlockingLearn(Spy):
    """A learn that blocks its thread until the event loop has shown it is still running."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.thread: int | None = None

    def learn(self, episode: Episode, recall: Recall | None = None) -> Changes:
        self.thread = threading.get_ident()
        self.entered.set()
        # if learn ran on the event loop's thread, nothing could set `release`: fail, not hang
        if not self.release.wait(timeout=10):
            raise TimeoutError("the event loop was blocked during learn")
        return super().learn(episode, recall)


def test_alearn_keeps_the_event_loop_responsive() -> None:
    mem = BlockingLearn()
    ticks: list[int] = []

    async def ticker() -> None:
        while not mem.release.is_set():
            ticks.append(1)
            await asyncio.sleep(0)
            if mem.entered.is_set() and len(ticks) >= 50:
                mem.release.set()  # the loop ran 50 times while learn was blocked

    async def main() -> Changes:
        ep = Episode(TASK, (Step("look", "x"),), success=True, reward=1.0)
        learning = asyncio.create_task(mem.alearn(ep))
        await ticker()
        return await learning

    assert asyncio.run(main()) == Changes()
    assert mem.thread != threading.get_ident() and len(mem.learned) == 1 and len(ticks) >= 50


def test_async_with_uses_arecall_and_alearn_and_judges_on_a_worker() -> None:
    calls: list[str] = []

    class AsyncSpy(Spy):
        async def arecall(self, task: Task) -> Recall:
            calls.append("arecall")
            return await super().arecall(task)

        async def alearn(self, episode: Episode, recall: Recall | None = None) -> Changes:
            calls.append("alearn")
            return await super().alearn(episode, recall)

    spy, judge = AsyncSpy(), FixedJudge("failure")

    async def play() -> None:
        async with spy.episode(TASK, judge=judge) as ep:
            ep.step("look", "x")
        assert ep.verdict is not None and ep.verdict.outcome == "failure"

    asyncio.run(play())
    assert calls == ["arecall", "alearn"] and spy.recalls == 1
    assert [e.success for e, _ in spy.learned] == [False]


def test_async_calls_on_one_memory_run_one_at_a_time() -> None:
    inside: list[int] = []
    overlap: list[bool] = []

    class Slow(Spy):
        def recall(self, task: Task) -> Recall:
            inside.append(1)
            overlap.append(len(inside) > 1)
            time.sleep(0.01)
            inside.pop()
            return super().recall(task)

    slow = Slow()

    async def main() -> None:
        await asyncio.gather(*(slow.arecall(TASK) for _ in range(8)))

    asyncio.run(main())
    assert slow.recalls == 8 and not any(overlap)
