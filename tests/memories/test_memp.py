"""MemP: build, retrieve, validate by outcome, deprecate low-utility procedures, correct by
reflection (llm mode)."""

from __future__ import annotations

from deltamem.llm import ScriptedLLM
from deltamem.memories.memp import MemP
from deltamem.testing import make_episode

from .baseline_helpers import HEAT_STEPS, WORKFLOW, H

LOST = {"success": False, "actions": HEAT_STEPS[:1]}


def test_validation_adds_won_episodes_only_and_vanilla_adds_all():
    mem = MemP.open(embedder=H, domain="alfworld")
    assert [c.kind for c in mem.learn(make_episode(episode_id="e0", **LOST))] == ["skipped"]
    vanilla = MemP.open(embedder=H, domain="alfworld", update="vanilla")
    assert [c.kind for c in vanilla.learn(make_episode(episode_id="e0", **LOST))] == ["written"]


def test_build_forms():
    for build, head in (("script", "Task kind: "), ("trajectory", "Task: "),
                        ("proceduralization", "Task kind: ")):
        mem = MemP.open(embedder=H, domain="alfworld", build=build)
        mem.learn(make_episode(episode_id="e0"))
        text = mem.recall(make_episode().task).items[0].text
        assert text.startswith(head)
        assert ("Trajectory it came from:" in text) == (build == "proceduralization")


def test_uses_are_counted_and_a_low_rate_deprecates():
    mem = MemP.open(embedder=H, domain="alfworld", min_uses=3, deprecate_below=0.5)
    mem.learn(make_episode(episode_id="e0"))
    outcomes = [True, False, False]  # 1/3 after three uses
    for n, won in enumerate(outcomes):
        r = mem.recall(make_episode().task)
        assert r.items, f"recalled before use {n + 1}"
        ep = make_episode(episode_id=f"u{n}") if won else make_episode(episode_id=f"u{n}",
                                                                        **LOST)
        kinds = [c.kind for c in mem.learn(ep, r)]
        assert kinds[0] == ("hit" if won else "failed")
    assert "superseded" in kinds
    stats = mem.stats()
    # the won use added its own procedure (validation); the first one is deprecated
    assert (stats["procedures"], stats["deprecated"], stats["uses"]) == (1, 1, 3)


def test_reflection_corrects_the_used_procedure_after_a_loss():
    fixed = {"title": "Clean then place", "steps": ["take {object}", "clean {object}"]}
    llm = ScriptedLLM([WORKFLOW, fixed])
    mem = MemP.open(embedder=H, domain="alfworld", mode="llm", llm=llm, update="reflection",
                    deprecate_below=None)
    mem.learn(make_episode(episode_id="e0"))
    r = mem.recall(make_episode().task)
    changes = mem.learn(make_episode(episode_id="e1", **LOST), r)
    assert [c.kind for c in changes] == ["failed", "superseded"]
    assert "CORRECTING" in llm.calls[1][1][1]["content"]
    assert "1. take {object}" in mem.recall(make_episode().task).items[0].text
    assert mem.stats()["procedures"] == 1
