"""The llama-cpp-py-sync binding layer: load-time checks, schema rewriting, ELF re-linking."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from deltamem.errors import ConfigError, LLMUnavailableError
from deltamem.llm import elf_compat, llama_prebuilt


def test_missing_functions_lists_exactly_the_absent_names() -> None:
    lib = SimpleNamespace(llama_decode=lambda: 0, llama_tokenize=lambda: 0)
    assert llama_prebuilt.missing_functions(lib, ["llama_decode", "llama_x", "llama_tokenize",
                                              "llama_y"]) == ["llama_x", "llama_y"]


def test_library_without_a_used_function_names_the_package_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bindings = pytest.importorskip("llama_cpp_py_sync._cffi_bindings")
    monkeypatch.setattr(llama_prebuilt, "_glibc_version", lambda: (2, 40))
    monkeypatch.setattr(bindings, "get_lib", lambda: SimpleNamespace(llama_decode=None))
    monkeypatch.setattr(llama_prebuilt, "installed_version", lambda: "0.99999")
    with pytest.raises(LLMUnavailableError) as err:
        llama_prebuilt.load_library()
    msg = str(err.value)
    assert "llama-cpp-py-sync 0.99999" in msg and "llama_tokenize" in msg
    assert f"=={llama_prebuilt.PINNED_VERSION}" in msg and "llama_decode," not in msg


def test_pinned_version_is_the_one_the_local_extra_installs() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'"llama-cpp-py-sync=={llama_prebuilt.PINNED_VERSION}"' in pyproject


def test_grammar_schema_turns_small_integer_ranges_into_enums_and_drops_other_bounds() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 1, "maximum": 4},
        "b": {"type": "integer", "minimum": 1},
        "c": {"type": "array", "items": {"type": "number", "maximum": 2.5}, "maxItems": 2},
        "d": {"type": "string", "pattern": "^x", "maxLength": 5},
        "e": {"enum": [{"minimum": 1}]},
    }}
    out = llama_prebuilt._grammar_schema(schema)
    assert out["properties"]["a"] == {"enum": [1, 2, 3, 4]}
    assert out["properties"]["b"] == {"type": "integer"}
    assert out["properties"]["c"] == {"type": "array", "items": {"type": "number"}, "maxItems": 2}
    assert out["properties"]["d"] == {"type": "string", "maxLength": 5}
    assert out["properties"]["e"] == {"enum": [{"minimum": 1}]}  # enum values are data
    assert schema["properties"]["a"]["minimum"] == 1  # input untouched


def test_json_schema_grammar_compiles_and_rejects_refs() -> None:
    pytest.importorskip("llama_cpp_py_sync")
    g = llama_prebuilt.json_schema_grammar({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 3}}, "required": ["n"]})
    assert "root ::=" in g and '"1" | "2" | "3"' in g
    with pytest.raises(ConfigError, match="grammar"):
        llama_prebuilt.json_schema_grammar({"$ref": "#/definitions/x"})


def test_json_schema_grammar_keeps_the_schema_property_order() -> None:
    """The grammar fixes the order of required keys; it must be the schema's own (a model
    trained on answers in that order), not the alphabetical order of a cache key."""
    pytest.importorskip("llama_cpp_py_sync")
    def schema(props: list[str]) -> dict:
        return {"type": "object", "properties": {k: {"type": "string"} for k in props},
                "required": props}

    zyx = llama_prebuilt.json_schema_grammar(schema(["zeta", "alpha"]))
    axz = llama_prebuilt.json_schema_grammar(schema(["alpha", "zeta"]))
    assert zyx.index('zeta') < zyx.index('alpha')
    assert axz.index('alpha') < axz.index('zeta')


def _recursive_schema() -> dict:
    """A pydantic-style schema: a node holds a list of nodes or a leaf, through ``$defs``."""
    return {
        "$defs": {
            "Leaf": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"], "additionalProperties": False},
            "Node": {"type": "object", "additionalProperties": False, "required": ["name"],
                     "properties": {
                         "name": {"type": "string"},
                         "children": {"type": "array", "items": {"anyOf": [
                             {"$ref": "#/$defs/Node"}, {"$ref": "#/$defs/Leaf"}]}},
                         "extra": {"anyOf": [{"$ref": "#/$defs/Wrap"}, {"type": "null"}]}}},
            "Wrap": {"type": "object", "additionalProperties": False, "required": ["node"],
                     "properties": {"node": {"$ref": "#/$defs/Node"}}},
        },
        "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"], "additionalProperties": False,
    }


def test_inline_refs_bounds_recursion_and_admits_only_valid_values() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = _recursive_schema()
    flat = llama_prebuilt.inline_refs(schema, max_depth=2)
    assert "$ref" not in repr(flat) and "$defs" not in flat
    two_levels = {"root": {"name": "a", "children": [{"name": "b", "children": [
        {"text": "x"}]}]}}
    three_levels = {"root": {"name": "a", "children": [{"name": "b", "children": [
        {"name": "c"}]}]}}
    through_wrap = {"root": {"name": "a", "extra": {"node": {"name": "b"}}}}
    for value in (two_levels, three_levels, through_wrap):
        jsonschema.validate(value, schema)  # all valid against the original
    jsonschema.validate(two_levels, flat)  # two recursive definitions deep: admitted
    for cut in (three_levels, through_wrap):  # three (Node, Wrap, Node): not admitted
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(cut, flat)


def test_inline_refs_refuses_remote_refs_and_required_cuts() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        llama_prebuilt.inline_refs({"$ref": "https://example.org/s.json"})
    loop = {"$defs": {"A": {"type": "object", "required": ["a"],
                            "properties": {"a": {"$ref": "#/$defs/B"}}},
                      "B": {"type": "object", "required": ["b"],
                            "properties": {"b": {"$ref": "#/$defs/A"}}}},
            "$ref": "#/$defs/A"}
    assert llama_prebuilt.inline_refs(loop) is None  # no finite value exists


def test_recursive_pydantic_schema_compiles_once() -> None:
    pytest.importorskip("llama_cpp_py_sync")
    from deltamem.memories.mcma.structures import answer_schema

    g = llama_prebuilt.json_schema_grammar(answer_schema(1))
    assert "root ::=" in g and len(g) < 200_000
    assert llama_prebuilt.json_schema_grammar(answer_schema(1)) is g  # cached per schema

# -- ELF re-linking (glibc 2.38 C23 symbols) ---------------------------------------------------


def _tiny_elf(symbols: list[tuple[str, str]], *, needs_238: bool = True) -> bytes:
    """A minimal ELF64 with .dynsym/.dynstr/.gnu.version/.gnu.version_r sections.

    ``symbols`` are (name, libc version) pairs; version indices: 2 = GLIBC_2.2.5, 3 = GLIBC_2.38.
    """
    strtab = bytearray(b"\0")

    def add(s: str) -> int:
        off = len(strtab)
        strtab.extend(s.encode() + b"\0")
        return off

    libc, v225, v238 = add("libc.so.6"), add("GLIBC_2.2.5"), add("GLIBC_2.38")
    names = [add(n) for n, _ in symbols]
    dynsym = bytes(24) + b"".join(struct.pack("<IBBHQQ", n, 0x12, 0, 0, 0, 0) for n in names)
    versym = struct.pack("<H", 0) + b"".join(
        struct.pack("<H", 2 if v == "GLIBC_2.2.5" else 3) for _, v in symbols)
    verneed = struct.pack("<HHIII", 1, 2 if needs_238 else 1, libc, 16, 0)
    verneed += struct.pack("<IHHII", elf_compat._elf_hash(b"GLIBC_2.2.5"), 0, 2, v225,
                           16 if needs_238 else 0)
    if needs_238:
        verneed += struct.pack("<IHHII", elf_compat._elf_hash(b"GLIBC_2.38"), 0, 3, v238, 0)
    body = bytearray(64)
    offs = {}
    for key, blob in (("str", strtab), ("sym", dynsym), ("ver", versym), ("need", verneed)):
        offs[key] = len(body)
        body.extend(blob)
    shoff = len(body)
    secs = [bytes(64),
            struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, offs["str"], len(strtab), 0, 0, 1, 0),
            struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, offs["sym"], len(dynsym), 1, 1, 8, 24),
            struct.pack("<IIQQQQIIQQ", 0, 0x6FFFFFFF, 0, 0, offs["ver"], len(versym), 2, 0, 2, 2),
            struct.pack("<IIQQQQIIQQ", 0, 0x6FFFFFFE, 0, 0, offs["need"], len(verneed), 1, 1,
                        8, 0)]
    for s in secs:
        body.extend(s)
    body[0:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", body, 0x28, shoff)
    struct.pack_into("<HH", body, 0x3A, 64, len(secs))
    return bytes(body)


def test_relink_binds_c23_symbols_to_their_classic_names_and_versions() -> None:
    elf = _tiny_elf([("malloc", "GLIBC_2.2.5"), ("__isoc23_strtol", "GLIBC_2.38"),
                     ("__isoc23_sscanf", "GLIBC_2.38")])
    assert elf_compat.glibc_2_38_symbols(elf) == ["__isoc23_strtol", "__isoc23_sscanf"]
    out = elf_compat.relink_c23(elf)
    assert elf_compat.glibc_2_38_symbols(out) == []
    parsed = elf_compat._Elf(bytearray(out))
    assert [n for _, n in parsed.symbols_with_version(2)] == ["malloc", "strtol", "sscanf"]
    assert [name for _, name, _ in parsed.libc_aux] == ["GLIBC_2.2.5", "GLIBC_2.2.5"]
    assert len(out) == len(elf)


def test_relink_refuses_an_unknown_glibc_2_38_symbol_and_keeps_clean_files() -> None:
    with pytest.raises(elf_compat.ElfCompatError, match="memfrob23"):
        elf_compat.relink_c23(_tiny_elf([("memfrob23", "GLIBC_2.38")]))
    clean = _tiny_elf([("malloc", "GLIBC_2.2.5")], needs_238=False)
    assert elf_compat.relink_c23(clean) == clean
    unused = elf_compat.relink_c23(_tiny_elf([("malloc", "GLIBC_2.2.5")]))
    assert "GLIBC_2.38" not in [n for _, n, _ in elf_compat._Elf(bytearray(unused)).libc_aux]
    with pytest.raises(elf_compat.ElfCompatError):
        elf_compat.relink_c23(b"not an elf file at all" * 4)
