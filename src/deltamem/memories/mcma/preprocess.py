"""Trajectory preprocessing of MCMA (§3.1, Appendix A.3, Algorithm 1).

A raw trajectory becomes a hierarchical task tree Ψ in four stages:

1. **Noise pruning** (:func:`prune`, ``A_prune``): drop actions the environment rejected
   or that changed nothing ("Nothing happens", "... is already open"), observation-only
   actions (``look``, ``inventory``, ...), back-to-back inverse pairs (BabyAI ``turn
   left``/``turn right``; three equal turns become one turn the other way, four none),
   loops (a move brought the agent back to an observation it had already seen and no
   milestone was reached in between: the steps in between are removed), and, where one
   navigation reaches any place (household), a ``go to`` superseded by
   another ``go to`` before anything was done there.
2. **Subtask segmentation** (``A_split``): the deterministic splitter
   (:class:`RuleSplitter`) ends a subtask after each *milestone* action (take, put,
   heat, pick up, toggle, ...; :mod:`.grammar`); a one-action segment is merged into the
   next one (it prepares it, e.g. "take bowl from diningtable" before cooling it). When
   milestones do not split a segment, it is split where navigation starts (``go to``,
   a BabyAI turn). The LLM splitter (:class:`LLMSplitter`) asks for labelled index
   ranges, validated against :func:`split_schema`.
3. **Consistency check** (:func:`check_split`): the subtasks cover the parent's actions
   exactly once, in order, each non-empty, at least two of them, each labelled. The
   LLM splitter retries (Algorithm 1's ``while not valid``) and, when its answer stays
   invalid, the rejection is recorded and the rule splitter is used for that node.
4. **Structured processing** (:func:`decompose`): recursion; segments of at least
   ``min_split`` (3) actions are split again, shorter ones are leaves.

Everything here is pure (no I/O); the LLM splitter talks to an injected client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from deltamem.errors import ExtractionError
from deltamem.llm.base import LLMClient
from deltamem.memories.mcma.grammar import Grammar, grammar_for
from deltamem.types import Episode, Step

__all__ = [
    "MIN_SPLIT",
    "LLMSplitter",
    "PrunedStep",
    "RuleSplitter",
    "Segment",
    "Splitter",
    "TaskNode",
    "check_split",
    "decompose",
    "preprocess",
    "prune",
    "render_tree",
    "split_schema",
]

MIN_SPLIT = 3
"""Segments with at least this many actions are decomposed again (Appendix A.3)."""
NAME_MAX = 80
MAX_SUBTASKS = 8


@dataclass(frozen=True)
class PrunedStep:
    """A kept step and its index in the raw trajectory."""

    index: int
    action: str
    observation: str


class TaskNode(BaseModel):
    """A node of the task tree Ψ (Figure 11): a subtask, its actions and its subtasks."""

    model_config = ConfigDict(extra="forbid")

    name: str
    goal: str
    steps_count: int
    actions: list[str]
    children: list[TaskNode] = Field(default_factory=list)
    source: Literal["root", "rule", "llm"] = "rule"

    def leaves(self) -> list[TaskNode]:
        return [self] if not self.children else [x for c in self.children for x in c.leaves()]

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children), default=0)


@dataclass(frozen=True)
class Segment:
    """One subtask proposed by a splitter: actions ``[start, end)`` of the parent, a label."""

    start: int
    end: int
    name: str


class Splitter(Protocol):
    """``A_split``: propose the subtasks of a node's actions (``None``: cannot split)."""

    def split(self, goal: str, actions: Sequence[str]) -> list[Segment] | None: ...


# -- 1. pruning ---------------------------------------------------------------------------


def prune(steps: Sequence[Step], grammar: Grammar) -> list[PrunedStep]:
    """``A_prune``: the steps worth remembering, in order (see the module docstring)."""
    kept: list[PrunedStep] = []
    for i, s in enumerate(steps):
        if not s.valid or grammar.rejected(s.observation):
            continue
        if grammar.kind(s.action) == "observe":
            continue
        kept.append(PrunedStep(i, " ".join(s.action.split()), s.observation.strip()))
    changed = True
    while changed:
        changed = False
        # inverse pairs taken back to back
        for j in range(len(kept) - 1):
            if grammar.undoes(kept[j].action, kept[j + 1].action):
                del kept[j:j + 2]
                changed = True
                break
        if changed:
            continue
        # three equal turns are one turn the other way; four are none (BabyAI)
        for j in range(len(kept) - 2):
            a = kept[j].action
            other = grammar.inverse_of(a)
            if other and kept[j + 1].action == a and kept[j + 2].action == a:
                four = j + 3 < len(kept) and kept[j + 3].action == a
                end = j + 4 if four else j + 3
                repl = [] if four else [PrunedStep(kept[j + 2].index, other,
                                                   kept[j + 2].observation)]
                kept[j:end] = repl
                changed = True
                break
        if changed:
            continue
        # loops: back at an observation already seen -> drop the steps in between
        seen: dict[str, int] = {}
        for j, s in enumerate(kept):
            key = s.observation
            if (key in seen and grammar.kind(s.action) == "navigate"
                    and not any(grammar.kind(x.action) == "milestone"
                                for x in kept[seen[key] + 1:j + 1])):
                del kept[seen[key] + 1:j + 1]
                changed = True
                break
            seen[key] = j
        if changed or not grammar.direct_navigation:
            continue
        # detours: go to A, then go to B with nothing done at A
        for j in range(len(kept) - 1):
            if (grammar.kind(kept[j].action) == "navigate"
                    and grammar.kind(kept[j + 1].action) == "navigate"):
                del kept[j]
                changed = True
                break
    return kept


