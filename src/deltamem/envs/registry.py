"""Environments selectable by name (CLI flags, config files), Gymnasium-style.

Each name maps to a lazy ``"module:Class"`` entry point plus default keyword
arguments, so importing deltamem never imports an environment package. What each one
needs (Python packages first, then anything else)::

    scienceworld          ScienceWorldEnv()                scienceworld + Java (a JVM)
    textworld:treasure    TextWorldEnv(game="treasure")    textworld
    textworld:cooking     TextWorldEnv(game="cooking")     textworld
    textworld:coin        TextWorldEnv(game="coin")        textworld
    textworld:cleaning    CleaningEnv()                    textworld
    webshop               WebShopEnv()                     httpx + a WebShop server you run
    household             HouseholdEnv()                   alfworld, textworld + nothing to download
                                                           (the games are generated)
    alfworld              ALFWorldEnv()                    alfworld, textworld + ALFWorld's data
                                                           (alfworld-download)
    babyai                BabyAIEnv()                      minigrid

``pip install 'deltamem[envs]'`` installs scienceworld, textworld, alfworld (whose
``textworld[pddl]`` brings the Fast Downward planner the household engine runs) and httpx;
``deltamem[mcma]`` installs minigrid.

>>> "webshop" in list_envs()
True
>>> make_env("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
deltamem.errors.ConfigError: unknown environment 'nope'; registered: alfworld, babyai, ...
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from deltamem.envs.base import Environment
from deltamem.errors import ConfigError

__all__ = ["EnvSpec", "list_envs", "make_env", "register", "unregister"]


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment: where its class lives and its default arguments."""

    name: str
    entry_point: str
    defaults: dict[str, Any] = field(default_factory=dict)

    def load(self) -> type:
        """Import and return the class (raises :class:`ConfigError` when it cannot)."""
        module_name, _, attr = self.entry_point.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ConfigError(
                f"environment {self.name!r}: cannot import {module_name!r} ({e})"
            ) from e
        try:
            return getattr(module, attr)
        except AttributeError:
            raise ConfigError(
                f"environment {self.name!r}: {module_name!r} has no {attr!r}"
            ) from None


_REGISTRY: dict[str, EnvSpec] = {}


def register(name: str, entry_point: str, **defaults: Any) -> None:
    """Register ``name`` -> ``entry_point`` (``"package.module:Class"``) with default kwargs.

    Raises:
        ConfigError: empty name, malformed entry point, or ``name`` already registered.
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"environment name must be a non-empty stripped str, got {name!r}")
    module_name, sep, attr = entry_point.partition(":")
    if not sep or not module_name or not attr.isidentifier():
        raise ConfigError(f"entry point must look like 'package.module:Class', got {entry_point!r}")
    if name in _REGISTRY:
        raise ConfigError(f"environment {name!r} is already registered "
                          f"({_REGISTRY[name].entry_point})")
    _REGISTRY[name] = EnvSpec(name, entry_point, dict(defaults))


def unregister(name: str) -> None:
    """Remove ``name`` (:class:`ConfigError` when it is not registered)."""
    if _REGISTRY.pop(name, None) is None:
        raise ConfigError(f"environment {name!r} is not registered")


def list_envs() -> list[str]:
    """The registered names, sorted."""
    return sorted(_REGISTRY)


def make_env(spec: str, **kwargs: Any) -> Environment:
    """Build the environment registered as ``spec``; ``kwargs`` override its defaults.

    Raises:
        ConfigError: unknown name (the message lists the registered ones), an entry
            point that cannot be imported, a keyword the class does not take, or a
            class that is not an :class:`Environment`.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"environment spec must be a str, got {type(spec).__name__}")
    try:
        entry = _REGISTRY[spec.strip()]
    except KeyError:
        raise ConfigError(
            f"unknown environment {spec!r}; registered: {', '.join(list_envs())}"
        ) from None
    cls = entry.load()
    try:
        env = cls(**{**entry.defaults, **kwargs})
    except TypeError as e:
        raise ConfigError(f"bad options for environment {entry.name!r}: {e}") from e
    if not isinstance(env, Environment):
        raise ConfigError(f"environment {entry.name!r}: {entry.entry_point} did not build an "
                          f"Environment (got {type(env).__name__})")
    return env


register("scienceworld", "deltamem.envs.scienceworld:ScienceWorldEnv")
register("textworld:treasure", "deltamem.envs.textworld_games:TextWorldEnv", game="treasure")
register("textworld:cooking", "deltamem.envs.textworld_games:TextWorldEnv", game="cooking")
register("textworld:coin", "deltamem.envs.textworld_games:TextWorldEnv", game="coin")
register("textworld:cleaning", "deltamem.envs.textworld_cleaning:CleaningEnv")
register("webshop", "deltamem.envs.webshop:WebShopEnv")
register("household", "deltamem.envs.household.env:HouseholdEnv")
register("alfworld", "deltamem.envs.alfworld:ALFWorldEnv")
register("babyai", "deltamem.envs.babyai:BabyAIEnv")
