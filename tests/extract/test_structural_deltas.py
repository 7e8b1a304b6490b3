"""Residual skills that replace the chain's steps (``skill_deltas``, core.residual)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem import domains
from deltamem.core.payload import ChainEntry, Payload
from deltamem.errors import ConfigError
from deltamem.extract import StructuralExtractor
from deltamem.extract.structural import chain_steps
from deltamem.testing import make_episode

SW = "scienceworld"


def _episode(verb: str, substance: str, actions: list[str]):
    goal = (f"Your task is to {verb} {substance}. First, focus on the substance. Then, take "
            "actions that will cause it to change its state of matter.")
    return make_episode(goal, actions=[(a, f"You did: {a}.") for a in actions], domain=SW,
                        scene="This room is called the kitchen.")


MELT = _episode("melt", "ice", ["look around", "focus on ice", "move ice to metal pot",
                                "move metal pot to stove", "activate stove", "wait",
                                "examine ice"])
FREEZE = _episode("freeze", "water", ["look around", "focus on water",
                                      "move water to metal pot", "move metal pot to freezer",
                                      "wait", "examine water"])
MELT_MORE = _episode("melt", "lead", ["look around", "focus on lead", "move lead to metal pot",
                                      "move metal pot to stove", "activate stove", "wait",
                                      "use thermometer on lead", "examine lead"])


def _steps(payload: Payload) -> list[str]:
    return chain_steps([ChainEntry("ROOT", "SUCCESS", payload)])


def _chain(x: StructuralExtractor, *episodes):
    root = x.extract("task_root_success", episodes[0], [], SW)
    chain = [ChainEntry("ROOT", "SUCCESS", root)]
    for ep in episodes[1:]:
        delta = x.extract("task_residual_success", ep, chain, SW)
        assert delta is not None
        chain.append(ChainEntry("RESIDUAL", "SUCCESS", delta))
    return chain


def test_an_episode_that_left_out_a_chain_step_replaces_the_chain_from_there():
    x = StructuralExtractor(skill_deltas="replace")
    chain = _chain(x, MELT, FREEZE)
    delta = chain[1].payload.procedure
    assert delta.startswith('Replaces the base from step 4 ("move metal pot to stove") on:')
    assert "activate stove" not in delta
    # the chain composes to the freeze episode's own procedure, not melt's with additions
    assert chain_steps(chain) == _steps(x.extract("task_root_success", FREEZE, [], SW))


def test_additions_keep_the_chains_steps_before_the_episodes():
    chain = _chain(StructuralExtractor(skill_deltas="additions"), MELT, FREEZE)
    assert chain[1].payload.procedure.startswith("Extra steps not in the base:")
    assert "activate stove" in chain_steps(chain)  # what a freeze must not do


def test_an_episode_that_extends_the_chain_writes_additions_either_way():
    longer = _episode("melt", "lead", [*(s.action.replace("ice", "lead") for s in MELT.steps),
                                       "use thermometer on lead"])
    a = _chain(StructuralExtractor(skill_deltas="additions"), MELT, longer)
    r = _chain(StructuralExtractor(skill_deltas="replace"), MELT, longer)
    assert a[1].payload == r[1].payload
    assert a[1].payload.procedure.startswith("Extra steps not in the base:")
    same = StructuralExtractor(skill_deltas="replace").extract(
        "task_residual_success", MELT, a[:1], SW)
    assert same is None  # the chain covers the episode: skip


def test_a_step_inserted_before_the_chains_last_steps_is_written_in_place():
    x = StructuralExtractor(skill_deltas="replace")
    chain = _chain(x, MELT, MELT_MORE)
    assert chain[1].payload.procedure.startswith('Replaces the base from step 7 ("examine {A}")')
    assert chain_steps(chain) == _steps(x.extract("task_root_success", MELT_MORE, [], SW))
    # additions append it after the chain's last step instead
    added = _chain(StructuralExtractor(skill_deltas="additions"), MELT, MELT_MORE)
    assert chain_steps(added)[-1] == "use thermometer on {A}"


def test_replacements_compose_through_a_deeper_chain():
    x = StructuralExtractor(skill_deltas="replace")
    freeze_more = _episode("freeze", "milk", ["look around", "focus on milk",
                                              "move milk to metal pot",
                                              "move metal pot to freezer", "wait",
                                              "use thermometer on milk", "examine milk"])
    chain = _chain(x, MELT, FREEZE, freeze_more)
    assert chain_steps(chain) == _steps(x.extract("task_root_success", freeze_more, [], SW))


def test_consolidating_a_replaced_chain_keeps_the_composed_steps():
    x = StructuralExtractor(skill_deltas="replace")
    chain = _chain(x, MELT, FREEZE)
    merged = x.consolidate("task", chain, SW)
    assert "activate stove" not in merged.procedure
    assert "Replaces the base" not in merged.procedure
    assert _steps(merged) == chain_steps(chain)


def test_skill_deltas_default_to_the_domains_setting(monkeypatch):
    monkeypatch.setitem(domains.DOMAINS, SW, replace(domains.DOMAINS[SW],
                                                     skill_deltas="replace"))
    chain = _chain(StructuralExtractor(), MELT, FREEZE)
    assert chain[1].payload.procedure.startswith("Replaces the base")
    chain = _chain(StructuralExtractor(skill_deltas="additions"), MELT, FREEZE)
    assert chain[1].payload.procedure.startswith("Extra steps")  # its own setting wins


_ACTIONS = st.lists(st.sampled_from(
    ["look around", "focus on ice", "move ice to metal pot", "move metal pot to stove",
     "activate stove", "wait", "examine ice", "open freezer", "pick up thermometer"]),
    min_size=1, max_size=9)


@settings(max_examples=60, deadline=None)
@given(_ACTIONS, _ACTIONS, _ACTIONS)
def test_with_replace_every_success_chain_composes_to_its_own_episode(a, b, c):
    x = StructuralExtractor(skill_deltas="replace")
    chain: list[ChainEntry] = []
    for actions in (a, b, c):
        ep = _episode("melt", "ice", actions)
        own = _steps(x.extract("task_root_success", ep, [], SW))
        if not chain:
            chain.append(ChainEntry("ROOT", "SUCCESS", x.extract("task_root_success", ep, [],
                                                                 SW)))
        else:
            delta = x.extract("task_residual_success", ep, chain, SW)
            if delta is None:
                assert chain_steps(chain) == own  # skipped: the chain is this procedure
                continue
            chain.append(ChainEntry("RESIDUAL", "SUCCESS", delta))
        assert chain_steps(chain) == own


def test_unknown_skill_deltas_are_refused():
    with pytest.raises(ConfigError, match="skill_deltas"):
        StructuralExtractor(skill_deltas="rewrite")
