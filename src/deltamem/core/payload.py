"""Node payloads (paper Eq. 1–2) and how a chain of them is rendered (Eq. 7).

A Task-Tree payload is a *skill* ⟨α, π, ω⟩ (activation condition, execution
procedure, termination condition, Eq. 1). An Env-Tree payload is *knowledge*
⟨α, κ⟩ (Eq. 2); the paper's extraction prompts emit the same three JSON
fields for both trees, so one :class:`Payload` type serves both: for
knowledge, ``procedure`` holds κ and ``termination`` is optional.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

TreeName = Literal["task", "env"]
Kind = Literal["ROOT", "RESIDUAL"]
Label = Literal["SUCCESS", "FAILURE"]


@dataclass(frozen=True)
class Payload:
    """α (``activation``), π or κ (``procedure``), ω (``termination``)."""

    activation: str
    procedure: str
    termination: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "activation_condition": self.activation,
            "execution_procedure": self.procedure,
            "termination_condition": self.termination,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Payload:
        return cls(
            activation=str(data.get("activation_condition", "")),
            procedure=str(data.get("execution_procedure", "")),
            termination=str(data.get("termination_condition", "")),
        )

    @property
    def text(self) -> str:
        """All stored text (for whitespace-token statistics, Table 5)."""
        return " ".join(p for p in (self.activation, self.procedure, self.termination) if p)


@dataclass(frozen=True)
class ChainEntry:
    """One node of a root-to-match chain, as shown to extractors and agents."""

    kind: Kind
    label: Label
    payload: Payload


def entry_title(tree: TreeName, entry: ChainEntry, index: int) -> str:
    """Section title of one chain entry: base, delta number ``index`` or warning."""
    if entry.label == "FAILURE":
        return "[Failure Record / WARN]"
    noun = "Skill" if tree == "task" else "Knowledge"
    if entry.kind == "ROOT":
        return f"[Base {noun}]"
    return f"[{noun} Delta {index}]"


def render_chain(tree: TreeName, chain: Sequence[ChainEntry], *, deltas_before: int = 0) -> str:
    """Render a root → match chain (Eq. 7) as plain text, root first.

    Failure records are marked so the agent avoids rather than follows them.
    ``deltas_before``: SUCCESS deltas of the chain left out before ``chain[0]`` (a chain
    cut from its root side), so the deltas shown keep their numbers.
    """
    lines: list[str] = []
    delta = deltas_before
    for entry in chain:
        if entry.kind == "RESIDUAL" and entry.label == "SUCCESS":
            delta += 1
        p = entry.payload
        lines.append(entry_title(tree, entry, delta))
        lines.append(f"Trigger: {p.activation}")
        if tree == "task":
            lines.append(f"Procedure: {p.procedure}")
            if p.termination:
                lines.append(f"Done when: {p.termination}")
        else:
            lines.append(f"Knowledge: {p.procedure}")
        lines.append("")
    return "\n".join(lines).strip()
