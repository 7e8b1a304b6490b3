"""API keys: random secrets handed to clients, stored only as SHA-256 hashes, mapped to tenants.

The key file is JSON::

    {"keys": [{"tenant": "team-a", "sha256": "<hex digest of the key>", "note": "..."}]}

:func:`add_key` makes a new key, appends its hash and returns the key itself;
that is the only time the key is ever seen. Keys are 256-bit random, so a plain
SHA-256 (no salt, no stretching) cannot be reversed by guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError
from deltamem.service.banks import check_name

KEY_PREFIX = "dmk_"


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
    """

    def __init__(self, hashes: Mapping[str, str]) -> None:
        for h, tenant in hashes.items():
            if len(h) != 64 or any(c not in "0123456789abcdef" for c in h):
                raise ConfigError(f"key hash {h[:12]!r}… is not a hex SHA-256 digest")
            check_name("tenant", tenant)
        self._hashes = dict(hashes)

    @classmethod
    def from_file(cls, path: str | Path) -> KeyRing:
        """Load a key file (see the module doc); :class:`ConfigError` when malformed."""
        p = Path(path)
        data = _read_key_file(p, missing_ok=False)
        try:
            return cls({e["sha256"]: e["tenant"] for e in data["keys"]})
        except (KeyError, TypeError, AttributeError) as e:
            raise ConfigError(f"API key file {p} is malformed: {e!r}") from e

    @classmethod
    def from_keys(cls, keys: Mapping[str, str]) -> KeyRing:
        """From plaintext ``key → tenant`` (tests, one-off servers); only hashes are kept."""
        return cls({hash_key(k): t for k, t in keys.items()})

    def tenant(self, key: str | None) -> str | None:
        """The tenant of ``key``, or ``None`` for a missing or unknown key."""
        if not key:
            return None
        digest = hash_key(key)
        for h, tenant in self._hashes.items():
            if hmac.compare_digest(h, digest):
                return tenant
        return None

    def __len__(self) -> int:
        return len(self._hashes)


def add_key(path: str | Path, tenant: str, note: str = "") -> str:
    """Create a key for ``tenant``, append its hash to the key file, return the key."""
    check_name("tenant", tenant)
    p = Path(path)
    data = _read_key_file(p, missing_ok=True)
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list):
        raise ConfigError(f"API key file {p} is malformed: no list of keys")
    key = new_key()
    keys.append({"tenant": tenant, "sha256": hash_key(key), "note": note})
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
