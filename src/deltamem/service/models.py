"""Request and response bodies of the service (the HTTP API's OpenAPI spec; the MCP tools'
arguments and results).

Every text field is bounded and refuses NUL characters and lone surrogates
(neither can be stored in every backend), every number is finite, and types are
strict (a boolean is ``true``/``false``, never ``"yes"``), so a body that validates
can always be learned or stored; one that does not is a 422 naming the field.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from deltamem.core.tree import Node
from deltamem.domains import DOMAINS
from deltamem.types import Episode, Recall, RecallItem, Step, Task, Usage

MAX_TEXT = 20_000
MAX_STEPS = 500
BANK_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from e
    return value


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_storable)]
ShortText = Annotated[str, Field(max_length=200), AfterValidator(_storable)]
Domain = Literal[tuple(sorted(DOMAINS))]  # type: ignore[valid-type]
TreeName = Literal["task", "env"]


class _Strict(BaseModel):
    """Request bodies: no unknown fields, finite numbers, and strict types (no coercion:
    ``"success": "yes"`` or ``"reward": "1"`` is a 422, not a guess)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class TaskIn(_Strict):
    """A task (see :class:`deltamem.types.Task`)."""

    id: ShortText = "task"
    goal: Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(_storable)]
    scene: Text = ""
    domain: Domain = "generic"  # type: ignore[valid-type]
    split: ShortText = ""
    observation: Text = ""
    max_steps: int | None = Field(default=None, ge=1, le=100_000)

    def to_task(self) -> Task:
        return Task(**self.model_dump())


class StepIn(_Strict):
    """One step of an episode (see :class:`deltamem.types.Step`)."""

    action: Text
    observation: Text = ""
    reward: float = 0.0
    done: bool = False
    thought: Text = ""
    valid: bool = True
    admissible: list[ShortText] = Field(default_factory=list, max_length=200)

    def to_step(self) -> Step:
        return Step(**{**self.model_dump(), "admissible": tuple(self.admissible)})


class EpisodeIn(_Strict):
    """A finished episode (see :class:`deltamem.types.Episode`)."""

    id: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable)] | None = None
    task: TaskIn
    steps: list[StepIn] = Field(min_length=1, max_length=MAX_STEPS)
    success: bool
    reward: float
    max_steps: int | None = Field(default=None, ge=1, le=100_000)

    def to_episode(self) -> Episode:
        extra = {} if self.id is None else {"id": self.id}
        return Episode(
            self.task.to_task(),
            tuple(s.to_step() for s in self.steps),
            success=self.success,
            reward=self.reward,
            max_steps=self.max_steps,
            **extra,
        )


class MatchDetail(_Strict):
    """The best match of one tree for a recall (Eq. 6) and its root→node chain."""

    node_id: ShortText | None = None
    score: float | None = None
    tau: float
    accepted: bool
    chain: list[ShortText] = Field(default_factory=list, max_length=1000)


class RecallItemOut(BaseModel):
    source: str
    id: str
    text: str
    score: float | None = None
    role: str = ""


class UsageCountOut(BaseModel):
    """One purpose: completed calls, tokens, and the HTTP attempts, retries and seconds spent
    waiting between them (backends without retries report attempts = calls)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    attempts: int = 0
    retries: int = 0
    retry_wait: float = 0.0


class UsageOut(BaseModel):
    """LLM calls and tokens spent serving the request, by purpose (empty: no LLM used)."""

    by_purpose: dict[str, UsageCountOut] = Field(default_factory=dict)
    total_tokens: int = 0

    @classmethod
    def of(cls, usage: Usage) -> UsageOut:
        return cls(
            by_purpose={p: UsageCountOut(**c) for p, c in usage.to_dict().items()},
            total_tokens=usage.total_tokens,
        )


class RecallRequest(_Strict):
    task: TaskIn


class RecallOut(_Strict):
    """A recall (see :class:`deltamem.types.Recall`); ``learn`` accepts it back."""

    text: str = Field(default="", max_length=1_000_000)
    items: list[RecallItemOut] = Field(default_factory=list, max_length=10_000)
    details: dict[TreeName, MatchDetail] = Field(default_factory=dict)

    @classmethod
    def of(cls, recall: Recall) -> RecallOut:
        return cls(
            text=recall.text,
            items=[RecallItemOut(**i.__dict__) for i in recall.items],
            details={k: MatchDetail(**v) for k, v in recall.details.items()},
        )

    def to_recall(self) -> Recall:
        return Recall(
            self.text,
            tuple(RecallItem(**i.model_dump()) for i in self.items),
            {k: v.model_dump() for k, v in self.details.items()},
        )


class RecallResponse(RecallOut):
    usage: UsageOut = Field(default_factory=UsageOut)


class LearnRequest(_Strict):
    """An episode and, optionally, the recall made for its task (as ``…/recall`` returned it)."""

    episode: EpisodeIn
    recall: RecallResponse | None = None


class ChangeOut(BaseModel):
    kind: Literal["written", "skipped", "rejected", "hit", "consolidated", "unchanged",
                  "failed", "superseded"]
    source: str
    reason: str
    id: str | None = None


class LearnResponse(BaseModel):
    changes: list[ChangeOut]
    usage: UsageOut


class StatsResponse(BaseModel):
    """Bank figures (see :meth:`deltamem.DeltaMem.stats`) plus the bank's meta."""

    bank: str
    meta: dict[str, Any]
    nodes: dict[str, int]
    units: int
    depth_histogram: dict[str, dict[str, int]]
    kind: dict[str, dict[str, int]]
    label: dict[str, dict[str, int]]
    consolidated: dict[str, int]
    avg_tokens: dict[str, float]
    episodes_learned: int
    last_episode_id: str | None
    rejections: int


