"""Shared helpers of the decocted tests: a structured embedder and scripted LLM answers."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np

from deltamem.testing import TableEmbedder, make_episode
from deltamem.types import Episode

GROUPS, SUBGROUPS, MEMBERS = 4, 4, 4
_DIM = GROUPS + GROUPS * SUBGROUPS + 8
_CODE = re.compile(r"g(\d) s(\d)(?: m(\d))?")

LESSON = {"task_type": "Cleaning an object and placing it",
          "strategy": ["find the object", "clean it at the sink", "put it in place"],
          "pitfalls": ["do not put it down before cleaning"]}
CONCEPT = {"topic": "cleaning objects", "pattern": "clean an object then place it",
           "technique": "take, clean at sink, place"}


def structured_vector(text: str) -> list[float]:
    """A vector from the code ``gG sS [mM]`` in ``text``: 3·group + 1·subgroup + tiny member
    offset. Texts without a code all map to one fixed direction."""
    v = np.zeros(_DIM)
    m = _CODE.search(text)
    if m is None:
        v[-1] = 1.0
        return v.tolist()
    g, s = int(m.group(1)), int(m.group(2))
    v[g] = 3.0
    v[GROUPS + g * SUBGROUPS + s] = 1.0
    if m.group(3) is not None:
        v[GROUPS + GROUPS * SUBGROUPS + int(m.group(3)) % 7] = 0.05
    return v.tolist()


def structured_embedder() -> TableEmbedder:
    return TableEmbedder({}, name="structured", default=structured_vector)


def grouped_episodes() -> list[Episode]:
    """GROUPS × SUBGROUPS × MEMBERS successful episodes with goals ``solve gG sS mM``."""
    out = []
    for g in range(GROUPS):
        for s in range(SUBGROUPS):
            for m in range(MEMBERS):
                out.append(make_episode(goal=f"solve g{g} s{s} m{m}", task_id=f"t{g}{s}{m}",
                                        episode_id=f"e{g}{s}{m}"))
    return out


def responder(selected: Sequence[int] = (0,)):
    """A ScriptedLLM responder answering the distill, concept and rerank prompts validly."""
    def answer(messages, purpose, choices):
        if purpose == "rerank":
            return json.dumps({"selected": list(selected)})
        if "concept" in messages[1]["content"][:200]:
            return json.dumps(CONCEPT)
        return json.dumps(LESSON)
    return answer
