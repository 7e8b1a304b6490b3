"""Shared helpers of the baseline memory tests: episodes, scripted LLM answers, embedders."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from deltamem.embed import HashingEmbedder
from deltamem.llm import ScriptedLLM
from deltamem.memories.ace import ACE
from deltamem.memories.awm import AWM
from deltamem.memories.flat import FlatMemory
from deltamem.memories.longcontext import LongContext
from deltamem.memories.macla import MACLA
from deltamem.memories.memp import MemP
from deltamem.memories.reasoningbank import ReasoningBank
from deltamem.memories.synapse import Synapse
from deltamem.testing import TableEmbedder, make_episode
from deltamem.types import Episode

H = HashingEmbedder(dim=64)
SYSTEMS: dict[str, type[FlatMemory]] = {
    "synapse": Synapse,
    "awm": AWM,
    "reasoningbank": ReasoningBank,
    "long-context": LongContext,
    "ace": ACE,
    "memp": MemP,
    "macla": MACLA,
}
LLM_SYSTEMS = ("awm", "reasoningbank", "ace", "memp", "macla")

HEAT_STEPS = (
    ("go to countertop 2", "On the countertop 2, you see a egg 1."),
    ("take egg 1 from countertop 2", "You pick up the egg 1 from the countertop 2."),
    ("go to microwave 1", "The microwave 1 is closed."),
    ("heat egg 1 with microwave 1", "You heat the egg 1 using the microwave 1."),
    ("go to garbagecan 1", "On the garbagecan 1, you see nothing."),
    ("put egg 1 in/on garbagecan 1", "You put the egg 1 in/on the garbagecan 1."),
)
MUG_STEPS = (
    ("go to cabinet 3", "On the cabinet 3, you see a mug 2."),
    ("take mug 2 from cabinet 3", "You pick up the mug 2 from the cabinet 3."),
    ("clean mug 2 with sinkbasin 1", "Nothing happened."),
    ("go to sinkbasin 1", "On the sinkbasin 1, you see nothing."),
    ("clean mug 2 with sinkbasin 1", "You clean the mug 2 using the sinkbasin 1."),
    ("go to shelf 1", "On the shelf 1, you see nothing."),
    ("put mug 2 in/on shelf 1", "You put the mug 2 in/on the shelf 1."),
)

WORKFLOW = {"title": "Clean an object and place it",
            "steps": ["go to {receptacle}", "take {object}", "clean {object} with sinkbasin"]}
MERGED = {"title": "Clean an object and place it somewhere",
          "steps": ["find {object}", "take {object}", "clean {object} with sinkbasin",
                    "put {object} in/on {target}"]}
LESSONS = {"items": [
    {"title": "Clean at the sink before placing", "description": "Tasks that ask for a clean "
     "object placed somewhere.", "content": "Take the object, clean it with the sinkbasin, then "
     "go to the target and put it there.", "tag": "strategy"},
    {"title": "Open closed receptacles first", "description": "Any target receptacle that "
     "starts closed.", "content": "Open the receptacle before putting the object in it.",
     "tag": "warning"},
]}

REFLECTION = {"reasoning": "The agent cleaned the object first.", "error_identification": "none",
              "root_cause_analysis": "It followed the cleaning steps.",
              "correct_approach": "Clean the object at the sinkbasin, then place it.",
              "key_insight": "Clean before placing.", "bullet_tags": []}
CURATION = {"reasoning": "A new strategy.", "operations": [
    {"type": "ADD", "section": "strategies",
     "content": "Clean an object: take it, clean it with the sinkbasin, put it in place."}]}
REFINEMENT = {"keep": ["clean {object} with sinkbasin"], "avoid": ["go to garbagecan"]}


def good_answer(messages: Sequence[Mapping[str, str]], purpose: str, _choices: Any) -> Any:
    """A valid scripted answer for any baseline prompt (chosen by purpose and prompt)."""
    prompt = messages[1]["content"]  # the task prompt (a repair request comes after it)
    if "REFLECTOR" in prompt:
        return REFLECTION
    if "CURATOR" in prompt:
        return CURATION
    if "REFINING a procedure" in prompt:
        return REFINEMENT
    if "reusable PROCEDURE" in prompt:
        return {"name": "Clean an object and place it", "preconditions": "A dirty object",
                "steps": WORKFLOW["steps"]}
    if "PROCEDURE for a text-game agent's procedural memory" in prompt or \
            "CORRECTING a procedure" in prompt:
        return WORKFLOW
    if purpose == "merge":
        return MERGED
    if "WORKFLOW" in prompt:
        return WORKFLOW
    if "LESSONS" in prompt:
        return LESSONS
    raise AssertionError(f"unexpected prompt for purpose {purpose}: {prompt[:80]!r}")


def good_llm() -> ScriptedLLM:
    return ScriptedLLM(responder=good_answer)


def open_memory(system: str, mode: str, path: str = ":memory:", **kw: Any) -> FlatMemory:
    """A memory of ``system`` in ``mode`` (llm mode gets a well-behaved scripted LLM)."""
    kw.setdefault("embedder", H)
    kw.setdefault("domain", "alfworld")
    if mode == "llm":
        kw.setdefault("llm", good_llm())
    return SYSTEMS[system].open(path, mode=mode, **kw)


def unit(cos: float, dim: int = 64) -> list[float]:
    """A vector whose cosine with e_0 is exactly ``cos``."""
    v = [0.0] * dim
    v[0] = cos
    v[1] = math.sqrt(1.0 - cos**2)
    return v


def table(mapping: Mapping[str, Sequence[float]]) -> TableEmbedder:
    """Exact vectors for the given texts, hashing for every other text."""
    return TableEmbedder(mapping, default=lambda t: H.embed_queries([t])[0])


def episodes() -> list[Episode]:
    """Three successes and a failure of two task kinds (distinct episode ids)."""
    return [
        make_episode(episode_id="e-apple", task_id="t-apple"),
        make_episode("put a clean mug in shelf", actions=MUG_STEPS, episode_id="e-mug",
                     task_id="t-mug"),
        make_episode("heat some egg and put it in garbagecan", actions=HEAT_STEPS,
                     episode_id="e-egg", task_id="t-egg"),
        make_episode("heat some egg and put it in garbagecan", actions=HEAT_STEPS[:3],
                     success=False, episode_id="e-egg-fail", task_id="t-egg2"),
    ]
