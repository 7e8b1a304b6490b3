"""Core value types shared by every memory system, agent and environment.

They are plain frozen dataclasses: cheap to build in tests, easy to serialise
(:func:`to_dict` / ``from_dict`` helpers) and free of I/O.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from deltamem.errors import InvalidInputError

__all__ = [
    "Change",
    "Changes",
    "Episode",
    "Match",
    "Recall",
    "RecallItem",
    "Step",
    "Task",
    "Usage",
    "UsageCount",
    "Verdict",
]


def new_id() -> str:
    """A fresh random identifier (hex uuid4)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Task:
    """One task instance handed to an agent.

    Attributes:
        id: stable identifier of the task instance (game file, variation, ...).
        goal: the goal text; DeltaMem queries its Task-Tree with it (paper §3.1).
        scene: the environment-relevant text (room layout, product category, ...);
            DeltaMem queries its Env-Tree with it. Empty means "use ``observation``".
        domain: ``alfworld``, ``scienceworld``, ``webshop``, ``textworld`` or ``generic``.
        split: the split the task was drawn from (``train``, ``seen``, ``unseen``, ...).
        observation: the first observation of the episode.
        max_steps: step cap for this task, if the environment sets one.
        meta: free-form extra facts (task type for reports, never shown to memories
            that must not see oracle labels).
    """

    id: str
    goal: str
    scene: str = ""
    domain: str = "generic"
    split: str = ""
    observation: str = ""
    max_steps: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def scene_text(self) -> str:
        """The Env-Tree query: ``scene`` or, when empty, the first observation."""
        return self.scene or self.observation

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        return cls(**{**data, "meta": dict(data.get("meta") or {})})


@dataclass(frozen=True)
class Step:
    """One agent action and what the environment answered.

    ``valid`` is False when the environment rejected the action (e.g. ALFWorld's
    "Nothing happened."). ``admissible`` optionally lists the actions that were
    admissible *before* this action was taken.
    """

    action: str
    observation: str
    reward: float = 0.0
    done: bool = False
    thought: str = ""
    valid: bool = True
    admissible: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "admissible": list(self.admissible)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(**{**data, "admissible": tuple(data.get("admissible") or ())})


