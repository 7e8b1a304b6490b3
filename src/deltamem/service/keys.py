"""API keys: random secrets handed to clients, stored only as SHA-256 hashes, mapped to tenants.

The key file is JSON::

    {"keys": [{"tenant": "team-a", "sha256": "<hex digest of the key>", "note": "...",
               "scope": "write"}]}

``scope`` is ``write`` (the default: everything the tenant may do) or ``read`` (recall,
stats, tree, explain, export and the viewer; learn, import, delete and the inspector's
edits answer 403). :func:`add_key` makes a new key, appends its hash and returns the key
itself; that is the only time the key is ever seen. Keys are 256-bit random, so a plain
SHA-256 (no salt, no stretching) cannot be reversed by guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.service.banks import check_name

KEY_PREFIX = "dmk_"
SCOPES = ("read", "write")
"""What a key may do: ``read`` only, or ``write`` too (the default)."""


def hash_key(key: str) -> str:
    """Hex SHA-256 of a key (what the key file stores)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random API key."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRing:
    """Key hashes → tenant names.

    Args:
        hashes: mapping of hex SHA-256 digests to tenant names.
        read_only: the digests of read-only keys (the others may write).
    """

    def __init__(self, hashes: Mapping[str, str], read_only: Collection[str] = ()) -> None:
        for h, tenant in hashes.items():
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ConfigError(f"key hash {h[:12]!r}… is not a hex SHA-256 digest")
            check_name("tenant", tenant)
        self._hashes = dict(hashes)
        self._read_only = frozenset(read_only)

    @classmethod
    def from_file(cls, path: str | Path) -> KeyRing:
        """Load a key file (see the module doc); :class:`ConfigError` when malformed."""
        p = Path(path)
        data = _read_key_file(p, missing_ok=False)
        try:
            entries = list(data["keys"])
            for e in entries:
                if e.get("scope", "write") not in SCOPES:
                    raise ConfigError(f"API key file {p}: scope {e.get('scope')!r} is not one "
                                      f"of {', '.join(SCOPES)}")
            return cls({e["sha256"]: e["tenant"] for e in entries},
                       {e["sha256"] for e in entries if e.get("scope", "write") == "read"})
        except (KeyError, TypeError, AttributeError) as e:
            raise ConfigError(f"API key file {p} is malformed: {e!r}") from e

    @classmethod
    def from_keys(cls, keys: Mapping[str, str], read_only: Collection[str] = ()) -> KeyRing:
        """From plaintext ``key → tenant`` (tests, one-off servers), ``read_only`` the keys
        that may only read; only hashes are kept."""
        return cls({hash_key(k): t for k, t in keys.items()}, {hash_key(k) for k in read_only})

    def _digest(self, key: str | None) -> str | None:
        if not key:
            return None
        digest = hash_key(key)
        for h in self._hashes:
            if hmac.compare_digest(h, digest):
                return h
        return None

    def tenant(self, key: str | None) -> str | None:
        """The tenant of ``key``, or ``None`` for a missing or unknown key."""
        h = self._digest(key)
        return None if h is None else self._hashes[h]

    def writable(self, key: str | None) -> bool:
        """Whether ``key`` is known and may write (its scope is ``write``)."""
        h = self._digest(key)
        return h is not None and h not in self._read_only

    @staticmethod
    def fingerprint(key: str) -> str:
        """What names a key in an audit row: the first 12 hex digits of its hash."""
        return hash_key(key)[:12]

    def __len__(self) -> int:
        return len(self._hashes)


def add_key(path: str | Path, tenant: str, note: str = "", scope: str = "write") -> str:
    """Create a key for ``tenant`` (``scope``: ``write`` or ``read``), append its hash to
    the key file, return the key."""
    check_name("tenant", tenant)
    if scope not in SCOPES:
        raise ConfigError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    p = Path(path)
    data = _read_key_file(p, missing_ok=True)
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list):
        raise ConfigError(f"API key file {p} is malformed: no list of keys")
    key = new_key()
    keys.append({"tenant": tenant, "sha256": hash_key(key), "note": note, "scope": scope})
    tmp = p.with_suffix(p.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write API key file {p}: {e.strerror or e}") from e
    return key


def _read_key_file(p: Path, *, missing_ok: bool) -> Any:
    """The parsed key file (``{"keys": []}`` when missing and ``missing_ok``)."""
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        if missing_ok:
            return {"keys": []}
        raise ConfigError(f"no API key file at {p} (create one with `deltamem api-key`)") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"API key file {p} is malformed (not JSON): {e}") from e
    except OSError as e:
        raise ConfigError(f"cannot read API key file {p}: {e.strerror or e}") from e