# -- 2./3. splitting and its check ---------------------------------------------------------


def _label(actions: Sequence[str], grammar: Grammar) -> str:
    """A subtask name from its actions: the last milestone (else the last action), abstracted,
    with a count of repeated navigation folded in ("move forward ×3")."""
    milestones = [a for a in actions if grammar.kind(a) == "milestone"]
    if milestones:
        head = grammar.abstract(milestones[-1])
    else:
        head = grammar.abstract(actions[0])
        rest = list(actions[1:])
        if all(a == actions[0] for a in rest):
            head += f" x{len(actions)}" if rest else ""
        elif all(a == rest[0] for a in rest):
            head += f", then {grammar.abstract(rest[0])} x{len(rest)}"
        else:
            head += f", then {grammar.abstract(rest[-1])}"
    name = head[:1].upper() + head[1:]
    return name[:NAME_MAX]


class RuleSplitter:
    """The deterministic ``A_split`` over the action grammar (see the module docstring)."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar

    def _by_milestone(self, actions: Sequence[str]) -> list[tuple[int, int]]:
        cuts: list[tuple[int, int]] = []
        start = 0
        for i, a in enumerate(actions):
            if self.grammar.kind(a) == "milestone":
                cuts.append((start, i + 1))
                start = i + 1
        if start < len(actions):
            if cuts:
                cuts[-1] = (cuts[-1][0], len(actions))
            else:
                cuts.append((start, len(actions)))
        merged: list[tuple[int, int]] = []
        pending: int | None = None
        for s, e in cuts:
            if pending is not None:
                s, pending = pending, None
            if e - s == 1 and (s, e) != cuts[-1]:
                pending = s
                continue
            merged.append((s, e))
        if pending is not None:
            merged.append((pending, len(actions)))
        return merged

    def _by_navigation(self, actions: Sequence[str]) -> list[tuple[int, int]]:
        turns = ("turn left", "turn right")
        starts = [0]
        for i in range(1, len(actions)):
            prev, a = actions[i - 1], actions[i]
            if self.grammar.kind(a) != "navigate":
                continue
            if self.grammar.kind(prev) != "navigate" or (a in turns and prev not in turns):
                starts.append(i)
        return list(zip(starts, [*starts[1:], len(actions)], strict=True))

    def split(self, goal: str, actions: Sequence[str]) -> list[Segment] | None:
        for method in (self._by_milestone, self._by_navigation):
            spans = method(actions)
            if len(spans) >= 2:
                return [Segment(s, e, _label(actions[s:e], self.grammar)) for s, e in spans]
        return None


def check_split(n_actions: int, segments: Sequence[Segment]) -> list[str]:
    """Consistency check of one split: problems found (empty list: consistent).

    The subtasks must follow each other in order, cover actions ``0 … n_actions − 1``
    exactly once (so temporal order and the dependencies the executed trajectory
    satisfied are kept), each be non-empty and named, and be at least two.
    """
    problems: list[str] = []
    if len(segments) < 2:
        problems.append(f"{len(segments)} subtask(s); a split needs at least 2")
    expected = 0
    for k, seg in enumerate(segments):
        if not seg.name.strip():
            problems.append(f"subtask {k + 1} has no name")
        if seg.end <= seg.start:
            problems.append(f"subtask {k + 1} is empty ({seg.start}..{seg.end})")
        if seg.start != expected:
            problems.append(f"subtask {k + 1} starts at action {seg.start + 1}, expected "
                            f"{expected + 1} (gap, overlap or wrong order)")
        expected = max(expected, seg.end)
    if segments and expected != n_actions:
        problems.append(f"subtasks end at action {expected}, the segment has {n_actions}")
    return problems


def split_schema(n_actions: int) -> dict[str, Any]:
    """JSON schema of the LLM splitter's answer (1-based inclusive action ranges)."""
    return {
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array", "minItems": 2, "maxItems": min(MAX_SUBTASKS, n_actions),
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": NAME_MAX},
                        "first": {"type": "integer", "minimum": 1, "maximum": n_actions},
                        "last": {"type": "integer", "minimum": 1, "maximum": n_actions},
                    },
                    "required": ["name", "first", "last"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["subtasks"],
        "additionalProperties": False,
    }


