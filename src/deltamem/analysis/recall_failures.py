"""Where a warm recall did not turn into progress: a run's episodes replayed under the guide.

A run keeps, per episode, the recall text and every action and observation
(``trajectories.jsonl``), but not what the agent's guide (:mod:`deltamem.agents.guide`)
advised at each step. This module replays each evaluation episode of a finished run in
its environment: the recall is made again from a copy of the run's frozen bank (recall is
read-only, so it is the recall the agent saw), the recorded actions are sent again, and
before each one the guide is asked what it advises -- exactly as the ReAct agent asked
it. From that replay (:class:`StepAdvice` per step) :func:`diagnose` names *where the
agent lost the thread* of the recalled procedure, one cause per failed warm episode:

``no-step``
    the guide found no step to follow in any recalled item (knowledge only, warnings,
    or lines that do not read as actions here);
``wrong-choice``
    a recalled step, realised here exactly, ended the task: the procedure needs a value
    the recall cannot know (which thing to focus on, which box a reading calls for);
``variation-words``
    the recalled step names objects or places of the recalled variation that do not
    occur here (or a placeholder the goal did not fill), or a loose realisation that
    replaced such a word ended the task;
``no-realisation``
    the recalled step's words occur in this game, but no admissible action realises the
    step as written (e.g. ``go to kitchen`` from a room with no door to it, a no-op of
    the recalled game such as opening a door that is already open);
``search``
    most of the steps after the loss were the guide's back-tracking search (its rules
    for rooms and receptacles), which never reached a place where the step could be done;
``ended``
    the guide followed the recalled procedure to its end and the task was not done;
``budget``
    the agent was still following the procedure when the step cap was reached.

Each diagnosis also says whether the followed procedure was recalled from another task
family (``other_family``: the build episode whose goal is nearest to the recalled goal
line is of another family) and how many steps the agent took on the guide's advice.

Run it as ``python -m deltamem.analysis.recall_failures RUN_DIR [RUN_DIR ...]``; the
replay needs the run's environment (for ScienceWorld the JVM) and its memory's
dependencies (the embedder). Pure parts (:func:`guide_trace`, :func:`diagnose`,
:func:`cause_table`) take any environment object with ``reset``,
``admissible_actions`` and ``step``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, Protocol

from deltamem.agents.guide import Guide, abstract_action, procedures
from deltamem.text import REPORT_STOP_WORDS as _STOP
from deltamem.types import Recall

__all__ = [
    "CAUSES",
    "Diagnosis",
    "StepAdvice",
    "analyse_run",
    "cause_table",
    "diagnose",
    "family_of",
    "guide_trace",
    "main",
]

#: the causes of :func:`diagnose`, in the order they are tested, with a one-line reading
CAUSES: dict[str, str] = {
    "no-step": "no recalled item holds a step the guide can follow",
    "wrong-choice": "a recalled step done here ended the task (a value the recall cannot know)",
    "variation-words": "the step names objects or places of the recalled variation, absent here",
    "no-realisation": "the step's words occur here, but no admissible action realises it",
    "search": "the guide's back-tracking search never reached a place to do the step",
    "ended": "the recalled procedure was followed to its end without finishing the task",
    "budget": "still following the procedure when the step cap was reached",
}

_INVALID_OBSERVATION = "Nothing happens. That action is not available now"
_GOAL_LINE = re.compile(
    r"^\s*(?:\[[^\]]*\]\s*)?(?:trigger:\s*)?(?:tasks of the form|variant of the base skill|"
    r"task|goal|strategy for|workflow for|query)\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{[A-Z]\}")


class _Env(Protocol):
    def reset(self, task_id: str) -> Any: ...
    def admissible_actions(self) -> list[str]: ...
    def step(self, action: str) -> Any: ...


@dataclass(frozen=True)
class StepAdvice:
    """One step of a replay: what the guide advised before the action that was taken.

    Attributes:
        action: the action taken (as recorded).
        admissible: the actions admissible before it.
        step: the recalled step the guide aimed at (filled), ``None``: none left.
        advised: the admissible actions that realise it (empty: no advice).
        backtrack: the advice was the back-tracking search (the guide's open-closed,
            return-to-place, backtrack and search-unvisited rules).
        loose: the advised actions realise the step only loosely (words changed).
        same_observation: the replayed observation equals the recorded one (as cut).
        pointed: the procedure's next step (while back-tracking, the blocked one).
    """

    action: str
    admissible: tuple[str, ...]
    step: str | None
    advised: tuple[str, ...]
    backtrack: bool
    loose: bool
    same_observation: bool = True
    pointed: str | None = None

    @property
    def followed(self) -> bool:
        """The action taken was one the guide advised."""
        return self.action in self.advised

    @property
    def forward(self) -> bool:
        """The guide advised a step of the procedure itself (not the search)."""
        return bool(self.advised) and not self.backtrack


@dataclass(frozen=True)
class Diagnosis:
    """Why one episode's recall did or did not turn into progress (module doc)."""

    index: int
    task_id: str
    family: str
    success: bool
    reward: float
    steps: int
    cap: int
    warm: bool
    cause: str | None
    blocked: str | None
    detail: str
    followed_steps: int
    other_family: bool | None
    recalled_family: str | None
    replay_mismatches: int = 0


