"""Shared fixtures: deterministic embedders, scripted LLMs, small episodes."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

#: recorded data and the scripts that record it are not tests
collect_ignore_glob = ["*/fixtures/*"]


@pytest.fixture
def embedder():
    from deltamem.embed import HashingEmbedder

    return HashingEmbedder(dim=256)


@pytest.fixture(autouse=True)
def _memory_registry():
    """Memory systems a test registers are unregistered after it: the registry refuses a
    name twice, and a test's toy system must not leak into the next test."""
    from deltamem.memories import list_memories, unregister_memory

    before = set(list_memories())
    yield
    for name in set(list_memories()) - before:
        unregister_memory(name)
