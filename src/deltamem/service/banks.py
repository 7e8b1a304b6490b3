"""Where each tenant's banks live, and the open banks the service keeps.

The tenant is part of the storage key, not a query filter: with a folder as
storage, bank ``b`` of tenant ``t`` is the file ``<root>/<t>/<b>.db``; with a
``postgresql://…`` URL it is the bank key ``t/b`` (its own schema, see
:mod:`deltamem.store.postgres`). A request can only name a bank, never a
tenant, so no request reaches another tenant's rows; listing a tenant's banks
looks only under its folder or its key prefix ``t/``.

Deleting a bank (:meth:`OpenBanks.delete`) while requests use it: requests that
already hold the bank finish first; requests for it that arrive during the
delete wait until it is done and then see no bank (reads answer 404, a learn
creates a new empty bank). Other processes: on PostgreSQL the drop waits for a
learn in progress on any connection (advisory lock) and for running reads, and
a process that still has the bank open gets a storage error (503 from a
service) on its next call; a SQLite file is unlinked, so a process that still
has it open keeps working on the deleted file and whatever it writes is lost.
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
from deltamem.errors import BankNotFound, ConfigError, EmbedderMismatchError, StoreError
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.store.factory import is_url, open_store

FIXED_NAME = "local"
"""The name under which the local viewer (``deltamem view BANK``) serves its one bank."""

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(kind: str, name: str) -> str:
    """``name`` if it is a valid tenant or bank name, else :class:`ConfigError`."""
    if not NAME_RE.match(name) or name in (".", ".."):
        raise ConfigError(f"{kind} name must match {NAME_RE.pattern}, got {name!r}")
    return name


class BankSpace:
    """Maps ``(tenant, bank)`` to a store location under one storage root.

    Args:
        storage: a folder (SQLite files) or a ``postgresql://…`` URL.
        fixed: one bank served under one name (the local viewer's, the MCP server's on a
            bank file): any other name is :class:`BankNotFound`.
        fixed_name: that name (default ``local``, :data:`FIXED_NAME`).
    """

    def __init__(self, storage: str | Path, *, fixed: str | None = None,
                 fixed_name: str = FIXED_NAME) -> None:
        self.storage = str(storage)
        self.fixed = fixed
        self.fixed_name = fixed_name
        self.is_pg = is_url(self.storage)

    def location(self, tenant: str, bank: str) -> str:
        if self.fixed is not None:
            if bank != self.fixed_name:
                raise BankNotFound(f"no bank named {bank!r}; this server holds one bank, "
                                   f"named {self.fixed_name!r}")
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

    def list(self, tenant: str) -> dict[str, dict[str, int] | None]:
        """The tenant's banks: name → node count per tree (``None``: the bank cannot be read,
        e.g. half-created or damaged). Names that the API cannot address are left out."""
        if self.fixed is not None:  # the viewer: one bank, shown under the name "local"
            try:
                return {FIXED_NAME: _counts(self.fixed)}
            except FileNotFoundError:
                return {}
        check_name("tenant", tenant)
        if self.is_pg:
            from deltamem.store.postgres import list_banks

            prefix = f"{tenant}/"
            found = list_banks(self.storage, prefix=prefix)
            return {
                k[len(prefix):]: v for k, v in found.items() if NAME_RE.match(k[len(prefix):])
            }
        folder = Path(self.storage) / tenant
        if not folder.is_dir():
            return {}
        out: dict[str, dict[str, int] | None] = {}
        for f in sorted(folder.glob("*.db")):
            if NAME_RE.match(f.stem) and f.stem not in (".", "..") and f.is_file():
                try:
                    out[f.stem] = _counts(str(f))
                except FileNotFoundError:  # deleted while listing
                    continue
        return out

    def exists(self, location: str) -> bool:
        if not is_url(location):
            return Path(location).exists()
        try:
            open_store(location, readonly=True).close()
        except StoreError:
            return False
        return True

    def drop(self, location: str) -> bool:
        """Delete a bank's storage; False when there was none.

        PostgreSQL: the bank's schema (see :func:`deltamem.store.postgres.drop_bank`);
        SQLite: the file and its ``-wal``/``-shm`` companions. Call it through
        :meth:`OpenBanks.delete` when the bank may be open.
        """
        if is_url(location):
            from deltamem.store.postgres import drop_bank

            return drop_bank(location)
        existed = Path(location).exists()
        for suffix in ("", "-wal", "-shm"):
            Path(location + suffix).unlink(missing_ok=True)
        return existed


def _counts(location: str) -> dict[str, int] | None:
    """Node count per tree of the bank at ``location``; FileNotFoundError when it is gone."""
    if not is_url(location) and not Path(location).exists():
        raise FileNotFoundError(location)
    try:
        store = open_store(location, readonly=True)
    except StoreError:
        if not is_url(location) and not Path(location).exists():
            raise FileNotFoundError(location) from None
        return None
    try:
        out = {"task": 0, "env": 0}
        for _, tree, *_ in store.node_states():
            out[tree] = out.get(tree, 0) + 1
        return out
    except StoreError:
        return None
    finally:
        store.close()


class OpenBanks:
    """Open :class:`DeltaMem` objects by location, one lock each, least recently used closed.

    Args:
        space: where banks live.
        embedder: the service's embedder (every bank must have been built with it).
        extractor: the service's extractor.
        config: settings of banks this service creates; a bank that already has a stored
            configuration (made earlier, by another program, or imported) is opened with it.
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
        self._changed = threading.Condition(self._guard)
        self._deleting: set[str] = set()

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
        store = open_store(location)
        try:
            # an existing (or imported) bank keeps the configuration stored in it
            config = None if "config" in store.meta() else self.config or None
            return DeltaMem(store, self.embedder, self.extractor, config)  # type: ignore[arg-type]
        except BaseException:
            store.close()
            raise

    @contextmanager
    def use(self, location: str, *, create: bool) -> Iterator[DeltaMem]:
        """The bank at ``location``, locked for this request.

        Raises :class:`BankNotFound` when it does not exist and ``create`` is False.
        Waits while the bank is being deleted (see the module doc).
        """
        while True:
            with self._guard:
                while location in self._deleting:
                    self._changed.wait()
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
            lock.acquire()
            with self._guard:
                current = self._open.get(location) is entry
            if current:
                break
            lock.release()  # closed (deleted, evicted, forgotten) while we waited: again
        try:
            yield mem
        finally:
            lock.release()

    def delete(self, location: str) -> bool:
        """Close the bank if open and delete its storage; False when it did not exist.

        Requests holding the bank finish first; new ones wait until the delete is done.
        """
        with self._guard:
            while location in self._deleting:
                self._changed.wait()
            self._deleting.add(location)
            entry = self._open.pop(location, None)
        try:
            if entry is not None:
                with entry[1]:
                    entry[0].close()
            return self.space.drop(location)
        finally:
            with self._guard:
                self._deleting.discard(location)
                self._changed.notify_all()

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
