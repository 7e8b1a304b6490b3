"""What each tree embeds (§3.1): the trigger text of a node and the query text of a task.

The paper embeds the task goal for the Task-Tree and "the environment relevant
portion from the task instruction or initial observation" for the Env-Tree. A
small embedder (the bundled MiniLM) scores two goals mostly by their object and
place words, not by the kind of task ("clean some cup and put it in
diningtable" is nearer to "put a cool egg in diningtable" than to "put a clean
mug in shelf"), and scores two room descriptions by their shared boiler-plate.
So the text can be reduced before embedding, alike for the stored trigger and
the query (the same function is applied to both, so Eq. 4 and Eq. 6 compare
like with like):

Task-Tree (``task_trigger``):

* ``goal``: the goal as written (the paper's choice).
* ``abstract``: :func:`abstract_goal`, the goal with instance numbers dropped
  and its object and place words replaced by placeholders ({A}, {B}, ...), the
  form the structural extractor gives a skill's activation condition
  ("put a clean {A} in {B}").

Env-Tree (``env_trigger``):

* ``scene``: the scene text (:attr:`Task.scene_text`), as written.
* ``places``: :func:`place_list`, the kinds of things the scene lists (numbers
  dropped, duplicates removed, sorted), e.g. "places: cabinet, countertop,
  fridge, ..."; the scene text when it lists nothing.

Plain text processing: no model, no LLM call. Which mode each domain uses by
default is in :mod:`deltamem.domains` (measured with ``deltamem eval-recall``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from deltamem.text import ENTITY_BOUNDARY_WORDS as _BOUNDARY
from deltamem.text import NON_ENTITY_WORDS as _FUNCTION

if TYPE_CHECKING:
    from deltamem.types import Task

TaskTrigger = Literal["goal", "abstract"]
EnvTrigger = Literal["scene", "places"]
TASK_TRIGGERS: tuple[str, ...] = ("goal", "abstract")
ENV_TRIGGERS: tuple[str, ...] = ("scene", "places")

_NUM = re.compile(r"\b([A-Za-z][\w-]*) \d+\b(?!\.\d)")  # "above 200.0" is a quantity
_TOKEN = re.compile(r"\{[A-Z]\}|[A-Za-z][A-Za-z'-]*|\d+|[^\sA-Za-z\d]")
#: words after which the next word is a verb, not an entity
_CLAUSE = frozenset(["to", "will", "can", "please", "must", "should"])
_SEE = re.compile(r"you (?:can )?see:?\s*(.*?)(?:\.(?:\s|$)|$)", re.IGNORECASE | re.DOTALL)
_ITEM_SPLIT = re.compile(r",\s*|\s+and\s+|\n+")
_ARTICLE = re.compile(r"^(?:and\s+)?(?:an?|the|some)\s+", re.IGNORECASE)


def drop_numbers(text: str) -> str:
    """Instance numbers dropped ("cabinet 3" → "cabinet"), spaces collapsed."""
    return " ".join(_NUM.sub(r"\1", text).split())


def abstract_goal(goal: str) -> str:
    """The goal with its object and place words replaced by placeholders.

    An entity is the last content word of a noun phrase: a word that is not a
    function word, does not open a clause (the imperative verb: first word, or
    after punctuation or "to"), and is followed by a preposition or conjunction,
    by punctuation, or by the end of the text ("put a clean cup in diningtable"
    → "put a clean {A} in {B}"; "look at bowl under the desklamp" → "look at
    {A} under the {B}"). The same word always gets the same letter, in
    order of first appearance; at most 26 letters, later entities stay words.
    Lower-cased, instance numbers dropped.
    """
    tokens = _TOKEN.findall(drop_numbers(goal).lower())
    mapping: dict[str, str] = {}
    out: list[str] = []
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        prev = tokens[i - 1] if i else None
        head = (
            tok[0].isalpha()
            and tok not in _FUNCTION
            and len(tok) > 1
            and prev is not None
            and prev[0].isalnum()
            and prev not in _CLAUSE
            and (nxt is None or not nxt[0].isalnum() or nxt in _BOUNDARY)
        )
        if head and (tok in mapping or len(mapping) < 26):
            tok = mapping.setdefault(tok, "{" + chr(ord("A") + len(mapping)) + "}")
        out.append(tok)
    text = " ".join(out)
    return re.sub(r"\s+([.,;:!?])", r"\1", text)


def goal_entities(goal: str) -> list[str]:
    """The goal's entity words in order of appearance, the words :func:`abstract_goal`
    replaces ("put a hot cup in countertop" → ``["cup", "countertop"]``): the object
    first, then the places and tools."""
    words = drop_numbers(goal).lower().replace(",", " , ").split()
    abstract = abstract_goal(goal).replace(",", " , ").split()
    out: list[str] = []
    if len(words) != len(abstract):  # tokens the abstraction split differently
        return out
    for w, a in zip(words, abstract, strict=True):
        w = w.strip(".,;:!?")
        if a.startswith("{") and a.endswith("}") and w not in out:
            out.append(w)
    return out


def place_list(scene: str) -> str:
    """The kinds of things a scene lists ("you see a cabinet 1, a fridge 1, ...").

    Every "you see ..." listing up to the end of its sentence is split on commas
    and "and"; articles and instance numbers are dropped, duplicates removed and
    the kinds sorted, so two rooms with the same furniture give the same text.
    Returns the scene (numbers dropped) when it lists nothing.
    """
    items: set[str] = set()
    for listing in _SEE.findall(scene):
        for raw in _ITEM_SPLIT.split(listing):
            item = re.sub(r"\s*\(.*?\)", "", _ARTICLE.sub("", raw.strip()))
            item = drop_numbers(item).strip(" .:\t").lower()
            if (
                item
                and item not in {"nothing", "none"}
                and not item.startswith("you ")
                and len(item) < 60
            ):
                items.add(item)
    if not items:
        return drop_numbers(scene)
    return "places: " + ", ".join(sorted(items))


def tree_texts(
    task: Task, task_trigger: str = "goal", env_trigger: str = "scene"
) -> dict[str, str]:
    """The text each tree embeds for ``task``: the goal → Task-Tree, the scene (else the
    goal) → Env-Tree, in the given modes (what :meth:`DeltaMem.queries` returns)."""
    return {
        "task": task_text(task.goal, task_trigger),
        "env": env_text(task.scene_text, env_trigger) if task.scene_text else task.goal,
    }


def task_text(goal: str, mode: str) -> str:
    """The Task-Tree text of ``goal`` under ``mode`` (module doc)."""
    return abstract_goal(goal) if mode == "abstract" else goal


def env_text(scene: str, mode: str) -> str:
    """The Env-Tree text of ``scene`` under ``mode`` (module doc)."""
    return place_list(scene) if mode == "places" else scene
