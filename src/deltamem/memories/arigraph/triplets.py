"""Semantic triplets ``(subject, relation, object)``: the unit of AriGraph's semantic memory.

A triplet is normalised on construction (lower case, collapsed spaces, no
leading article, no surrounding punctuation), so the same fact extracted twice
is the same value. Its :meth:`Triplet.text` (``"subject, relation, object"``)
is what is embedded, shown to the agent and stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from deltamem.errors import InvalidInputError

__all__ = ["Triplet", "normalize_entity", "unique"]

_ARTICLE = re.compile(r"^(?:a|an|the|some)\s+", re.IGNORECASE)
_STRIP = " \t\n\r\"'`.,;:!?()[]{}"


def normalize_entity(text: str) -> str:
    """Lower case, collapsed whitespace, surrounding punctuation and a leading article removed.

    >>> normalize_entity("  The Red  Apple. ")
    'red apple'
    """
    s = " ".join(str(text).split()).strip(_STRIP).casefold()
    s = _ARTICLE.sub("", s)
    return s.strip(_STRIP)


@dataclass(frozen=True, order=True)
class Triplet:
    """One fact: ``subject`` —``relation``→ ``object`` (all normalised, all non-empty)."""

    subject: str
    relation: str
    object: str

    def __post_init__(self) -> None:
        for name in ("subject", "relation", "object"):
            value = normalize_entity(getattr(self, name))
            if not value:
                raise InvalidInputError(f"triplet {name} is empty: {self.subject!r}, "
                                        f"{self.relation!r}, {self.object!r}")
            object.__setattr__(self, name, value)

    @property
    def text(self) -> str:
        """``"subject, relation, object"`` (the embedded and displayed form)."""
        return f"{self.subject}, {self.relation}, {self.object}"

    @property
    def vertices(self) -> tuple[str, str]:
        return (self.subject, self.object)

    def to_list(self) -> list[str]:
        return [self.subject, self.relation, self.object]

    @classmethod
    def parse(cls, text: str) -> Triplet:
        """``"kitchen, contains, apple"`` → Triplet; :class:`InvalidInputError` otherwise."""
        parts = [p for p in str(text).split(",")]
        if len(parts) != 3:
            raise InvalidInputError(f"a triplet needs exactly three comma-separated parts: "
                                    f"{text!r}")
        return cls(*parts)

    @classmethod
    def from_obj(cls, obj: Any) -> Triplet:
        """From a ``[s, r, o]`` list, a ``{"subject", "relation", "object"}`` dict or a Triplet."""
        if isinstance(obj, Triplet):
            return obj
        if isinstance(obj, Mapping):
            return cls(obj["subject"], obj["relation"], obj["object"])
        if isinstance(obj, list | tuple) and len(obj) == 3:
            return cls(*obj)
        if isinstance(obj, str):
            return cls.parse(obj)
        raise InvalidInputError(f"cannot read a triplet from {obj!r}")


def unique(triplets: Iterable[Triplet]) -> list[Triplet]:
    """Triplets without repeats, first occurrence order kept."""
    seen: set[Triplet] = set()
    out: list[Triplet] = []
    for t in triplets:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out
