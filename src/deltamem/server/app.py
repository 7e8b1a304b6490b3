"""The HTTP service: list, recall, learn, stats, tree, explain, export, import, delete banks.

``create_app`` builds the ASGI app; ``deltamem serve`` runs it with uvicorn. The routes
(:mod:`deltamem.server.routes`, one router per resource) are thin: what they do is
:class:`deltamem.service.TenantBanks`, shared with the MCP server.
Every ``/v1`` route needs an API key (``Authorization: Bearer <key>`` or
``X-API-Key``), which names the tenant; routes name only a bank, and the
tenant goes into the bank's storage key (:mod:`deltamem.service.banks`).

Errors are JSON ``{"detail": ...}``: 401 no or unknown key, 403 write to a
read-only service or with a read-only key, 404 no such bank (node, edit), 409 embedder
mismatch, import into a bank that has nodes, or an inspector edit that conflicts, 413 body
over the size limit, 422 malformed body, episode or import (which record, why; nothing
written), 502 the LLM backend failed, 503 the storage or the embedder failed (damaged
bank, read-only or full disk). Bodies are
validated strictly (``"success": "yes"`` is not a boolean), and no detail names
a file-system path or a database URL: a bank is named by its bank name.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from deltamem.embed.base import Embedder
from deltamem.errors import (
    ConfigError,
    EditConflictError,
    EmbedderError,
    EmbedderMismatchError,
    InvalidImportError,
    InvalidInputError,
    LLMError,
    NodeNotFound,
    StoreError,
)
from deltamem.extract.base import Extractor
from deltamem.server.limits import BodyLimit
from deltamem.server.routes import ROUTERS
from deltamem.service.banks import BankNotFound, BankSpace
from deltamem.service.keys import KeyRing
from deltamem.service.tenants import BankNotEmpty, ReadOnlyError, TenantBanks

DEFAULT_MAX_BODY = 4 * 1024 * 1024
STATIC = Path(__file__).parent / "static"
"""The tree viewer's page, script and style (see :mod:`deltamem.server.viewer`)."""


def create_app(
    storage: str | Path,
    *,
    embedder: Embedder,
    keys: KeyRing | None,
    extractor: Extractor | None = None,
    llm: Any = None,
    config: dict[str, Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    readonly: bool = False,
    fixed_bank: str | None = None,
) -> FastAPI:
    """The service's ASGI app.

    Args:
        storage: folder of SQLite banks or ``postgresql://…`` URL.
        embedder: used for every bank (a bank built with another one answers 409).
        keys: API keys → tenants. ``None`` disables authentication and puts every
            request in tenant ``local``; allowed only with ``readonly=True``
            (the local viewer).
        extractor: the extractor of learns (default: structural).
        llm: the LLM behind ``extractor``, if any; its token usage per request is returned.
        config: DeltaMem settings for banks this service creates.
        max_body_bytes: larger request bodies get 413.
        readonly: refuse learn, import and delete (403).
        fixed_bank: serve this one bank location under the name ``local`` (the viewer; any
            other name answers 404).
    """
    if keys is None and not readonly:
        raise ConfigError("a writable service needs API keys (keys=None is for the local viewer)")
    space = BankSpace(storage, fixed=fixed_bank)
    service = TenantBanks(space, embedder=embedder, extractor=extractor, llm=llm, config=config,
                          readonly=readonly)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(
        lifespan=lifespan,
        title="deltamem",
        version="1",
        description="Experience memory for LLM agents, shared over HTTP. Every /v1 route needs "
        "an API key; each key belongs to one tenant, whose banks no other tenant can reach.",
    )
    app.state.service = service
    app.state.keys = keys
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _add_error_handlers(app, space.storage)
    for router in ROUTERS:
        app.include_router(router)
    _mount_viewer(app)
    return app


def _mount_viewer(app: FastAPI) -> None:
    """Serve the tree viewer's page under ``/viewer/``."""
    from fastapi.staticfiles import StaticFiles

    if not (STATIC / "index.html").exists():
        raise ConfigError(f"viewer files are missing from {STATIC} (broken install)")
    app.mount("/viewer", StaticFiles(directory=STATIC, html=True), name="viewer")


_URL = re.compile(r"postgres(?:ql)?://[^\s'\"]+")
_ANY_PATH = re.compile(r"(?<![\w:/.])/(?:[^\s'\"/():,;]+/)+[^\s'\"/():,;]*")


def redact(text: str, storage: str) -> str:
    """``text`` without file-system paths or database URLs: a bank file under ``storage``
    becomes its bank name, any other absolute path ``<path>``, a URL ``<database>``."""
    text = _URL.sub("<database>", text)
    if not _URL.fullmatch(storage):
        roots = {storage.rstrip("/"), str(Path(storage).resolve())}
        for root in sorted((r for r in roots if r), key=len, reverse=True):
            pattern = re.escape(root) + r"/(?:[^\s'\"/]+/)*?([^\s'\"/]+?)(?:\.db)?(?=[\s'\":,)]|$)"
            text = re.sub(pattern, r"\1", text)
    return _ANY_PATH.sub("<path>", text)


def _add_error_handlers(app: FastAPI, storage: str) -> None:
    def handler(status: int):
        async def handle(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": redact(str(exc), storage)}, status_code=status)

        return handle

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        # the offending input is not echoed: it may be huge or not JSON-encodable (NaN)
        errs = exc.errors() if isinstance(exc, RequestValidationError) else []
        detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in errs]
        return JSONResponse({"detail": detail or str(exc)}, status_code=422)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ReadOnlyError, handler(403))
    app.add_exception_handler(BankNotFound, handler(404))
    app.add_exception_handler(NodeNotFound, handler(404))
    app.add_exception_handler(BankNotEmpty, handler(409))
    app.add_exception_handler(EditConflictError, handler(409))
    app.add_exception_handler(EmbedderMismatchError, handler(409))
    app.add_exception_handler(InvalidInputError, handler(422))
    app.add_exception_handler(ConfigError, handler(422))
    app.add_exception_handler(LLMError, handler(502))
    app.add_exception_handler(EmbedderError, handler(503))
    app.add_exception_handler(StoreError, handler(503))
    app.add_exception_handler(InvalidImportError, handler(422))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        detail = redact(exc.detail, storage) if isinstance(exc.detail, str) else exc.detail
        return JSONResponse({"detail": detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    app.add_exception_handler(HTTPException, http_error)
