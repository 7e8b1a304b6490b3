"""The agent's decision prompt (paper Appendix C.2), assembled from per-domain template files.

Each domain has two files under ``deltamem/prompts/agent/<domain>/``:
``instruction.txt`` (the system instruction: interaction format and action
space) and ``example.txt`` (one complete in-context trajectory). TextWorld
uses the ``generic`` files.

The prompt is two chat messages::

    system: <instruction>
    user:   Here is an example of a complete task trajectory.
            <example>
            ---
            <recall.text>                      (left out, with its separator, when empty)
            ---
            Now it is your turn. Here is your task.
            <answer cue: free or constrained>  (``cue_at="start"``, the default)
            Task: <first observation (+ goal when the observation lacks it)>
            [N earlier steps are not shown.]   (when the history was trimmed, in blocks)
            Thought: ... / Action: ... / Observation: ...   (the running history)
            From memory, the next step: ...    (guide hint, when the agent has one)
            Available actions: ...             (when the list is short enough)
            <answer cue>                       (``cue_at="end"``: here instead)

``recall.text`` already carries the memory header (paper C.3), so the agent
adds none of its own.

Where the cue goes decides what a model with a prompt cache evaluates again at
every step. Everything up to the newest step is the previous call's prompt, so a
cache (the local model's KV cache, an API's prompt cache) reuses it; what follows
the newest step is evaluated again each time. With the cue at the start, that is the
guide's hint, the action list when shown, and the chat template's end of turn; with
the cue at the end (the layout before 2026-11-27, kept to reproduce the rows measured
with it) the cue's ~15 tokens as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from deltamem.domains import get_domain
from deltamem.errors import ConfigError
from deltamem.llm.base import Message
from deltamem.types import Recall, Step, Task

__all__ = [
    "CUE_PLACES",
    "AgentPrompts",
    "build_messages",
    "history_start",
    "load_agent_prompts",
    "render_history",
    "render_step",
    "task_text",
]

_TEMPLATE_DIRS = {
    "alfworld": "alfworld",
    "scienceworld": "scienceworld",
    "webshop": "webshop",
    "textworld": "generic",
    "generic": "generic",
}

EXAMPLE_INTRO = "Here is an example of a complete task trajectory."
TASK_INTRO = "Now it is your turn. Here is your task."
SECTION = "---"
FREE_CUE = (
    'Reply with "Thought: <your reasoning>" on one line and "Action: <your next action>" '
    'on the next, or with "Action: <your next action>" alone.'
)
CONSTRAINED_CUE = "Reply with your next action only, copied exactly from the available actions."
CUE_PLACES = ("start", "end")
"""Where :func:`build_messages` puts the answer cue (see the module docstring)."""


@dataclass(frozen=True)
class AgentPrompts:
    """The instruction and the in-context example of one domain."""

    domain: str
    instruction: str
    example: str


@cache
def load_agent_prompts(domain: str) -> AgentPrompts:
    """Load the template files of ``domain``; :class:`ConfigError` for an unknown domain."""
    get_domain(domain)  # unknown domains raise ConfigError listing the known ones
    folder = _TEMPLATE_DIRS.get(domain)
    if folder is None:
        raise ConfigError(f"no agent prompt templates for domain {domain!r}")
    base = resources.files("deltamem").joinpath("prompts", "agent", folder)
    texts: dict[str, str] = {}
    for name in ("instruction", "example"):
        f = base.joinpath(f"{name}.txt")
        if not f.is_file():
            raise ConfigError(f"agent prompt template missing: prompts/agent/{folder}/{name}.txt")
        texts[name] = f.read_text(encoding="utf-8").strip()
    return AgentPrompts(domain=domain, instruction=texts["instruction"], example=texts["example"])


def task_text(task: Task) -> str:
    """The task as shown to the agent: the first observation, plus the goal if it is not in it."""
    obs = task.observation.strip()
    goal = task.goal.strip()
    if not obs:
        return goal
    if goal and goal.casefold() not in obs.casefold():
        return f"{obs}\nYour goal: {goal}"
    return obs


def render_step(step: Step) -> str:
    """One history entry: the thought (if any), the action and its observation."""
    lines = []
    if step.thought:
        lines.append(f"Thought: {step.thought}")
    lines.append(f"Action: {step.action}")
    lines.append(f"Observation: {step.observation.strip()}")
    return "\n".join(lines)


HISTORY_KEEP = 0.5
"""Share of the history budget left after a trim (see :func:`history_start`)."""


def history_start(steps: Sequence[Step], max_chars: int) -> int:
    """Index of the first step shown in the history (trimming in blocks).

    The history grows step by step; when the shown steps would take more than
    ``max_chars`` characters, the oldest are dropped until they take at most
    :data:`HISTORY_KEEP` of it (always keeping the newest step). The start index then
    stays put for the next steps, so the prompt up to the newest step is the one the
    model saw before -- a prefix its KV cache can reuse -- instead of changing at every
    step, as dropping one step at a time from the front would. The index is a pure
    function of the steps (the growth is replayed), so a resumed or replayed episode
    renders the same prompts.
    """
    sizes = [len(render_step(step)) + 1 for step in steps]
    start, used = 0, 0
    low = int(max_chars * HISTORY_KEEP)
    for i, size in enumerate(sizes):
        used += size
        if used > max_chars:
            while start < i and used > low:
                used -= sizes[start]
                start += 1
    return start


def render_history(steps: Sequence[Step], max_chars: int) -> str:
    """The steps from :func:`history_start` on (trimmed in blocks to ``max_chars``).

    Dropped steps are replaced by a one-line marker, which changes only when the
    start moves.
    """
    if not steps:
        return ""
    start = history_start(steps, max_chars)
    kept = [render_step(step) for step in steps[start:]]
    if start:
        noun = "step is" if start == 1 else "steps are"
        kept.insert(0, f"[{start} earlier {noun} not shown.]")
    return "\n".join(kept)


def build_messages(
    prompts: AgentPrompts,
    task: Task,
    recall: Recall,
    steps: Sequence[Step],
    admissible: Sequence[str],
    *,
    constrained: bool,
    history_chars: int,
    max_listed_actions: int,
    hint: str | None = None,
    cue_at: str = "start",
) -> list[Message]:
    """The chat messages for the next decision (layout in the module docstring).

    ``hint`` (the agent's ``guide`` option) is one line put right before the action
    list, where a small model reads it. ``cue_at`` (one of :data:`CUE_PLACES`) puts the
    answer cue before the task or after everything else."""
    if cue_at not in CUE_PLACES:
        raise ConfigError(f"cue_at must be one of {', '.join(CUE_PLACES)}, got {cue_at!r}")
    cue = CONSTRAINED_CUE if constrained else FREE_CUE
    parts = [EXAMPLE_INTRO, "", prompts.example, SECTION]
    if recall.text.strip():
        parts += [recall.text.strip(), SECTION]
    parts.append(TASK_INTRO)
    if cue_at == "start":
        parts.append(cue)
    parts.append(f"Task: {task_text(task)}")
    history = render_history(steps, history_chars)
    if history:
        parts.append(history)
    if hint:
        parts.append(hint)
    if admissible and len(admissible) <= max_listed_actions:
        parts.append("Available actions:\n" + "\n".join(f"- {a}" for a in admissible))
    if cue_at == "end":
        parts.append(cue)
    return [
        {"role": "system", "content": prompts.instruction},
        {"role": "user", "content": "\n".join(parts)},
    ]
