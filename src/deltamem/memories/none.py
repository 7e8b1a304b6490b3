"""Factory of the No Memory baseline."""

from __future__ import annotations

from typing import Any

from deltamem.memory import NoMemory


def make(**_: Any) -> NoMemory:
    """The No Memory baseline ignores every option."""
    return NoMemory()
