"""The layers of the design as a test: imports point down, never up, and never in a circle.

Every ``import`` / ``from … import`` of ``src/deltamem`` counts, wherever it stands: at the
top of a module, inside a function (a lazy import), or under ``if TYPE_CHECKING:``. Lazy
imports hide a dependency from Python's import machinery, not from a reader, and a
type-only import still says "this module knows that one", so a protocol one layer down is
the way to name a higher type, not a ``TYPE_CHECKING`` import.

The layer map is data, here and nowhere else: nothing in the library needs it at run time
(a module in ``src`` would itself need a layer and would ship a rule only the suite
applies). ``docs/design-notes.md`` and the design's drawing say the same in prose; a new
top-level module or package fails :func:`test_every_module_is_on_a_layer` until it is
placed here.

A module may import from its own layer and from the layers below it. Lowest first:
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "deltamem"

#: the layers, lowest first: ``(layer, top-level parts of the package)``; ``""`` is the
#: package's own ``__init__`` (the public facade, which re-exports from every layer)
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("ground", frozenset({"errors", "paths", "seeding", "telemetry", "text", "types",
                          "version"})),
    # pure: the residual tree, triggers and retrieval maths; the domain presets (data)
    ("core", frozenset({"core", "domains"})),
    # the edges of the system: models, storage, environments, prompt files
    ("edges", frozenset({"embed", "llm", "store", "envs", "templates"})),
    # the extractors, and the outcome judges (an LLM or rules reading a trajectory)
    ("extract", frozenset({"extract", "judge"})),
    # the memory contract (Memory, the episode recorder, the registry in memories/), the
    # memory systems, what copies their banks, the fakes and checks that test them
    ("memory", frozenset({"memory", "recorder", "memories", "portable", "skills", "testing"})),
    # the training of a memory's model (the MCMA copilot, its GGUF export): beside the
    # memories, above them; the memory loads a trained model by an LLM spec, not an import
    ("training", frozenset({"training"})),
    ("agents", frozenset({"agents"})),
    ("bench", frozenset({"bench", "analysis", "demo"})),
    # banks, tenants, keys: what HTTP and MCP share
    ("service", frozenset({"service"})),
    ("frontends", frozenset({"server", "integrations", "viewer", "client"})),
    ("cli", frozenset({"cli", "__main__", ""})),
)

#: upward imports tolerated while a refactor is under way (issue 28 emptied it); an entry
#: that no longer occurs fails the test, so the set only shrinks
KNOWN_VIOLATIONS: frozenset[str] = frozenset()

LAYER_OF: dict[str, int] = {part: i for i, (_, parts) in enumerate(LAYERS) for part in parts}


# -- the import graph -------------------------------------------------------------------------

def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root`` by dotted name (a package by its name)."""
    out = {}
    for f in sorted((root / package).rglob("*.py")):
        rel = f.relative_to(root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = f
    return out


def imports(mods: Mapping[str, Path], package: str) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the package: first line}}``, every import statement
    counted (top level, lazy inside functions, under ``TYPE_CHECKING``)."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(name, path, node, mods):
                while target and target not in mods:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name and target.split(".")[0] == package:
                    edges.setdefault(target, node.lineno)  # type: ignore[attr-defined]
        graph[name] = edges
    return graph


def _targets(name: str, path: Path, node: ast.AST, mods: Mapping[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
        return []
    if node.level:  # relative: from the module's package, ``level`` steps up
        base = name.split(".")
        keep = len(base) - node.level + (1 if path.name == "__init__.py" else 0)
        prefix = ".".join(base[:keep] + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    # ``from pkg import sub`` imports the submodule (and runs pkg/__init__, which is not the
    # dependency the author wrote down)
    return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix for a in node.names]


def part_of(module: str) -> str:
    """The top-level part a module belongs to (``""``: the package's ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: Mapping[str, Mapping[str, int]],
                   layer_of: Mapping[str, int]) -> set[str]:
    """``"a -> b"`` for every import of a module ``b`` on a higher layer than ``a``."""
    out = set()
    for src, targets in graph.items():
        for dst in targets:
            if layer_of[part_of(dst)] > layer_of[part_of(src)]:
                out.add(f"{src} -> {dst}")
    return out


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles: strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


# -- the rules, on deltamem --------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return imports(modules(SRC, PACKAGE), PACKAGE)


def test_every_module_is_on_a_layer(graph):
    unplaced = sorted({part_of(m) for m in graph} - set(LAYER_OF))
    assert not unplaced, f"place these on a layer in tests/test_layers.py: {unplaced}"
    twice = [p for p in LAYER_OF if sum(p in parts for _, parts in LAYERS) > 1]
    assert not twice, f"on two layers: {twice}"


def test_imports_point_down(graph):
    found = upward_imports(graph, LAYER_OF)
    new = sorted(found - KNOWN_VIOLATIONS)
    lines = [f"{e}  (line {graph[e.split(' -> ')[0]][e.split(' -> ')[1]]}; "
             f"{LAYERS[LAYER_OF[part_of(e.split(' -> ')[0])]][0]} imports "
             f"{LAYERS[LAYER_OF[part_of(e.split(' -> ')[1])]][0]})" for e in new]
    assert not new, "imports pointing up the layers:\n  " + "\n  ".join(lines)
    gone = sorted(KNOWN_VIOLATIONS - found)
    assert not gone, f"fixed: remove from KNOWN_VIOLATIONS: {gone}"


def test_no_import_cycles(graph):
    found = cycles(graph)
    assert not found, "import cycles:\n  " + "\n  ".join(", ".join(c) for c in found)


# -- the check itself sees what it must ---------------------------------------------------------

def test_the_check_counts_lazy_and_type_checking_imports(tmp_path: Path):
    pkg = tmp_path / "toy"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from toy.low import base\n")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "base.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from toy.high import X\n"
        "def f():\n    from . import other\n    return other\n")
    (pkg / "low" / "other.py").write_text("def g():\n    import toy.high\n")
    g = imports(modules(tmp_path, "toy"), "toy")
    assert g["toy.low.base"] == {"toy.high": 3, "toy.low.other": 5}
    assert g["toy.low.other"] == {"toy.high": 2}
    layer_of = {"": 0, "low": 0, "high": 1}
    assert upward_imports(g, layer_of) == {"toy.low.base -> toy.high",
                                           "toy.low.other -> toy.high"}
    assert cycles(g) == [["toy.high", "toy.low.base", "toy.low.other"]]
