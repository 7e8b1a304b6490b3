"""Multi-structure memories of MCMA (§3.2, Eq. 1–2, Appendix A.4).

A knowledge entry is composed of the four structural primitives

    S = {natural text, key-value, chain, tree}                              (Eq. 2)

nested freely: a tree node's child, a chain node or a key-value value may itself be a
structure ("a leaf of a tree is a chain detailing that sub-task"). The JSON shape is the
paper's (Figures 14–18)::

    {"name": ..., "description": ...,
     "knowledge": {"name": ..., "source": [task descriptions],
                   "structured_storage": {"type": "tree", "root": {...}}}}

The models below are the typed representation; :func:`answer_schema` is the JSON
schema the copilot's answer must follow (passed to the LLM, checked by ``jsonschema``);
:func:`render_entry` is the text shown to the task model; :func:`count_structures`
counts every (nested) structure, the figures of the paper's Figure 4a; :func:`depth`
bounds nesting (:data:`MAX_DEPTH`), which a JSON schema cannot state portably.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = [
    "MAX_DEPTH",
    "Chain",
    "ChainNode",
    "KeyValue",
    "Knowledge",
    "KnowledgeEntry",
    "NaturalText",
    "Nested",
    "Structure",
    "Tree",
    "TreeNode",
    "answer_schema",
    "count_structures",
    "depth",
    "render_entry",
    "render_structure",
    "top_type",
]

MAX_DEPTH = 5
"""Deepest accepted nesting of structures (a tree of chains of key-values is depth 3)."""

Short = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Long = Annotated[str, StringConstraints(min_length=1, max_length=1200)]

_CFG = ConfigDict(extra="forbid")


class NaturalText(BaseModel):
    model_config = _CFG
    type: Literal["natural_language"]
    text: Long


class KeyValue(BaseModel):
    model_config = _CFG
    type: Literal["key_value"]
    data: dict[Short, Short | Annotated[list[Short], Field(max_length=12)] | Nested] = Field(
        min_length=1, max_length=16)


class ChainNode(BaseModel):
    """One step of a chain: a step text, a nested structure, or both."""

    model_config = _CFG
    step: Short | None = None
    structured_storage: Structure | None = None


class Chain(BaseModel):
    model_config = _CFG
    type: Literal["chain"]
    nodes: list[ChainNode] = Field(min_length=1, max_length=20)


class TreeNode(BaseModel):
    model_config = _CFG
    name: Short
    children: list[TreeNode | Nested] = Field(default_factory=list, max_length=10)


class Tree(BaseModel):
    model_config = _CFG
    type: Literal["tree"]
    root: TreeNode


class Nested(BaseModel):
    """A structure used where a node or value is expected (``{"structured_storage": ...}``)."""

    model_config = _CFG
    structured_storage: Structure


Structure = Annotated[NaturalText | KeyValue | Chain | Tree, Field(discriminator="type")]


class Knowledge(BaseModel):
    model_config = _CFG
    name: Short
    source: list[Short] = Field(default_factory=list, max_length=20)
    structured_storage: Structure


class KnowledgeEntry(BaseModel):
    """One candidate memory m_τ^i (Eq. 1): a name, a description, the structured body."""

    model_config = _CFG
    name: Short
    description: Long
    knowledge: Knowledge


for _m in (KeyValue, ChainNode, TreeNode, Nested, Knowledge, KnowledgeEntry):
    _m.model_rebuild()


class KnowledgeAnswer(BaseModel):
    """The copilot's answer: ``{"knowledge": [entry, ...]}``."""

    model_config = _CFG
    knowledge: list[KnowledgeEntry] = Field(min_length=1, max_length=5)


def answer_schema(max_items: int = 3) -> dict[str, Any]:
    """JSON schema of a copilot answer with at most ``max_items`` entries."""
    schema = KnowledgeAnswer.model_json_schema()
    schema["properties"]["knowledge"]["maxItems"] = max_items
    return schema


# -- analysis -------------------------------------------------------------------------------


def _children(s: Any) -> Iterable[Any]:
    """The structures nested directly inside structure ``s``."""
    if isinstance(s, KeyValue):
        for v in s.data.values():
            if isinstance(v, Nested):
                yield v.structured_storage
    elif isinstance(s, Chain):
        for n in s.nodes:
            if n.structured_storage is not None:
                yield n.structured_storage
    elif isinstance(s, Tree):
        stack: list[TreeNode | Nested] = [s.root]
        while stack:
            node = stack.pop()
            if isinstance(node, Nested):
                yield node.structured_storage
            else:
                stack.extend(reversed(node.children))


def depth(s: Any) -> int:
    """Nesting depth of a structure (a lone structure is 1)."""
    return 1 + max((depth(c) for c in _children(s)), default=0)


def count_structures(s: Any, counter: Counter[str] | None = None) -> Counter[str]:
    """How many structures of each type ``s`` contains, itself included (Figure 4a)."""
    counter = Counter() if counter is None else counter
    counter[s.type] += 1
    for c in _children(s):
        count_structures(c, counter)
    return counter


def top_type(entry: KnowledgeEntry) -> str:
    return entry.knowledge.structured_storage.type


# -- rendering ----------------------------------------------------------------------------


def render_structure(s: Any, indent: str = "") -> list[str]:
    """Prompt lines for one structure (trees indented, chains numbered, key-values as
    ``key: value``)."""
    if isinstance(s, NaturalText):
        return [indent + s.text]
    if isinstance(s, KeyValue):
        lines = []
        for k, v in s.data.items():
            if isinstance(v, Nested):
                lines.append(f"{indent}- {k}:")
                lines += render_structure(v.structured_storage, indent + "  ")
            else:
                lines.append(f"{indent}- {k}: {', '.join(v) if isinstance(v, list) else v}")
        return lines
    if isinstance(s, Chain):
        lines = []
        for i, n in enumerate(s.nodes, 1):
            head = f"{indent}{i}. {n.step}" if n.step else f"{indent}{i}."
            lines.append(head)
            if n.structured_storage is not None:
                lines += render_structure(n.structured_storage, indent + "   ")
        return lines
    if isinstance(s, Tree):
        return _render_node(s.root, indent)
    raise TypeError(f"not a structure: {type(s).__name__}")


def _render_node(node: TreeNode | Nested, indent: str) -> list[str]:
    if isinstance(node, Nested):
        return render_structure(node.structured_storage, indent)
    lines = [f"{indent}* {node.name}"]
    for c in node.children:
        lines += _render_node(c, indent + "  ")
    return lines


def render_entry(entry: KnowledgeEntry) -> str:
    """The text of one entry as the task model sees it."""
    s = entry.knowledge.structured_storage
    lines = [f"[{s.type.replace('_', ' ')}] {entry.name}", entry.description]
    lines += render_structure(s, "  ")
    return "\n".join(lines)