class PayloadOut(BaseModel):
    activation: str
    procedure: str
    termination: str


class NodeOut(BaseModel):
    """One node of a tree, as the viewer draws it."""

    id: str
    tree: TreeName
    kind: Literal["ROOT", "RESIDUAL"]
    label: Literal["SUCCESS", "FAILURE"]
    parent: str | None
    depth: int
    success_hits: int
    consolidated: bool
    origin: str
    source: str | None
    trigger: str
    payload: PayloadOut
    seq: int
    episode_id: str
    created_at: float
    hidden: bool = Field(default=False, description="Hidden by the inspector (with its "
                         "subtree): kept, never recalled.")

    @classmethod
    def of(cls, n: Node, hidden: bool = False) -> NodeOut:
        p = n.payload
        return cls(
            id=n.id, tree=n.tree, kind=n.kind, label=n.label, parent=n.parent, depth=n.depth,
            success_hits=n.success_hits, consolidated=n.consolidated, origin=n.origin,
            source=n.source, trigger=n.trigger,
            payload=PayloadOut(activation=p.activation, procedure=p.procedure,
                               termination=p.termination),
            seq=n.seq, episode_id=n.episode_id, created_at=n.created_at, hidden=hidden,
        )


class TreeResponse(BaseModel):
    bank: str
    embedder: str | None
    config: dict[str, Any]
    nodes: list[NodeOut]
    writable: bool = Field(default=False, description="The caller may edit nodes (the "
                           "viewer's edit controls): a key that may write, on a writable "
                           "service.")


NODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
EDIT_PATTERN = r"^ed-[0-9a-f]{16}$"
Reason = Annotated[str, Field(max_length=2000), AfterValidator(_storable)]


class NodeEditRequest(_Strict):
    """New text for a node (fields left out keep theirs); a new trigger is embedded again."""

    trigger: Annotated[str, Field(min_length=1, max_length=4000),
                       AfterValidator(_storable)] | None = None
    activation: Text | None = None
    procedure: Text | None = None
    termination: Text | None = None
    reason: Reason = ""


class HideRequest(_Strict):
    hidden: bool = True
    reason: Reason = ""


class RelabelRequest(_Strict):
    label: Literal["SUCCESS", "FAILURE"]
    reason: Reason = ""


class UndoRequest(_Strict):
    reason: Reason = ""


class EditOut(BaseModel):
    """One inspector edit, as its audit row holds it: who, when, what, every touched node
    before and after (``null``: did not exist / removed)."""

    id: str
    op: Literal["edit", "hide", "unhide", "relabel", "delete", "undo"]
    node_id: str
    tree: str
    who: str
    at: float
    reason: str
    undoes: str | None
    before: dict[str, dict[str, Any] | None]
    after: dict[str, dict[str, Any] | None]


class EditsResponse(BaseModel):
    bank: str
    edits: list[EditOut]


class ExplainRequest(_Strict):
    query: Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(_storable)]
    scene: Text = ""


class ScoredNode(BaseModel):
    id: str
    score: float


class TreeExplain(BaseModel):
    """Eq. 6 for one tree: the match, its chain with each node's score, the top nodes."""

    match: MatchDetail
    chain: list[ScoredNode]
    top: list[ScoredNode]


class ExplainResponse(BaseModel):
    trees: dict[TreeName, TreeExplain]


class ImportRequest(_Strict):
    """Records of ``GET …/export`` (one JSON object each); the bank must hold no nodes.

    Records that start with the export's header must end with its trailer and agree with it
    (counts by type, checksum), else the import is refused (422) naming what is missing;
    ``partial`` imports what is there and the response's ``notes`` say what was skipped.
    """

    records: list[dict[str, Any]] = Field(min_length=1, max_length=1_000_000)
    partial: bool = False

    @field_validator("records")
    @classmethod
    def _all_storable(cls, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        def walk(v: Any) -> None:
            if isinstance(v, str):
                _storable(v)
            elif isinstance(v, float) and not math.isfinite(v):
                raise ValueError("numbers must be finite")
            elif isinstance(v, dict):
                for k, x in v.items():
                    walk(k)
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

        walk(records)
        return records


class ImportResponse(BaseModel):
    nodes: int
    notes: list[str] = Field(default_factory=list, description="What the import skipped, "
                             "or that an export without a trailer could not be checked.")


class BankInfo(BaseModel):
    """One of the tenant's banks: its name and node count per tree.

    ``nodes`` is ``null`` when the bank exists but cannot be read right now
    (being created or deleted by another process, or damaged).
    """

    name: str
    nodes: dict[TreeName, int] | None


class BankListResponse(BaseModel):
    """The calling tenant's banks, by name (never another tenant's)."""

    banks: list[BankInfo]


class DeleteResponse(BaseModel):
    """The bank that was deleted with every node, log and learned-episode record."""

    bank: str
    deleted: Literal[True] = True


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body: ``detail`` says what was wrong."""

    detail: Any