@dataclass
class LLMSplitter:
    """``A_split`` by an LLM: prompt ``prompts/mcma/segment.txt``, schema :func:`split_schema`.

    An answer that fails the schema or :func:`check_split` is sent back once with the
    reason (Algorithm 1's ``while not valid``); when it stays invalid the rejection is
    kept in :attr:`rejections` and the ``fallback`` splitter answers instead.
    """

    llm: LLMClient
    fallback: Splitter
    max_tokens: int = 400
    rejections: list[ExtractionError] = field(default_factory=list)
    used_llm: int = 0

    def split(self, goal: str, actions: Sequence[str]) -> list[Segment] | None:
        from deltamem.memories.mcma.prompts import ask_validated, load

        numbered = "\n".join(f"{i + 1}. {a}" for i, a in enumerate(actions))
        prompt = load("segment").substitute(goal=goal, actions=numbered,
                                            n_actions=str(len(actions)))
        n = len(actions)

        def extra(obj: Any) -> str | None:
            segs = [Segment(x["first"] - 1, x["last"], x["name"].strip())
                    for x in obj["subtasks"]]
            problems = check_split(n, segs)
            return "; ".join(problems) if problems else None

        try:
            obj = ask_validated(self.llm, role="mcma_segment", purpose="preprocess",
                                prompt=prompt, schema=split_schema(n), check=extra,
                                shape='{"subtasks": [{"name": "...", "first": 1, "last": 3}, '
                                      '...]}', max_tokens=self.max_tokens)
        except ExtractionError as e:
            self.rejections.append(e)
            return self.fallback.split(goal, actions)
        self.used_llm += 1
        return [Segment(x["first"] - 1, x["last"], x["name"].strip()) for x in obj["subtasks"]]


# -- 4. recursive decomposition -------------------------------------------------------------


def decompose(goal: str, actions: Sequence[str], splitter: Splitter, *,
              min_split: int = MIN_SPLIT, max_depth: int = 6) -> TaskNode:
    """Algorithm 1: the task tree of an (already pruned) action sequence.

    The root holds every action; each node of ``≥ min_split`` actions is split by
    ``splitter`` into checked subtasks (an inconsistent or single-piece split makes the
    node a leaf), recursively up to ``max_depth`` levels.
    """
    src: Literal["rule", "llm"] = "llm" if isinstance(splitter, LLMSplitter) else "rule"
    root = TaskNode(name="Root Task", goal=goal, steps_count=len(actions),
                    actions=list(actions), source="root")

    def expand(node: TaskNode, depth: int) -> None:
        if node.steps_count < min_split or depth >= max_depth:
            return
        before = len(getattr(splitter, "rejections", ()))
        segs = splitter.split(goal, node.actions)
        if not segs or check_split(node.steps_count, segs):
            return
        used = src if len(getattr(splitter, "rejections", ())) == before else "rule"
        for seg in segs:
            child = TaskNode(name=seg.name, goal=goal, steps_count=seg.end - seg.start,
                             actions=node.actions[seg.start:seg.end], source=used)
            node.children.append(child)
            expand(child, depth + 1)

    expand(root, 0)
    return root


def preprocess(episode: Episode, splitter: Splitter | None = None, *,
               min_split: int = MIN_SPLIT) -> TaskNode:
    """Prune ``episode``'s trajectory and decompose it into a task tree (rule splitter by
    default; the grammar is the episode domain's)."""
    actions = tuple(s.action for s in episode.steps)
    grammar = grammar_for(episode.task.domain, actions)
    kept = prune(episode.steps, grammar)
    return decompose(episode.task.goal, [s.action for s in kept],
                     splitter or RuleSplitter(grammar), min_split=min_split)


def render_tree(node: TaskNode, *, with_actions: bool = False, indent: str = "") -> str:
    """The tree as indented text, as in the paper's Figure 11."""
    label = "Root Task" if node.source == "root" else "Subtask"
    lines = [f"{indent}|-- {label}: {node.name} ({node.steps_count} steps)"]
    if with_actions and not node.children:
        lines += [f"{indent}|   > {a}" for a in node.actions]
    for c in node.children:
        lines.append(render_tree(c, with_actions=with_actions, indent=indent + "|   "))
    return "\n".join(lines)