def family_of(task_id: str) -> str:
    """A task id's family: the part before the last ``:`` (``"boil:19"`` → ``boil``), the
    id itself when it has none."""
    head, sep, _ = task_id.rpartition(":")
    return head if sep else task_id


def guide_trace(env: _Env, task_id: str, recall: Recall, goal: str,
                actions: Sequence[tuple[str, str, bool]]) -> list[StepAdvice]:
    """Replay ``actions`` (``(action, observation, valid)`` as in ``trajectories.jsonl``) in
    ``env`` from ``reset(task_id)``, asking the guide before each step exactly as the ReAct
    agent does (:meth:`~deltamem.agents.guide.Guide.advise` with the valid actions taken so
    far and every action offered so far). Actions the agent never sent (recorded with the
    agent's "not available" observation) are not sent again."""
    env.reset(task_id)
    guide = Guide(recall, goal) if recall.text else None
    offered: dict[str, None] = {}
    taken: list[str] = []
    refused: list[str] = []
    out: list[StepAdvice] = []
    for action, observation, valid in actions:
        admissible = tuple(env.admissible_actions())
        step, advised, backtrack, loose, pointed = None, (), False, False, None
        if guide is not None:
            offered.update(dict.fromkeys(admissible))
            advice = guide.advise(admissible, taken, offered, refused)
            step, advised, backtrack = advice.step, tuple(advice.actions), advice.backtrack
            pointed = advice.blocked if advice.backtrack else advice.step
            loose = bool(advised) and step is not None and not any(
                abstract_action(a) == abstract_action(step) for a in advised)
        same = True
        if not observation.startswith(_INVALID_OBSERVATION):
            t = env.step(action)
            got = str(getattr(t, "observation", t))
            same = got.strip()[:len(observation)] == observation[:len(got.strip())]
        if valid:
            taken.append(action)
        else:
            refused.append(action)
        out.append(StepAdvice(action, admissible, step, advised, backtrack, loose, same, pointed))
    return out


def _content(text: str) -> set[str]:
    words = re.findall(r"\{[A-Z]\}|[a-z][a-z-]*", abstract_action(text).replace("{", " {"))
    return {w for w in words[1:] if w not in _STOP and len(w) > 1}


def _present(words: Iterable[str], texts: Iterable[str]) -> set[str]:
    blob = " ".join(texts).lower()
    return {w for w in words if not w.startswith("{") and re.search(rf"\b{re.escape(w)}\b", blob)}


