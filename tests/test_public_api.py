"""Public names stay put and core types round-trip (the docstring examples run as doctests)."""

from __future__ import annotations

import json

import deltamem
from deltamem.types import Episode, Step, Task, Usage


def test_public_names_are_pinned():
    assert set(deltamem.__all__) >= {"DeltaMem", "Task", "Step", "Episode", "Recall", "Changes",
                                     "Memory", "DeltaMemConfig"}
    for name in deltamem.__all__:
        assert hasattr(deltamem, name), name


def test_error_and_seed_names_are_pinned():
    """The error tree and the seed helper (docs/api.md); change these sets deliberately."""
    from deltamem import errors, seeding

    assert {n for n, v in vars(errors).items()
            if isinstance(v, type) and issubclass(v, Exception) and not n.startswith("_")} == {
        "DeltaMemError", "ConfigError", "InvalidInputError", "ToolInputError", "StoreError",
        "EmbedderMismatchError", "NotABankError", "BankDamagedError", "BankReadOnlyError",
        "StorageFullError", "InvalidImportError", "IncompleteExportError", "BankNotFound",
        "BankNotEmpty", "NodeNotFound", "EditConflictError",
        "ReadOnlyError", "EmbedderError", "LLMError", "LLMUnavailableError", "ElfCompatError",
        "ExtractionError", "CellFailed"}
    assert set(seeding.__all__) == {"Seed", "check_generator", "check_random_state", "sub_seed"}


def test_episode_round_trips_through_json():
    usage = Usage()
    usage.add("act", 10, 2)
    usage.add("extract", 5, 7, calls=2)
    ep = Episode(
        Task(id="t", goal="g", scene="s", domain="alfworld", split="seen", meta={"k": 1}),
        (Step("a", "o", reward=0.5, done=False, thought="th", valid=False, admissible=("a", "b")),),
        success=False, reward=0.25, max_steps=30, usage=usage,
    )
    back = Episode.from_dict(json.loads(json.dumps(ep.to_dict())))
    assert back == ep


def test_usage_since_counts_only_the_difference():
    u = Usage()
    u.add("act", 3, 1)
    snap = u.snapshot()
    u.add("act", 4, 2)
    u.add("extract", 1, 1)
    d = u.since(snap)
    assert d.to_dict() == {"act": {"calls": 1, "prompt_tokens": 4, "completion_tokens": 2},
                           "extract": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1}}
    assert d.total_tokens == 8