@dataclass
class UsageCount:
    """Calls and tokens for one purpose, and what it took to get them.

    ``calls`` counts completions returned; ``attempts`` the requests sent to the backend
    (failed ones included, so a call that failed after its retries adds attempts but no
    call); ``retries`` the attempts after a call's first; ``retry_wait`` the seconds slept
    between them. :meth:`Usage.to_dict` leaves the three out when nothing was retried.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    retries: int = 0
    retry_wait: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Usage:
    """LLM calls and tokens counted by purpose (``act``, ``extract``, ``consolidate``, ...)."""

    by_purpose: dict[str, UsageCount] = field(default_factory=dict)

    def add(
        self, purpose: str, prompt_tokens: int, completion_tokens: int, calls: int = 1,
        *, attempts: int | None = None, retries: int = 0, retry_wait: float = 0.0,
    ) -> None:
        """Count ``calls`` (``attempts`` defaults to ``calls``: no retries)."""
        c = self.by_purpose.setdefault(purpose, UsageCount())
        c.calls += calls
        c.prompt_tokens += prompt_tokens
        c.completion_tokens += completion_tokens
        c.attempts += calls if attempts is None else attempts
        c.retries += retries
        c.retry_wait += retry_wait

    def merge(self, other: Usage) -> None:
        for purpose, c in list(other.by_purpose.items()):  # another thread may add a purpose
            self.add(purpose, c.prompt_tokens, c.completion_tokens, c.calls,
                     attempts=c.attempts, retries=c.retries, retry_wait=c.retry_wait)

    def snapshot(self) -> Usage:
        out = Usage()
        out.merge(self)
        return out

    def since(self, earlier: Usage) -> Usage:
        """Usage accumulated after ``earlier`` (a snapshot of this object)."""
        out = Usage()
        for purpose, c in list(self.by_purpose.items()):
            e = earlier.by_purpose.get(purpose, UsageCount())
            d = (c.calls - e.calls, c.prompt_tokens - e.prompt_tokens,
                 c.completion_tokens - e.completion_tokens, c.attempts - e.attempts,
                 c.retries - e.retries)
            wait = c.retry_wait - e.retry_wait
            if any(d) or wait:
                out.add(purpose, d[1], d[2], d[0], attempts=d[3], retries=d[4],
                        retry_wait=wait)
        return out

    @property
    def total_tokens(self) -> int:
        return sum(c.total_tokens for c in self.by_purpose.values())

    @property
    def calls(self) -> int:
        return sum(c.calls for c in self.by_purpose.values())

    @property
    def retries(self) -> int:
        return sum(c.retries for c in self.by_purpose.values())

    def to_dict(self) -> dict[str, dict[str, float]]:
        """By purpose: calls and tokens; ``attempts``, ``retries`` and ``retry_wait`` only
        where a purpose needed more requests than calls (absent means none)."""
        out: dict[str, dict[str, float]] = {}
        for p, c in sorted(self.by_purpose.items()):
            d = asdict(c)
            if c.attempts == c.calls and not c.retries and not c.retry_wait:
                for k in ("attempts", "retries", "retry_wait"):
                    del d[k]
            out[p] = d
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]]) -> Usage:
        return cls({p: UsageCount(**{"attempts": c.get("calls", 0), **c})  # type: ignore[arg-type]
                    for p, c in data.items()})


VerdictOutcome = Literal["success", "failure", "uncertain", "refused"]


@dataclass(frozen=True)
class Verdict:
    """An outcome judge's reading of an episode (see :mod:`deltamem.judge`).

    Attributes:
        outcome: ``success`` / ``failure``: the judge decided; ``uncertain``: the judge
            said it cannot tell; ``refused``: the judge gave no valid answer (its output
            stayed invalid after one repair). Only a decided verdict is learned from.
        reason: the judge's reason (or why there is no valid answer).
        judge: who gave it (``llm:<model>``, ``scripted``, ...).
    """

    outcome: VerdictOutcome
    reason: str
    judge: str

    @property
    def decided(self) -> bool:
        """Whether the verdict says success or failure (an episode can be learned)."""
        return self.outcome in ("success", "failure")

    @property
    def success(self) -> bool | None:
        """``True``/``False`` for a decided verdict, ``None`` otherwise."""
        return None if not self.decided else self.outcome == "success"

    def to_dict(self) -> dict[str, str]:
        return {"outcome": self.outcome, "reason": self.reason, "judge": self.judge}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        outcome = str(data["outcome"])
        if outcome not in ("success", "failure", "uncertain", "refused"):
            raise InvalidInputError(f"unknown verdict outcome {outcome!r}")
        return cls(outcome, str(data.get("reason", "")), str(data.get("judge", "")))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Episode:
    """A finished episode: the task, the steps taken and the outcome.

    Use :meth:`validate` (memories call it in ``learn``) to reject malformed
    episodes before anything is written. ``verdict``: when an outcome judge decided
    ``success`` (rather than the environment or the caller), its :class:`Verdict`, so the
    record says who gave the outcome and why.
    """

    task: Task
    steps: tuple[Step, ...]
    success: bool
    reward: float
    max_steps: int | None = None
    usage: Usage = field(default_factory=Usage)
    id: str = field(default_factory=new_id)
    verdict: Verdict | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidInputError` if the episode cannot be learned from."""
        if not isinstance(self.task, Task):
            raise InvalidInputError("episode.task must be a Task")
        if not self.task.goal.strip():
            raise InvalidInputError(f"task {self.task.id!r} has an empty goal")
        if not self.steps:
            raise InvalidInputError(f"episode of task {self.task.id!r} has an empty trajectory")
        if not isinstance(self.reward, int | float) or not math.isfinite(self.reward):
            raise InvalidInputError(f"episode reward must be a finite number, got {self.reward!r}")
        for i, s in enumerate(self.steps):
            if not isinstance(s, Step):
                raise InvalidInputError(f"step {i} is not a Step")
            if not isinstance(s.reward, int | float) or not math.isfinite(s.reward):
                raise InvalidInputError(f"step {i} reward must be finite, got {s.reward!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "success": self.success,
            "reward": self.reward,
            "max_steps": self.max_steps,
            "usage": self.usage.to_dict(),
            **({"verdict": self.verdict.to_dict()} if self.verdict is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Episode:
        return cls(
            task=Task.from_dict(data["task"]),
            steps=tuple(Step.from_dict(s) for s in data["steps"]),
            success=bool(data["success"]),
            reward=float(data["reward"]),
            max_steps=data.get("max_steps"),
            usage=Usage.from_dict(data.get("usage") or {}),
            id=data.get("id") or new_id(),
            verdict=Verdict.from_dict(data["verdict"]) if data.get("verdict") else None,
        )


@dataclass(frozen=True)
class RecallItem:
    """One piece of recalled memory, with where it came from and its score.

    ``source`` names the structure (``task``/``env`` tree, ``lessons``, ...);
    ``id`` is the stored unit's id; ``role`` says how it is shown (``base``,
    ``delta``, ``warning``, ``exemplar``, ...).
    """

    source: str
    id: str
    text: str
    score: float | None = None
    role: str = ""


@dataclass(frozen=True)
class Match:
    """The best node a tree offered for a task (DeltaMem, paper Eq. 6), read from a
    :class:`Recall` with :attr:`Recall.matches`.

    Attributes:
        tree: ``task`` (Task-Tree, queried with the goal) or ``env`` (Env-Tree, queried
            with the scene).
        node_id: the best-scoring node v*, ``None`` when the tree is empty.
        score: its score s(v*) = cos(query, trigger) − ε for a FAILURE node (``None``:
            empty tree).
        tau: the acceptance threshold τ of that tree.
        accepted: ``score >= tau``. Accepted: the chain was recalled, and ``learn``
            writes a RESIDUAL under v* (warm start). Not accepted: nothing was recalled
            from this tree, and ``learn`` writes a new ROOT (cold start).
        chain: the ids of the recalled root → v* chain (Eq. 7), root first; empty when
            not accepted.
    """

    tree: str
    node_id: str | None
    score: float | None
    tau: float
    accepted: bool
    chain: tuple[str, ...] = ()

    @classmethod
    def from_detail(cls, tree: str, detail: Mapping[str, Any]) -> Match:
        """Build from one entry of :attr:`Recall.details` (keys ``node_id``, ``score``,
        ``tau``, ``accepted``, ``chain``)."""
        score = detail.get("score")
        return cls(
            tree=tree,
            node_id=detail.get("node_id"),
            score=None if score is None else float(score),
            tau=float(detail.get("tau", math.nan)),
            accepted=bool(detail.get("accepted")),
            chain=tuple(detail.get("chain") or ()),
        )

    def to_detail(self) -> dict[str, Any]:
        """The entry of :attr:`Recall.details` this match is read from (the inverse of
        :meth:`from_detail`): keys ``node_id``, ``score``, ``tau``, ``accepted``, ``chain``."""
        return {"node_id": self.node_id, "score": self.score, "tau": self.tau,
                "accepted": self.accepted, "chain": list(self.chain)}


@dataclass(frozen=True)
class Recall:
    """What a memory returns for a task: prompt text plus the structure behind it.

    ``text`` is what goes into the agent prompt (memory header included), or
    ``""`` when nothing was recalled. ``items`` are the recalled units, in prompt
    order. ``details`` carries system-specific facts that ``learn`` needs again and
    that reports show; it must be JSON-serialisable. DeltaMem keeps one entry per
    enabled tree there (``details["task"]``, ``details["env"]``), each with the keys
    ``node_id``, ``score``, ``tau``, ``accepted`` and ``chain``: read them typed
    through :attr:`matches`.
    """

    text: str = ""
    items: tuple[RecallItem, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.text

    @property
    def matches(self) -> dict[str, Match]:
        """Each tree's best match, by tree name (``{}`` for memories without trees)."""
        return {
            str(tree): Match.from_detail(str(tree), d)
            for tree, d in self.details.items()
            if isinstance(d, Mapping) and "accepted" in d and "node_id" in d
        }

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "items": [asdict(i) for i in self.items],
                "details": dict(self.details)}


ChangeKind = Literal["written", "skipped", "rejected", "hit", "consolidated", "unchanged",
                 "failed", "superseded"]


@dataclass(frozen=True)
class Change:
    """One thing ``learn`` did (or decided not to do) and why.

    ``kind``: ``written`` (a node), ``skipped``, ``rejected`` (an LLM output), ``hit`` (a
    success hit on the matched node), ``consolidated`` (Eq. 8), ``unchanged`` (the
    episode was learned before), ``failed`` (a failure hit on the matched node),
    ``superseded`` (knowledge a newer observation contradicts; ``id`` the older node).
    """

    kind: ChangeKind
    source: str
    reason: str
    id: str | None = None


@dataclass(frozen=True)
class Changes:
    """Everything one ``learn`` call did, in order."""

    items: tuple[Change, ...] = ()

    def of(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.items if c.kind == kind]

    @property
    def written(self) -> list[Change]:
        return self.of("written")

    @property
    def skipped(self) -> list[Change]:
        return self.of("skipped")

    @property
    def rejected(self) -> list[Change]:
        return self.of("rejected")

    @property
    def consolidated(self) -> list[Change]:
        return self.of("consolidated")

    def to_list(self) -> list[dict[str, Any]]:
        return [asdict(c) for c in self.items]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)

