"""Environment registry: names, lazy entry points, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deltamem.envs.base import Environment, Transition
from deltamem.envs.registry import list_envs, make_env, register, unregister
from deltamem.envs.scienceworld import ScienceWorldEnv
from deltamem.envs.textworld_games import TextWorldEnv
from deltamem.envs.webshop import WebShopEnv
from deltamem.errors import ConfigError
from deltamem.types import Task

BUILT_IN = ["alfworld", "household", "scienceworld", "textworld:coin", "textworld:cooking",
            "textworld:treasure", "webshop"]


class _Toy(Environment):
    name = "toy"

    def __init__(self, size: int = 1, label: str = "x") -> None:
        self.size, self.label = size, label

    def task_ids(self, split, seed=0):
        return [f"{self.label}{i}" for i in range(self.size)]

    def reset(self, task_id):
        return Task(id=task_id, goal="g")

    def admissible_actions(self):
        return []

    def step(self, action):
        return Transition(action, 0.0, True, False)


class _NotAnEnv:
    pass


@pytest.fixture
def scratch():
    names: list[str] = []

    def reg(name, entry_point, **defaults):
        register(name, entry_point, **defaults)
        names.append(name)

    yield reg
    for n in names:
        unregister(n)


def test_built_in_names_are_registered():
    assert all(name in list_envs() for name in BUILT_IN)
    assert list_envs() == sorted(list_envs())


def test_importing_the_registry_imports_no_environment_package():
    code = ("import sys, deltamem.envs.registry as r; r.list_envs(); "
            "bad = [m for m in ('scienceworld', 'textworld', 'alfworld', "
            "'deltamem.envs.scienceworld', 'deltamem.envs.webshop') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_specs_build_the_right_adapters_without_starting_engines():
    sw = make_env("scienceworld", jvm_max_heap="256m")
    assert isinstance(sw, ScienceWorldEnv) and sw.jvm_max_heap == "256m"
    assert sw.jvm_pid is None
    for game in ("treasure", "cooking", "coin"):
        tw = make_env(f"textworld:{game}", difficulty=2)
        assert isinstance(tw, TextWorldEnv) and tw.game == game and tw.difficulty == 2
        assert tw.name == f"textworld:{game}"
    ws = make_env(" webshop ", base_url="http://shop.test")
    assert isinstance(ws, WebShopEnv) and ws.base_url == "http://shop.test"


def test_unknown_name_lists_the_registered_ones():
    with pytest.raises(ConfigError) as info:
        make_env("textworld:maze")
    message = str(info.value)
    assert "textworld:maze" in message
    assert all(name in message for name in BUILT_IN)


def test_defaults_and_overrides(scratch):
    scratch("toy-test", f"{__name__}:_Toy", size=3)
    env = make_env("toy-test")
    assert env.task_ids("any") == ["x0", "x1", "x2"]
    assert make_env("toy-test", size=1, label="y").task_ids("any") == ["y0"]
    with pytest.raises(ConfigError, match="bad options"):
        make_env("toy-test", colour="red")


def test_registration_errors(scratch):
    scratch("toy-dup", f"{__name__}:_Toy")
    with pytest.raises(ConfigError, match="already registered"):
        register("toy-dup", f"{__name__}:_Toy")
    for bad in ("no-colon", "mod:", ":Cls", "mod:not an id"):
        with pytest.raises(ConfigError, match="entry point"):
            register("toy-bad", bad)
    with pytest.raises(ConfigError, match="name"):
        register("", f"{__name__}:_Toy")
    with pytest.raises(ConfigError, match="not registered"):
        unregister("toy-never")


def test_broken_entry_points_raise_config_errors(scratch):
    scratch("toy-missing-module", "deltamem.envs.no_such_module:Env")
    scratch("toy-missing-class", f"{__name__}:NoSuchClass")
    scratch("toy-not-env", f"{__name__}:_NotAnEnv")
    with pytest.raises(ConfigError, match="cannot import"):
        make_env("toy-missing-module")
    with pytest.raises(ConfigError, match="has no"):
        make_env("toy-missing-class")
    with pytest.raises(ConfigError, match="did not build an Environment"):
        make_env("toy-not-env")
    with pytest.raises(ConfigError, match="must be a str"):
        make_env(3)  # type: ignore[arg-type]


# -- what the module doc says each environment needs ---------------------------------------------

_SRC = Path(__file__).resolve().parents[2] / "src"


def _doc_rows() -> dict[str, str]:
    """``{name: the packages it needs}`` from the table in the registry's docstring (the
    names before `` + ``; ``no package``: none)."""
    from deltamem.envs import registry

    rows = {}
    for line in (registry.__doc__ or "").splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and line.startswith("    ") and parts[0] in list_envs():
            rows[parts[0]] = parts[2].split(" + ")[0].strip()
    return rows


def _imported_distributions(entry_point: str) -> set[str]:
    """The distributions whose modules the entry point's module imports, following the
    ``deltamem.envs`` modules it imports (every import counts, lazy ones too)."""
    import ast
    from importlib.metadata import packages_distributions

    dists = packages_distributions()
    seen, todo, out = set(), [entry_point.partition(":")[0]], set()
    while todo:
        module = todo.pop()
        path = _SRC / (module.replace(".", "/") + ".py")
        if module in seen or not path.exists():
            continue
        seen.add(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                if name.startswith("deltamem.envs"):
                    todo.append(name)
                elif top != "deltamem" and top not in sys.stdlib_module_names | {"__future__"}:
                    out.update(d.lower().replace("_", "-")
                               for d in dists.get(top, [top.replace("_", "-")]))
    return out


def _brought_by(dists: set[str]) -> set[str]:
    """``dists`` and everything they require (extras followed), as installed."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(d, frozenset[str]()) for d in dists]
    while todo:
        dist, extras = todo.pop()
        if (dist, extras) in seen:
            continue
        seen.add((dist, extras))
        try:
            reqs = requires(dist) or []
        except PackageNotFoundError:
            pytest.skip(f"{dist} is not installed")
        for text in reqs:
            req = Requirement(text)
            wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(w) for w in wanted):
                todo.append((req.name.lower().replace("_", "-"), frozenset(req.extras)))
    return {d for d, _ in seen}


def test_the_module_doc_lists_every_environment():
    assert set(_doc_rows()) == set(list_envs())


@pytest.mark.parametrize("name", sorted(_doc_rows()))
def test_the_module_doc_says_what_each_environment_needs(name):
    """The packages a row names are imported by the environment, and they (with what
    deltamem itself installs) bring every package it imports."""
    from deltamem.envs.registry import _REGISTRY

    said = _doc_rows()[name]
    named = set() if said == "no package" else {p.strip() for p in said.split(",")}
    imported = _imported_distributions(_REGISTRY[name].entry_point)
    assert named <= imported, f"{name}: the doc names {named - imported}, never imported"
    missing = imported - _brought_by(named | {"deltamem"})
    assert not missing, f"{name}: imports {missing}, which the doc does not name"
