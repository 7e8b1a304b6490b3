"""Where each tenant's banks live, and the open banks the service keeps.

The tenant is part of the storage key, not a query filter: with a folder as
storage, bank ``b`` of tenant ``t`` is the file ``<root>/<t>/<b>.db``; with a
``postgresql://…`` URL it is the bank key ``t/b`` (its own schema, see
:mod:`deltamem.store.postgres`). A request can only name a bank, never a
tenant, so no request reaches another tenant's rows.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, EmbedderMismatchError, StoreError
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.store.factory import is_url, open_store

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class BankNotFound(StoreError):
    """The tenant has no bank of that name (the service answers 404)."""


def check_name(kind: str, name: str) -> str:
    """``name`` if it is a valid tenant or bank name, else :class:`ConfigError`."""
    if not NAME_RE.match(name) or name in (".", ".."):
        raise ConfigError(f"{kind} name must match {NAME_RE.pattern}, got {name!r}")
    return name


class BankSpace:
    """Maps ``(tenant, bank)`` to a store location under one storage root.

    Args:
        storage: a folder (SQLite files) or a ``postgresql://…`` URL.
        fixed: for the local viewer: every name maps to this one location.
    """

    def __init__(self, storage: str | Path, *, fixed: str | None = None) -> None:
        self.storage = str(storage)
        self.fixed = fixed
        self.is_pg = is_url(self.storage)

    def location(self, tenant: str, bank: str) -> str:
        if self.fixed is not None:
            return self.fixed
        check_name("tenant", tenant)
        check_name("bank", bank)
        if self.is_pg:
            from urllib.parse import urlencode

            from deltamem.store.postgres import parse_url

            base = parse_url(self.storage)
            sep = "&" if "?" in base.conninfo else "?"
            extra = {"bank": f"{tenant}/{bank}"}
            if base.index != "exact":
                extra["index"] = base.index
            return f"{base.conninfo}{sep}{urlencode(extra)}"
        return str(Path(self.storage) / tenant / f"{bank}.db")

    def exists(self, location: str) -> bool:
        if not is_url(location):
            return Path(location).exists()
        try:
            open_store(location, readonly=True).close()
        except StoreError:
            return False
        return True

    def drop(self, location: str) -> None:
        """Delete a bank (used to undo a failed import into a new bank)."""
        if is_url(location):
            from deltamem.store.postgres import drop_bank

            drop_bank(location)
            return
        for suffix in ("", "-wal", "-shm"):
            Path(location + suffix).unlink(missing_ok=True)


class OpenBanks:
    """Open :class:`DeltaMem` objects by location, one lock each, least recently used closed.

    Args:
        space: where banks live.
        embedder: the service's embedder (every bank must have been built with it).
        extractor: the service's extractor.
        config: settings of banks this service creates (existing banks keep theirs).
        readonly: open banks for reading only (the local viewer).
        capacity: banks kept open at once.
    """

    def __init__(
        self,
        space: BankSpace,
        embedder: Embedder,
        extractor: Extractor | None,
        config: dict[str, Any] | None = None,
        *,
        readonly: bool = False,
        capacity: int = 64,
    ) -> None:
        self.space = space
        self.embedder = embedder
        self.extractor = extractor
        self.config = dict(config or {})
        self.readonly = readonly
        self.capacity = capacity
        self._open: OrderedDict[str, tuple[DeltaMem, threading.RLock]] = OrderedDict()
        self._guard = threading.Lock()

    def _load(self, location: str) -> DeltaMem:
        if self.readonly:
            mem = DeltaMem.open(location, embedder=None, readonly=True)
            meta = mem.store.meta()
            name, dim = meta.get("embedder_name"), meta.get("embedder_dim")
            if name is not None and (name != self.embedder.name or dim != self.embedder.dim):
                mem.close()
                raise EmbedderMismatchError(
                    f"bank {location} was built with embedder {name!r} (dim {dim}); the viewer "
                    f"has {self.embedder.name!r} (dim {self.embedder.dim}): pass --embedder"
                )
            mem.embedder = self.embedder
            return mem
        return DeltaMem.open(location, embedder=self.embedder, extractor=self.extractor,
                             config=self.config or None)

    @contextmanager
    def use(self, location: str, *, create: bool) -> Iterator[DeltaMem]:
        """The bank at ``location``, locked for this request.

        Raises :class:`BankNotFound` when it does not exist and ``create`` is False.
        """
        with self._guard:
            entry = self._open.get(location)
            if entry is None:
                if not (create and not self.readonly) and not self.space.exists(location):
                    raise BankNotFound("no such bank")
                entry = (self._load(location), threading.RLock())
                self._open[location] = entry
                while len(self._open) > self.capacity:
                    _, (old, lock) = self._open.popitem(last=False)
                    with lock:
                        old.close()
            self._open.move_to_end(location)
        mem, lock = entry
        with lock:
            yield mem

    def forget(self, location: str) -> None:
        """Close and drop a cached bank (after it was deleted or replaced)."""
        with self._guard:
            entry = self._open.pop(location, None)
        if entry is not None:
            with entry[1]:
                entry[0].close()

    def close(self) -> None:
        with self._guard:
            entries = list(self._open.values())
            self._open.clear()
        for mem, lock in entries:
            with lock:
                mem.close()
