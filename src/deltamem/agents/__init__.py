"""Agents that play environment tasks with recalled memory in their prompt."""

from deltamem.agents.parsing import Reply, clean_action, match_action, parse_reply
from deltamem.agents.react import INVALID_OBSERVATION, ReActAgent

__all__ = [
    "INVALID_OBSERVATION",
    "ReActAgent",
    "Reply",
    "clean_action",
    "match_action",
    "parse_reply",
]
