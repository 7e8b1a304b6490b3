"""The Store protocol is the whole contract: every store method DeltaMem calls is in it, and
DeltaMem is typed against it, not against a backend."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import deltamem.memories.deltamem as dm
from deltamem.store.base import Store

#: DeltaMem's modules (a package: one concern a module) and the applier of its plans
SRC = [*sorted(Path(dm.__file__).parent.glob("*.py")),
       Path(dm.__file__).parents[1] / "plan.py", Path(dm.__file__).parents[1] / "banked.py"]


def _parsed() -> list[ast.AST]:
    return [ast.parse(f.read_text(encoding="utf-8")) for f in SRC]


def _store_attributes(tree: ast.AST) -> set[str]:
    """Names read off ``self.store`` / ``store`` in a module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            if (isinstance(base, ast.Attribute) and base.attr == "store") or (
                isinstance(base, ast.Name) and base.id == "store"
            ):
                names.add(node.attr)
    return names


def test_every_store_method_deltamem_calls_is_in_the_protocol():
    used = set().union(*(_store_attributes(tree) for tree in _parsed()))
    members = {n for n in dir(Store) if not n.startswith("_")} | set(
        typing.get_type_hints(Store))
    assert used, "the scan found no store call: it no longer reads the module right"
    assert used <= members, f"not in the Store protocol: {sorted(used - members)}"


def test_deltamem_is_typed_against_the_protocol():
    hints = typing.get_type_hints(dm.DeltaMem.__init__)
    assert hints["store"] is Store
    imported = {n.module for tree in _parsed() for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom)}
    assert not imported & {"deltamem.store.sqlite", "deltamem.store.postgres"}
