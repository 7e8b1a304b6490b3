"""Guide rules by name: each domain's declared rule set, and rules registered beside them."""

from __future__ import annotations

from typing import ClassVar

import pytest

from deltamem.agents.guide import (
    Advice,
    Decision,
    Guide,
    list_rules,
    register_rule,
    resolve_rules,
    unregister_rule,
)
from deltamem.agents.guide.rule import Scope
from deltamem.envs.alfworld import ALFWorldEnv
from deltamem.envs.babyai import BabyAIEnv
from deltamem.envs.base import GUIDE_RULES, Environment
from deltamem.envs.household import HouseholdEnv
from deltamem.envs.scienceworld import ScienceWorldEnv
from deltamem.envs.textworld_cleaning import CleaningEnv
from deltamem.envs.textworld_games import TextWorldEnv
from deltamem.envs.webshop import WebShopEnv
from deltamem.errors import ConfigError
from tests.agents.guide.recalls import HEAT_GOAL, HEAT_RECALL, PLACES

ADAPTERS = [ALFWorldEnv, BabyAIEnv, HouseholdEnv, ScienceWorldEnv, CleaningEnv, TextWorldEnv,
            WebShopEnv]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
def test_each_adapter_declares_its_domain_rule_set_and_it_resolves(
        adapter: type[Environment]) -> None:
    # every built-in domain runs the same rules in the same order (the set the guide ran
    # before rule sets were declared), each adapter saying so in its own class
    assert "guide_rules" in vars(adapter)
    assert adapter.guide_rules == GUIDE_RULES
    assert [r.name for r in resolve_rules(adapter.guide_rules)] == list(GUIDE_RULES)
    assert set(GUIDE_RULES) <= set(list_rules())


def test_unknown_and_misordered_rule_sets_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown guide rule 'nope'"):
        resolve_rules(["follow", "nope"])
    with pytest.raises(ConfigError, match="named twice"):
        resolve_rules(["follow", "backtrack", "follow"])
    with pytest.raises(ConfigError, match="must come before"):
        resolve_rules(["follow", "put-away"])
    with pytest.raises(ConfigError, match="sequence of rule names"):
        resolve_rules("follow")
    assert resolve_rules([]) == ()


class LookFirst:
    """A recall rule that always says "look" when it may."""

    name: ClassVar[str] = "look-first"
    scope: ClassVar[Scope] = "recall"

    def advise(self, state: Decision) -> Advice | None:
        return Advice("look", ("look",)) if "look" in state.admissible else None


def test_a_registered_rule_runs_where_a_rule_set_names_it() -> None:
    register_rule(LookFirst)
    try:
        assert "look-first" in list_rules()
        with pytest.raises(ConfigError, match="already registered"):
            register_rule(LookFirst)
        here = [*PLACES, "look"]
        plain = Guide(HEAT_RECALL, HEAT_GOAL).advise(here, [], here)
        assert plain.actions == ("go to sinkbasin 1",)
        first = Guide(HEAT_RECALL, HEAT_GOAL, rules=("look-first", *GUIDE_RULES))
        assert first.advise(here, [], here).actions == ("look",)
        # a recall rule that passes leaves the decision to the rules after it
        assert first.advise(PLACES, [], PLACES).actions == ("go to sinkbasin 1",)
    finally:
        unregister_rule("look-first")
    assert "look-first" not in list_rules()
    with pytest.raises(ConfigError):
        Guide(HEAT_RECALL, HEAT_GOAL, rules=("look-first", *GUIDE_RULES))


def test_a_rule_without_a_name_scope_or_advise_is_not_registered() -> None:
    class Nameless:
        scope = "recall"

        def advise(self, state: Decision) -> None:
            return None

    class Scopeless:
        name = "scopeless"

        def advise(self, state: Decision) -> None:
            return None

    class Mute:
        name = "mute"
        scope = "procedure"

    for bad in (Nameless, Scopeless, Mute):
        with pytest.raises(ConfigError):
            register_rule(bad)  # type: ignore[arg-type]
    assert not {"scopeless", "mute"} & set(list_rules())
