"""API key scopes: ``write`` (the default) or ``read``, from the key file and the CLI."""

from __future__ import annotations

import json

import pytest

from deltamem.errors import ConfigError
from deltamem.service.keys import KeyRing, add_key, hash_key


def test_scopes_from_the_key_file(tmp_path):
    path = tmp_path / "keys.json"
    writer = add_key(path, "team-a")
    reader = add_key(path, "team-a", scope="read")
    ring = KeyRing.from_file(path)
    assert ring.tenant(writer) == ring.tenant(reader) == "team-a"
    assert ring.writable(writer) and not ring.writable(reader)
    assert not ring.writable("dmk_unknown") and not ring.writable(None)
    entries = json.loads(path.read_text())["keys"]
    assert [e["scope"] for e in entries] == ["write", "read"]
    # a key file from before scopes: every key writes
    path.write_text(json.dumps({"keys": [{"tenant": "t", "sha256": hash_key("dmk_x")}]}))
    assert KeyRing.from_file(path).writable("dmk_x")
    path.write_text(json.dumps({"keys": [{"tenant": "t", "sha256": hash_key("dmk_x"),
                                          "scope": "admin"}]}))
    with pytest.raises(ConfigError, match="scope 'admin'"):
        KeyRing.from_file(path)
    with pytest.raises(ConfigError, match="scope"):
        add_key(tmp_path / "other.json", "t", scope="admin")
    assert KeyRing.fingerprint(writer) == hash_key(writer)[:12]


def test_cli_makes_a_read_only_key(tmp_path):
    import typer
    from typer.testing import CliRunner

    from deltamem.cli.serve import register

    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["api-key", "team-a", "--read-only",
                                   "--keys", str(tmp_path / "k.json")])
    assert out.exit_code == 0
    key = out.stdout.strip()
    assert not KeyRing.from_file(tmp_path / "k.json").writable(key)