def diagnose(trace: Sequence[StepAdvice], *, goal: str, recall: Recall, success: bool,
             cap: int, ended_by_cap: bool, observations: Sequence[str] = (),
             has_steps: bool | None = None) -> tuple[str | None, str | None, str]:
    """The cause (module doc), the recalled step where the thread was lost and a detail
    line, for one replayed episode; ``(None, None, ...)`` for a won or cold one.

    ``ended_by_cap``: the episode stopped at the step cap (not on a fatal action);
    ``has_steps``: whether any recalled item holds a step the guide reads (``None``:
    inferred from the trace)."""
    if success:
        return None, None, "won"
    if not recall.text:
        return None, None, "cold: nothing recalled"
    if has_steps is False or (has_steps is None and all(s.step is None for s in trace)):
        return "no-step", None, "the guide found no step in the recall"
    forward = [i for i, s in enumerate(trace) if s.forward and s.followed]
    last = forward[-1] if forward else -1
    after = trace[last + 1:]
    blocked = next((s.pointed for s in after if s.pointed is not None), None)
    if not ended_by_cap and trace and trace[-1].followed:
        t = trace[-1]
        if t.loose and not t.backtrack:
            return ("variation-words", t.step,
                    f"the loose realisation {t.action!r} of {t.step!r} ended the task")
        if not t.backtrack:
            return "wrong-choice", t.step, f"{t.action!r} (recalled: {t.step!r}) ended the task"
    if ended_by_cap and last >= len(trace) - 2 and last >= 0:
        return "budget", trace[last].step, f"following step {trace[last].step!r} at the cap"
    if after and all(s.step is None for s in after) and last >= 0:
        return "ended", trace[last].step, "the procedure had no step left"
    if blocked is None:
        return "no-step", None, "no recalled step was ever realisable here"
    words = _content(blocked)
    if _PLACEHOLDER.search(blocked):
        return "variation-words", blocked, "a placeholder the goal did not fill"
    seen = [goal, *observations, *(a for s in trace for a in s.admissible)]
    absent = words - _present(words, seen)
    if absent:
        return ("variation-words", blocked,
                f"absent here: {', '.join(sorted(absent))}")
    searching = sum(s.backtrack for s in after)
    if after and searching * 2 >= len(after):
        return "search", blocked, f"{searching} of {len(after)} steps after the loss searched"
    return "no-realisation", blocked, "its words occur here; no admissible action realises it"


def _recalled_goal(text: str) -> str | None:
    m = _GOAL_LINE.search(text)
    if not m:
        return None
    return re.split(r"\s\(|\s--", m.group(1), maxsplit=1)[0].strip()


def _nearest_family(goal_line: str, build: Sequence[tuple[str, str]]) -> str | None:
    words = _PLACEHOLDER.sub(" ", goal_line).lower().split()
    best, best_family = 0.0, None
    for task_id, goal in build:
        ratio = SequenceMatcher(None, words, goal.lower().split(), autojunk=False).ratio()
        if ratio > best:
            best, best_family = ratio, family_of(task_id)
    return best_family


