"""One error tree: every public exception is defined in :mod:`deltamem.errors`, derives from
its root, and stands where the module's docstring draws it."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from deltamem import errors

SRC = Path(__file__).resolve().parents[1] / "src" / "deltamem"


def _drawn_tree() -> dict[str, str]:
    """``{class: parent}`` read from the tree in the docstring (the root's parent is "")."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    block = errors.__doc__.split("::", 1)[1].lstrip("\n")
    for line in block.splitlines():
        if not line.startswith("    "):  # the drawing ends where the indented block does
            break
        m = re.match(r"^\s*(?:[│ ]   )*(?:[├└]── )?([A-Z]\w+)\b", line)
        if not m:
            continue
        depth = line.index(m.group(1)) // 4  # the drawing indents each level by 4
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[m.group(1)] = stack[-1][1] if stack else ""
        stack.append((depth, m.group(1)))
    return parents


def _public_exceptions() -> dict[str, type]:
    return {name: obj for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, BaseException)
            and not name.startswith("_")}


def test_the_docstring_draws_every_class_where_it_stands():
    drawn = _drawn_tree()
    classes = _public_exceptions()
    assert set(drawn) == set(classes)
    for name, cls in classes.items():
        parent = drawn[name]
        if not parent:
            assert cls is errors.DeltaMemError
        else:
            assert cls.__bases__[0] is classes[parent], (name, parent, cls.__bases__)


def test_every_error_derives_from_the_root():
    for name, cls in _public_exceptions().items():
        assert issubclass(cls, errors.DeltaMemError), name


def test_no_public_exception_is_defined_outside_errors():
    """A class in ``src`` whose bases name an exception is private unless it is in errors.py
    (private control flow is listed in errors.py's docstring)."""
    names = set(_public_exceptions()) | {"Exception", "BaseException", "ValueError",
                                         "RuntimeError", "TypeError", "KeyError", "OSError"}
    outside, private = [], set()
    for path in SRC.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in node.bases}
            if bases & names or any(b.endswith(("Error", "Exception")) for b in bases):
                if node.name.startswith("_"):
                    private.add(node.name)
                else:
                    outside.append(f"{path.relative_to(SRC)}: {node.name}")
    assert outside == [], "define public exceptions in deltamem/errors.py"
    for name in private:
        assert name in errors.__doc__, f"{name}: say in errors.py's docstring where it lives"


@pytest.mark.parametrize(("module", "name"), [
    ("deltamem.llm.elf_compat", "ElfCompatError"),
    ("deltamem.service.banks", "BankNotFound"),
    ("deltamem.service.tenants", "BankNotEmpty"),
    ("deltamem.service.tenants", "ReadOnlyError"),
    ("deltamem.service", "BankNotFound"),
    ("deltamem.service", "BankNotEmpty"),
    ("deltamem.service", "ReadOnlyError"),
    ("deltamem.bench.cells", "CellFailed"),
])
def test_the_old_import_paths_still_work(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_the_old_import_path_of_the_mcp_tools_error_still_works():
    pytest.importorskip("mcp")
    from deltamem.integrations.mcp.tools import ToolInputError

    assert ToolInputError is errors.ToolInputError


def test_the_moved_classes_keep_their_bases():
    assert issubclass(errors.ElfCompatError, ValueError)  # load_library catches it as one
    assert issubclass(errors.BankNotFound, errors.StoreError)
    assert issubclass(errors.BankNotEmpty, errors.StoreError)
    assert issubclass(errors.ToolInputError, errors.InvalidInputError)
    failed = errors.CellFailed([(type("C", (), {"name": "a"})(), ValueError("x"))], total=3)
    assert str(failed) == ("1 of 3 cells failed (a); finished cells are kept, run again to "
                           "resume; a: x")


@pytest.mark.parametrize(("option", "want"), [
    ({"tau_task": "high"}, "option tau_task: expected a valid number or 'auto', got 'high'"),
    ({"d_max": "abc"}, "option d_max: expected a valid integer, got 'abc'"),
    ({"k_cons": -1}, "option k_cons: expected a value greater than or equal to 1, got -1"),
    ({"nosuch": 1}, "option nosuch: no such option"),
])
def test_a_bad_memory_option_is_one_line_naming_it_and_the_expected_type(option, want):
    """Issue 51: not pydantic's raw text with its URL (once per member of a union)."""
    from deltamem.memories.deltamem.config import make_config

    with pytest.raises(errors.ConfigError) as e:
        make_config(None, **option)
    msg = str(e.value)
    assert msg == f"invalid DeltaMem configuration: {want}"
    assert "\n" not in msg and "http" not in msg


def test_a_bad_option_of_a_flat_memory_is_one_line_too():
    from deltamem.embed import HashingEmbedder
    from deltamem.memories import make_memory

    with pytest.raises(errors.ConfigError) as e:
        make_memory("synapse", embedder=HashingEmbedder(dim=16), options={"k": "high"})
    assert str(e.value) == "invalid synapse configuration: option k: expected a valid " \
        "integer, got 'high'"
