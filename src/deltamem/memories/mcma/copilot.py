"""The memory copilot: trajectory (+ task tree) → structured knowledge (§3.2, Eq. 1, 4).

Two implementations of one protocol, each for two roles (§3.3: success summarisation
and failure reflection are separate copilots):

* :class:`RuleCopilot`: deterministic candidates built from the task tree of
  :mod:`.preprocess`, one per composition (tree of chains, chain, key-value, natural
  text). It is the untrained baseline and produces the candidate pool when no LLM is
  used.
* :class:`LLMCopilot`: prompts ``prompts/mcma/knowledge_success.txt`` /
  ``knowledge_failure.txt`` (purpose ``abstract``); the answer must follow
  :func:`~deltamem.memories.mcma.structures.answer_schema`, parse into
  :class:`~deltamem.memories.mcma.structures.KnowledgeEntry` models and nest at most
  :data:`~deltamem.memories.mcma.structures.MAX_DEPTH` deep; one repair, then rejection.
  Any :class:`~deltamem.llm.base.LLMClient` serves, a trained copilot included.

The abstraction parameter α ∈ [0, 1] (Eq. 4) is a prompt input of the LLM copilot
(:func:`alpha_guide` says what it means in words) and selects the rule copilot's
wording: α < 1/3 keeps instance names ("cabinet 2"), 1/3 ≤ α < 2/3 drops instance
numbers, α ≥ 2/3 replaces the task's objects by placeholders (``<item>``, ``<place>``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from deltamem.errors import ConfigError, ExtractionError
from deltamem.llm.base import LLMClient
from deltamem.memories.mcma.grammar import Grammar, grammar_for
from deltamem.memories.mcma.preprocess import TaskNode, preprocess, prune
from deltamem.memories.mcma.structures import (
    MAX_DEPTH,
    KnowledgeAnswer,
    KnowledgeEntry,
    answer_schema,
    depth,
)
from deltamem.types import Episode

__all__ = [
    "COMPOSITIONS",
    "Copilot",
    "LLMCopilot",
    "Role",
    "RuleCopilot",
    "alpha_guide",
    "copilot_prompt",
    "episode_input",
    "parse_answer",
]

Role = Literal["success", "failure"]
COMPOSITIONS = ("tree", "chain", "key_value", "natural_language")
_NUMBERED = re.compile(r"\b([a-z][\w-]*) (\d+)\b", re.I)
_STOP = frozenset({
    "a", "an", "the", "in", "on", "to", "of", "with", "and", "put", "place", "find", "your",
    "task", "is", "look", "at", "under", "then", "it", "them", "two", "some"})


class Copilot(Protocol):
    """What MCMA needs from a copilot: candidate memories of one episode."""

    def abstract(self, episode: Episode, tree: TaskNode, alpha: float, n: int
                 ) -> list[KnowledgeEntry]: ...


def alpha_guide(alpha: float) -> str:
    """What abstraction level α asks for, in words (the copilot prompt's ``$alpha_guide``)."""
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be in [0, 1], got {alpha!r}")
    if alpha < 1 / 3:
        return ("Keep execution details: exact object and place names, the concrete action "
                "strings, where each object was found.")
    if alpha < 2 / 3:
        return ("Keep the procedure and object types but drop instance numbers and incidental "
                "details; name places by their type (cabinet, not cabinet 2).")
    return ("Abstract to a reusable script: replace the task's objects and places by "
            "placeholders such as <item>, <receptacle>, <tool>; keep only the general order "
            "of sub-goals and the conditions that matter.")


# -- rule copilot ---------------------------------------------------------------------------


_COLORS = ("red", "green", "blue", "purple", "yellow", "grey", "gray", "orange", "white",
           "black", "brown", "pink")


class _Wording:
    """Rewrites action texts at abstraction level α (see the module docstring).

    The task's objects are the goal words that name an instance in the actions
    ("apple" of "take apple 1 from ..."); the other instance names are places. Colours
    become ``<color>`` (BabyAI has no instance numbers).
    """

    def __init__(self, goal: str, alpha: float, grammar: Grammar,
                 actions: Sequence[str] = ()) -> None:
        self.alpha = alpha
        self.grammar = grammar
        named = {n.lower() for a in actions for n, _ in _NUMBERED.findall(a)}
        words = [w for w in re.findall(r"[a-z][a-z-]+", goal.lower())
                 if w not in _STOP and len(w) > 2]
        self.objects = list(dict.fromkeys(w for w in words if w in named))
        self.places = sorted(named - set(self.objects))

    def __call__(self, text: str) -> str:
        if self.alpha < 1 / 3:
            return text
        out = self.grammar.abstract(text)
        if self.alpha < 2 / 3:
            return out
        for i, w in enumerate(self.objects):
            tag = "<item>" if i == 0 else "<target>" if i == 1 else f"<object{i + 1}>"
            out = re.sub(rf"\b{re.escape(w)}s?\b", tag, out, flags=re.I)
        for w in self.places:
            out = re.sub(rf"\b{re.escape(w)}\b", "<place>", out, flags=re.I)
        return re.sub(rf"\b(?:{'|'.join(_COLORS)})\b", "<color>", out, flags=re.I)


def _source(ep: Episode) -> list[str]:
    return [ep.task.goal.strip()[:200]]


def _chain_nodes(actions: Sequence[str], word: _Wording) -> list[dict[str, Any]]:
    steps = list(dict.fromkeys(word(a) for a in actions)) if word.alpha >= 2 / 3 else [
        word(a) for a in actions]
    return [{"step": s[:200]} for s in steps[:20]]


def _tree_node(node: TaskNode, word: _Wording) -> dict[str, Any]:
    name = word(node.name)[:200]
    if node.children:
        return {"name": name, "children": [_tree_node(c, word) for c in node.children[:10]]}
    return {"name": name, "children": [
        {"structured_storage": {"type": "chain", "nodes": _chain_nodes(node.actions, word)}}]}


class RuleCopilot:
    """Deterministic candidate memories from a task tree (see the module docstring)."""

    def __init__(self, role: Role = "success") -> None:
        self.role = role

    def abstract(self, episode: Episode, tree: TaskNode, alpha: float, n: int = 4
                 ) -> list[KnowledgeEntry]:
        alpha_guide(alpha)  # range check
        actions = tuple(s.action for s in episode.steps)
        g = grammar_for(episode.task.domain, actions)
        word = _Wording(episode.task.goal, alpha, g, actions)
        goal = episode.task.goal.strip()
        title = word(goal)[:120] or goal[:120]
        subgoals = [c.name for c in tree.children] or [tree.name]
        out: list[KnowledgeEntry] = []
        if self.role == "failure":
            out = self._failure(episode, tree, word, title, g)
        else:
            bodies: dict[str, dict[str, Any]] = {
                "tree": {"type": "tree", "root": _tree_node(tree.model_copy(
                    update={"name": title}), word)},
                "chain": {"type": "chain", "nodes": _chain_nodes(
                    [word(s) for s in subgoals] if len(subgoals) > 1 else tree.actions, word)},
                "key_value": self._where(episode, word),
                "natural_language": {"type": "natural_language", "text": (
                    f"To {title}, the agent went through {len(subgoals)} sub-goal(s): "
                    + "; then ".join(word(s) for s in subgoals) + "."
                    + f" It took {len(tree.actions)} useful actions.")[:1200]},
            }
            for kind in COMPOSITIONS:
                body = bodies[kind]
                if body is None:
                    continue
                out.append(KnowledgeEntry.model_validate({
                    "name": f"{kind.replace('_', ' ').capitalize()} plan: {title}"[:200],
                    "description": (f"How a task like '{title}' was completed: "
                                    + ", ".join(word(s) for s in subgoals))[:1200],
                    "knowledge": {"name": f"Procedure for {title}"[:200],
                                  "source": _source(episode), "structured_storage": body}}))
        return out[:n]

    @staticmethod
    def _where(episode: Episode, word: _Wording) -> dict[str, Any] | None:
        """Where objects were taken from: ``take X from Y`` / ``pick up X`` → {X: [Y]}."""
        data: dict[str, list[str]] = {}
        for s in episode.steps:
            m = re.match(r"(?:take|get) (.+?) from (.+)$", s.action.strip(), re.I)
            if m and s.valid:
                data.setdefault(word(m.group(1))[:200], [])
                loc = word(m.group(2))[:200]
                if loc not in data[word(m.group(1))[:200]]:
                    data[word(m.group(1))[:200]].append(loc)
        if not data:
            return None
        return {"type": "key_value", "data": {k: v[:12] for k, v in list(data.items())[:16]}}

    def _failure(self, episode: Episode, tree: TaskNode, word: _Wording, title: str,
                 g: Grammar) -> list[KnowledgeEntry]:
        rejected = list(dict.fromkeys(word(s.action) for s in episode.steps
                                      if not s.valid or g.rejected(s.observation)))
        kept = prune(episode.steps, g)
        done = [c.name for c in tree.children] or [tree.name]
        last = word(kept[-1].action) if kept else "nothing useful"
        nodes: list[dict[str, Any]] = [{"step": f"reached: {word(s)}"[:200]} for s in done[:8]]
        nodes.append({"step": f"stopped after: {last}"[:200]})
        data: dict[str, Any] = {
            "outcome": f"failed after {len(episode.steps)} steps",
            "progress": {"structured_storage": {"type": "chain", "nodes": nodes}},
        }
        if rejected:
            data["actions with no effect"] = rejected[:12]
        text = (f"The attempt to {title} failed. It got as far as '{last}'. "
                + ("Avoid the commands that had no effect; use the admissible forms. "
                   if rejected else "")
                + "Check that every sub-goal of the task was reached before finishing.")
        def entry(kind: str, body: dict[str, Any]) -> KnowledgeEntry:
            return KnowledgeEntry.model_validate({
                "name": (f"Reflection on a failed attempt"
                         f"{'' if kind == 'key_value' else f' ({kind})'}: {title}")[:200],
                "description": text[:1200],
                "knowledge": {"name": f"What went wrong in {title}"[:200],
                              "source": _source(episode), "structured_storage": body}})

        # the same reflection in the four compositions (Eq. 1): the fact sheet first (what
        # MCMA stores with n=1), then the useful steps that did work as a chain (a task model
        # can redo them and go on from there), the sub-goal tree, and plain text
        out = [entry("key_value", {"type": "key_value", "data": data})]
        if kept:
            out.append(entry("chain", {"type": "chain", "nodes": _chain_nodes(
                [s.action for s in kept], word)}))
        if tree.children:
            out.append(entry("tree", {"type": "tree", "root": _tree_node(
                tree.model_copy(update={"name": f"progress on {title}"[:200]}), word)}))
        out.append(entry("natural_language", {"type": "natural_language", "text": (
            text + f" Sub-goals reached: {'; '.join(word(x) for x in done[:8])}.")[:1200]}))
        return out


# -- LLM copilot ----------------------------------------------------------------------------


def episode_input(episode: Episode, tree: TaskNode | None = None, max_chars: int = 4000
                  ) -> str:
    """The ``$input_data`` of a copilot prompt: goal, outcome, the pruned task tree."""
    from deltamem.llm.structured import truncate_middle
    from deltamem.memories.mcma.preprocess import render_tree

    tree = tree or preprocess(episode)
    head = (f"Task: {episode.task.goal.strip()}\n"
            f"Outcome: {'SUCCESS' if episode.success else 'FAILURE'} after "
            f"{len(episode.steps)} steps\n")
    body = render_tree(tree, with_actions=True)
    if not episode.success:
        rejected = [s.action for s in episode.steps if not s.valid][:8]
        if rejected:
            body += "\nActions the environment rejected: " + "; ".join(rejected)
        tail = "\n".join(f"> {s.action}\n{s.observation[:200]}" for s in episode.steps[-3:])
        body += "\nLast steps:\n" + tail
    return truncate_middle(head + body, max_chars)


def copilot_prompt(role: Role, episode: Episode, tree: TaskNode | None, alpha: float,
                   n: int, *, compact: bool = False) -> str:
    """The ``role`` copilot's prompt for ``episode`` at abstraction ``alpha`` (≤ ``n``
    entries): also the prompt of the training pairs, so training and use match.

    ``compact``: the one-line instruction of ``knowledge_compact.txt`` instead of the full
    instructions, for trained copilots (their behaviour is learned; the short prompt keeps
    CPU training sequences short)."""
    from deltamem.memories.mcma.prompts import load

    if compact:
        return load("knowledge_compact").substitute(
            role="success summary" if role == "success" else "failure reflection",
            alpha=f"{alpha:.2f}", input_data=episode_input(episode, tree))
    return load(f"knowledge_{role}").substitute(
        alpha=f"{alpha:.2f}", alpha_guide=alpha_guide(alpha),
        input_data=episode_input(episode, tree), max_items=str(n))


def parse_answer(obj: Any) -> list[KnowledgeEntry]:
    """Typed entries of a schema-valid answer; ValueError naming the problem otherwise."""
    try:
        answer = KnowledgeAnswer.model_validate(obj)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None
    for i, entry in enumerate(answer.knowledge):
        d = depth(entry.knowledge.structured_storage)
        if d > MAX_DEPTH:
            raise ValueError(f"knowledge.{i} nests {d} structures deep; at most {MAX_DEPTH}")
    return list(answer.knowledge)


@dataclass
class LLMCopilot:
    """The copilot as an LLM (prompted or trained); see the module docstring."""

    llm: LLMClient
    role: Role = "success"
    max_tokens: int = 900
    compact: bool = False
    rejections: list[ExtractionError] = field(default_factory=list)

    def prompt(self, episode: Episode, tree: TaskNode | None, alpha: float, n: int) -> str:
        return copilot_prompt(self.role, episode, tree, alpha, n, compact=self.compact)

    def abstract(self, episode: Episode, tree: TaskNode, alpha: float, n: int = 1
                 ) -> list[KnowledgeEntry]:
        """Entries for ``episode``; raises :class:`ExtractionError` when the answer stays
        invalid after one repair (and keeps it in :attr:`rejections`)."""
        from deltamem.memories.mcma.prompts import ask_validated

        def check(obj: Any) -> str | None:
            try:
                parse_answer(obj)
            except ValueError as e:
                return str(e)
            return None

        try:
            obj = ask_validated(
                self.llm, role=f"mcma_{self.role}", purpose="abstract",
                prompt=self.prompt(episode, tree, alpha, n), schema=answer_schema(n),
                check=check, max_tokens=self.max_tokens,
                shape='{"knowledge": [{"name": "...", "description": "...", "knowledge": '
                      '{"name": "...", "source": ["..."], "structured_storage": {"type": '
                      '"chain", "nodes": [{"step": "..."}]}}}]}')
        except ExtractionError as e:
            self.rejections.append(e)
            raise
        return parse_answer(obj)
