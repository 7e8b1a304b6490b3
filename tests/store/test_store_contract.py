"""The Store protocol is the whole contract: every store method DeltaMem calls is in it, and
DeltaMem is typed against it, not against a backend."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import deltamem.memories.deltamem as dm
from deltamem.store.base import Store

SRC = Path(dm.__file__)


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
    used = _store_attributes(ast.parse(SRC.read_text(encoding="utf-8")))
    members = {n for n in dir(Store) if not n.startswith("_")} | set(
        typing.get_type_hints(Store))
    assert used, "the scan found no store call: it no longer reads the module right"
    assert used <= members, f"not in the Store protocol: {sorted(used - members)}"


def test_deltamem_is_typed_against_the_protocol():
    hints = typing.get_type_hints(dm.DeltaMem.__init__)
    assert hints["store"] is Store
    imported = {n.module for n in ast.walk(ast.parse(SRC.read_text(encoding="utf-8")))
                if isinstance(n, ast.ImportFrom)}
    assert not imported & {"deltamem.store.sqlite", "deltamem.store.postgres"}
