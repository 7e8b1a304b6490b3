"""Guide rules by name, and rule sets resolved from names.

An environment adapter declares its domain's rule set as data, by rule names
(:attr:`deltamem.envs.base.Environment.guide_rules`): the environment layer sits below the
agents and cannot import a rule, so the names are resolved here, when a
:class:`~deltamem.agents.guide.Guide` is made. A new rule is a class satisfying
:class:`~deltamem.agents.guide.Rule`, registered with :func:`register_rule` and named in an
adapter's ``guide_rules`` (or in the ``rules`` given to a guide).

>>> "open-closed" in list_rules()
True
>>> resolve_rules(["follow", "nope"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
deltamem.errors.ConfigError: unknown guide rule 'nope'; registered: backtrack, follow, ...
"""

from __future__ import annotations

from collections.abc import Sequence

from deltamem.agents.guide.rule import SCOPES, Rule
from deltamem.agents.guide.rules.backtrack import Backtrack
from deltamem.agents.guide.rules.follow import Follow
from deltamem.agents.guide.rules.heed_warnings import HeedWarnings
from deltamem.agents.guide.rules.look_ahead import LookAhead
from deltamem.agents.guide.rules.open_closed import OpenClosed
from deltamem.agents.guide.rules.put_away import PutAway
from deltamem.agents.guide.rules.return_to_place import ReturnToPlace
from deltamem.agents.guide.rules.search_unvisited import SearchUnvisited
from deltamem.errors import ConfigError

__all__ = ["list_rules", "register_rule", "resolve_rules", "unregister_rule"]

_BUILT_IN: tuple[type[Rule], ...] = (PutAway, Follow, LookAhead, ReturnToPlace, OpenClosed,
                                     Backtrack, SearchUnvisited, HeedWarnings)
_REGISTRY: dict[str, type[Rule]] = {rule.name: rule for rule in _BUILT_IN}


def list_rules() -> list[str]:
    """The registered rule names, sorted."""
    return sorted(_REGISTRY)


def register_rule(rule: type[Rule]) -> type[Rule]:
    """Register ``rule`` under its :attr:`~deltamem.agents.guide.Rule.name` (usable as a
    class decorator); returns it.

    Raises:
        ConfigError: a name that is not a non-empty stripped str, a scope other than
            ``recall``, ``procedure`` or ``review``, no ``advise`` method, or a name
            already registered.
    """
    name = getattr(rule, "name", None)
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"a guide rule's name must be a non-empty stripped str, got {name!r}")
    if getattr(rule, "scope", None) not in SCOPES:
        raise ConfigError(f"guide rule {name!r}: scope must be one of {', '.join(SCOPES)}, "
                          f"got {getattr(rule, 'scope', None)!r}")
    if not callable(getattr(rule, "advise", None)):
        raise ConfigError(f"guide rule {name!r} has no advise method")
    if name in _REGISTRY:
        raise ConfigError(f"guide rule {name!r} is already registered ({_REGISTRY[name]!r})")
    _REGISTRY[name] = rule
    return rule


def unregister_rule(name: str) -> None:
    """Remove a registered rule (a no-op when ``name`` is not registered)."""
    _REGISTRY.pop(name, None)


def resolve_rules(names: Sequence[str]) -> tuple[type[Rule], ...]:
    """The rule classes a rule set names, in its order.

    Raises:
        ConfigError: ``names`` is a bare string, names a rule twice or one not registered,
            or lists the scopes out of order (``recall`` rules, then ``procedure`` rules,
            then ``review`` rules: the order written must be the order asked).
    """
    if isinstance(names, str):
        raise ConfigError(f"a guide rule set is a sequence of rule names, got {names!r}")
    out: list[type[Rule]] = []
    for name in names:
        if name not in _REGISTRY:
            raise ConfigError(f"unknown guide rule {name!r}; registered: "
                              f"{', '.join(list_rules())}")
        if _REGISTRY[name] in out:
            raise ConfigError(f"guide rule {name!r} is named twice in {list(names)!r}")
        out.append(_REGISTRY[name])
    scopes = [rule.scope for rule in out]
    if scopes != sorted(scopes, key=SCOPES.index):
        raise ConfigError(f"guide rules {list(names)!r}: the recall rules "
                          f"({', '.join(r.name for r in out if r.scope == 'recall')}) "
                          "must come before the procedure rules, and the review rules "
                          f"({', '.join(r.name for r in out if r.scope == 'review')}) "
                          "after them")
    return tuple(out)