def cause_table(diagnoses: Sequence[Diagnosis], by: Callable[[Diagnosis], str] = lambda d: d.family
                ) -> str:
    """A Markdown table: per group (default: task family) the failed warm episodes by
    cause, the won warm ones, the cold ones, and how many followed another family's
    procedure."""
    groups: dict[str, list[Diagnosis]] = {}
    for d in diagnoses:
        groups.setdefault(by(d), []).append(d)
    causes = list(CAUSES)
    head = ["group", "episodes", "cold", "warm won", *causes, "other family"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    total: Counter[str] = Counter()
    for name in sorted(groups):
        ds = groups[name]
        c = Counter(d.cause for d in ds if d.warm and d.cause)
        row = {"episodes": len(ds), "cold": sum(not d.warm for d in ds),
               "warm won": sum(d.warm and d.success for d in ds),
               "other family": sum(bool(d.other_family) for d in ds if d.warm), **c}
        total.update(row)
        lines.append("| " + " | ".join([name, *(str(row.get(k, 0)) for k in head[1:])]) + " |")
    lines.append("| **all** | " + " | ".join(str(total.get(k, 0)) for k in head[1:]) + " |")
    return "\n".join(lines)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return out


def analyse_run(run_dir: str | Path, *, env: Any = None, phases: Sequence[str] = ("frozen",),
                ) -> list[Diagnosis]:
    """Replay and diagnose every episode of ``phases`` in a finished train-to-test run.

    The recall is made again from a temporary copy of the phase's bank (``bank-frozen.db``),
    so the run directory is not touched. ``env``: an environment to reuse (default: the
    run's, built from its ``config.json`` and closed afterwards)."""
    from deltamem.bench.config import RunConfig
    from deltamem.bench.results import read_trajectories
    from deltamem.embed.factory import make_embedder
    from deltamem.envs.registry import make_env
    from deltamem.llm.scripted import ScriptedLLM
    from deltamem.memories import make_memory

    run_dir = Path(run_dir)
    config = RunConfig.model_validate(json.loads((run_dir / "config.json").read_text()))
    records = _read_jsonl(run_dir / "episodes.jsonl")
    trajectories = read_trajectories(run_dir)
    build = [(r["task_id"], trajectories[r["index"]]["goal"]) for r in records
             if r.get("phase") == "build" and r["index"] in trajectories]
    own = env is None
    if own:
        env = make_env(config.env, **config.env_options)
    embedder = make_embedder(config.embedder) if config.embedder else None
    out: list[Diagnosis] = []
    try:
        domain = config.domain or env.domain
        for phase in phases:
            bank = run_dir / f"bank-{phase}.db"
            chosen = [r for r in records if r.get("phase") == phase]
            if not chosen:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / "bank.db"
                if bank.exists():
                    shutil.copyfile(bank, copy)
                memory = make_memory(config.memory, bank=str(copy), embedder=embedder,
                                     llm=ScriptedLLM(), extractor=config.extractor,
                                     domain=domain, options=dict(config.memory_options))
                try:
                    for rec in chosen:
                        traj = trajectories.get(rec["index"])
                        if traj is None:
                            continue
                        task = env.reset(rec["task_id"])
                        recall = memory.recall(task)
                        out.append(_diagnose_record(env, rec, traj, task, recall, build))
                finally:
                    memory.close()
    finally:
        if own:
            env.close()
    return out


def _diagnose_record(env: Any, rec: Mapping[str, Any], traj: Mapping[str, Any], task: Any,
                     recall: Recall, build: Sequence[tuple[str, str]]) -> Diagnosis:
    actions = [(str(a), str(o), bool(v)) for a, o, v in traj["steps"]]
    trace = guide_trace(env, rec["task_id"], recall, task.goal, actions)
    cap = int(task.max_steps or env.max_steps(task))
    ended_by_cap = len(actions) >= cap
    texts = procedures(recall)
    guide = Guide(recall, task.goal) if recall.text else None
    verbs = {a.split()[0].lower() for s in trace for a in s.admissible if a.split()}
    followed_text = None
    has_steps = None
    if guide is not None:
        with_steps = [t for t in texts if guide.steps(verbs, t)]
        has_steps = bool(with_steps)
        followed_text = with_steps[0] if with_steps else None
    cause, blocked, detail = diagnose(
        trace, goal=task.goal, recall=recall, success=bool(rec["success"]), cap=cap,
        ended_by_cap=ended_by_cap, observations=[o for _, o, _ in actions],
        has_steps=has_steps)
    recalled = None
    if followed_text is not None:
        line = _recalled_goal(followed_text)
        recalled = _nearest_family(line, build) if line else None
    family = family_of(rec["task_id"])
    return Diagnosis(
        index=int(rec["index"]), task_id=rec["task_id"], family=family,
        success=bool(rec["success"]), reward=float(rec["reward"]), steps=len(actions),
        cap=cap, warm=bool(recall.text), cause=cause, blocked=blocked, detail=detail,
        followed_steps=sum(s.followed for s in trace),
        other_family=None if recalled is None else recalled != family,
        recalled_family=recalled,
        replay_mismatches=sum(not s.same_observation for s in trace))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m deltamem.analysis.recall_failures RUN_DIR ... [--json OUT]``: one cause
    table per run (module doc)."""
    p = argparse.ArgumentParser(prog="python -m deltamem.analysis.recall_failures",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished train-to-test run directories")
    p.add_argument("--phase", default="frozen", help="evaluation phase (default: frozen)")
    p.add_argument("--json", help="also write every diagnosis as JSON lines to this file")
    p.add_argument("--examples", type=int, default=0,
                   help="print this many diagnosed episodes per cause")
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for run in args.runs:
        ds = analyse_run(run, phases=(args.phase,))
        print(f"### {run}\n")
        print(cause_table(ds))
        mismatched = sum(d.replay_mismatches for d in ds)
        if mismatched:
            print(f"\n(replay: {mismatched} observations differed from the record)")
        if args.examples:
            shown: Counter[str] = Counter()
            for d in ds:
                if d.cause and shown[d.cause] < args.examples:
                    shown[d.cause] += 1
                    print(f"- {d.cause}: {d.task_id} blocked at {d.blocked!r}: {d.detail}")
        print()
        rows.extend({"run": str(run), **asdict(d)} for d in ds)
    if args.json:
        Path(args.json).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
