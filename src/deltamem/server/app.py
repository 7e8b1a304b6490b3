"""The HTTP service: list, recall, learn, stats, tree, explain, export, import, delete banks.

``create_app`` builds the ASGI app; ``deltamem serve`` runs it with uvicorn.
Every ``/v1`` route needs an API key (``Authorization: Bearer <key>`` or
``X-API-Key``), which names the tenant; routes name only a bank, and the
tenant goes into the bank's storage key (:mod:`deltamem.server.banks`).

Errors are JSON ``{"detail": ...}``: 401 no or unknown key, 403 write to a
read-only service, 404 no such bank, 409 embedder mismatch or import into a
bank that has nodes, 413 body over the size limit, 422 malformed body, episode
or import (which record, why; nothing written), 502 the LLM backend failed,
503 the storage failed (damaged bank, read-only or full disk). Bodies are
validated strictly (``"success": "yes"`` is not a boolean), and no detail names
a file-system path or a database URL: a bank is named by its bank name.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from deltamem.embed.base import Embedder
from deltamem.errors import (
    ConfigError,
    EmbedderMismatchError,
    InvalidImportError,
    InvalidInputError,
    LLMError,
    StoreError,
)
from deltamem.extract.base import Extractor
from deltamem.memories.deltamem import DeltaMem
from deltamem.server import models as m
from deltamem.server.auth import KeyRing
from deltamem.server.banks import BankNotFound, BankSpace, OpenBanks
from deltamem.server.limits import BodyLimit
from deltamem.types import Task, Usage

DEFAULT_MAX_BODY = 4 * 1024 * 1024
LOCAL_TENANT = "local"

BankName = Annotated[
    str, PathParam(pattern=m.BANK_PATTERN, description="Bank name (unique per tenant).")
]
_bearer = HTTPBearer(auto_error=False, description="API key as a bearer token.")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key header.")


def _tenant(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str:
    """The tenant of the request's API key (401 when missing or unknown)."""
    keys: KeyRing | None = request.app.state.service.keys
    if keys is None:
        return LOCAL_TENANT
    key = bearer.credentials if bearer is not None else header
    name = keys.tenant(key)
    if name is None:
        raise HTTPException(
            401,
            "missing API key" if not key else "unknown API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return name


Tenant = Annotated[str, Depends(_tenant)]


@dataclass
class _Service:
    banks: OpenBanks
    space: BankSpace
    keys: KeyRing | None
    llm: Any
    readonly: bool
    llm_lock: threading.Lock


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
        readonly: refuse learn and import (403).
        fixed_bank: serve this one bank location under every bank name (the viewer).
    """
    if keys is None and not readonly:
        raise ConfigError("a writable service needs API keys (keys=None is for the local viewer)")
    space = BankSpace(storage, fixed=fixed_bank)
    svc = _Service(
        banks=OpenBanks(space, embedder, extractor, config, readonly=readonly),
        space=space,
        keys=keys,
        llm=llm,
        readonly=readonly,
        llm_lock=threading.Lock(),
    )
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        svc.banks.close()

    app = FastAPI(
        lifespan=lifespan,
        title="deltamem",
        version="1",
        description="Experience memory for LLM agents, shared over HTTP. Every /v1 route needs "
        "an API key; each key belongs to one tenant, whose banks no other tenant can reach.",
    )
    app.state.service = svc
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    _add_error_handlers(app, space.storage)
    _add_routes(app, svc)
    from deltamem.viewer import mount

    mount(app)

    return app


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
    app.add_exception_handler(BankNotFound, handler(404))
    app.add_exception_handler(EmbedderMismatchError, handler(409))
    app.add_exception_handler(InvalidInputError, handler(422))
    app.add_exception_handler(ConfigError, handler(422))
    app.add_exception_handler(LLMError, handler(502))
    app.add_exception_handler(StoreError, handler(503))
    app.add_exception_handler(InvalidImportError, handler(422))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        detail = redact(exc.detail, storage) if isinstance(exc.detail, str) else exc.detail
        return JSONResponse({"detail": detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    app.add_exception_handler(HTTPException, http_error)


def _add_routes(app: FastAPI, svc: _Service) -> None:
    errors: dict[int | str, dict[str, Any]] = {
        c: {"model": m.ErrorResponse} for c in (401, 404, 409, 413, 422)
    }

    def writable() -> None:
        if svc.readonly:
            raise HTTPException(403, "this service is read-only")

    @contextmanager
    def bank_of(who: str, bank: str, *, create: bool) -> Iterator[DeltaMem]:
        loc = svc.space.location(who, bank)
        try:
            with svc.banks.use(loc, create=create) as mem:
                yield mem
        except BankNotFound:
            raise BankNotFound(f"tenant has no bank named {bank!r}") from None

    @contextmanager
    def metered() -> Iterator[Usage]:
        """Usage of the service's LLM during the block (serialised while an LLM is in use)."""
        out = Usage()
        if svc.llm is None:
            yield out
            return
        with svc.llm_lock:
            before = svc.llm.usage.snapshot()
            try:
                yield out
            finally:
                out.merge(svc.llm.usage.since(before))

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/viewer/")

    @app.get("/v1/banks", response_model=m.BankListResponse,
             responses={401: {"model": m.ErrorResponse}}, summary="The tenant's banks")
    def list_banks(who: Tenant) -> m.BankListResponse:
        """Names (sorted) and node counts of the calling tenant's banks; nobody else's."""
        found = svc.space.list(who)
        return m.BankListResponse(
            banks=[m.BankInfo(name=k, nodes=v) for k, v in sorted(found.items())]
        )

    @app.delete("/v1/banks/{bank}", response_model=m.DeleteResponse,
                responses={**errors, 403: {"model": m.ErrorResponse}},
                summary="Delete a bank and everything in it")
    def delete_bank(bank: BankName, who: Tenant) -> m.DeleteResponse:
        """Removes the bank's storage (SQLite file / PostgreSQL schema); 404 when absent.

        Requests already using the bank finish first; requests arriving meanwhile wait,
        then find no bank (see :mod:`deltamem.server.banks` for other processes).
        """
        writable()
        loc = svc.space.location(who, bank)
        if not svc.banks.delete(loc):
            raise BankNotFound(f"tenant has no bank named {bank!r}")
        return m.DeleteResponse(bank=bank)

    @app.post("/v1/banks/{bank}/recall", response_model=m.RecallResponse, responses=errors,
              summary="Recall memory for a task (read-only)")
    def recall(bank: BankName, body: m.RecallRequest, who: Tenant) -> m.RecallResponse:
        """Eq. 6 match in each tree and the matched chains; a missing bank recalls nothing."""
        task = body.task.to_task()
        try:
            with bank_of(who, bank, create=False) as mem:
                r = mem.recall(task)
        except BankNotFound:
            DeltaMem._check_task(task)
            return m.RecallResponse()
        return m.RecallResponse(**m.RecallOut.of(r).model_dump())

    @app.post("/v1/banks/{bank}/learn", response_model=m.LearnResponse,
              responses={**errors, 403: {"model": m.ErrorResponse}},
              summary="Learn from a finished episode (creates the bank)")
    def learn(bank: BankName, body: m.LearnRequest, who: Tenant) -> m.LearnResponse:
        """All of the episode's writes commit together; ``usage`` counts LLM tokens spent."""
        writable()
        episode = body.episode.to_episode()
        episode.validate()
        given = body.recall.to_recall() if body.recall is not None else None
        with bank_of(who, bank, create=True) as mem, metered() as usage:
            changes = mem.learn(episode, given)
        return m.LearnResponse(
            changes=[m.ChangeOut(**c) for c in changes.to_list()], usage=m.UsageOut.of(usage)
        )

    @app.get("/v1/banks/{bank}/stats", response_model=m.StatsResponse, responses=errors,
             summary="Node counts by tree, depth, kind and label")
    def stats(bank: BankName, who: Tenant) -> m.StatsResponse:
        with bank_of(who, bank, create=False) as mem:
            return m.StatsResponse(bank=bank, meta=mem.store.meta(), **mem.stats())

    @app.get("/v1/banks/{bank}/tree", response_model=m.TreeResponse, responses=errors,
             summary="Every node of one or both trees")
    def tree(
        bank: BankName,
        who: Tenant,
        which: Annotated[Literal["task", "env", "both"], Query(alias="tree")] = "both",
    ) -> m.TreeResponse:
        with bank_of(who, bank, create=False) as mem:
            names = ("task", "env") if which == "both" else (which,)
            nodes = [n for t in names for n in mem.nodes(t)]  # type: ignore[arg-type]
            meta = mem.store.meta()
        return m.TreeResponse(
            bank=bank,
            embedder=meta.get("embedder_name"),
            config=meta.get("config", {}),
            nodes=[_node_out(n) for n in nodes],
        )

    @app.post("/v1/banks/{bank}/explain", response_model=m.ExplainResponse, responses=errors,
              summary="Scores of a query against both trees (the viewer's search)")
    def explain(bank: BankName, body: m.ExplainRequest, who: Tenant) -> m.ExplainResponse:
        with bank_of(who, bank, create=False) as mem:
            task = Task(id="explain", goal=body.query, scene=body.scene or body.query,
                        domain=mem.config.domain)
            matches = mem.match(task)
            queries = mem.queries(task)
            assert mem.embedder is not None
            out: dict[str, m.TreeExplain] = {}
            for name, match in matches.items():
                t = mem.trees[name]
                q = mem.embedder.embed_queries([queries[name]])[0]
                scores = dict(zip((n.id for n in t), t.scores(q, mem.config.epsilon).tolist(),
                                  strict=True))
                chain = t.chain(match.node_id) if match.accepted and match.node_id else []
                if match.node_id is not None:
                    scores[match.node_id] = float(match.score or 0.0)
                top = sorted(scores.items(), key=lambda kv: -kv[1])[:5]
                out[name] = m.TreeExplain(
                    match=m.MatchDetail(**match.to_dict(), chain=[n.id for n in chain]),
                    chain=[m.ScoredNode(id=n.id, score=scores[n.id]) for n in chain],
                    top=[m.ScoredNode(id=i, score=s) for i, s in top],
                )
        return m.ExplainResponse(trees=out)  # type: ignore[arg-type]

    @app.get("/v1/banks/{bank}/export", responses={
        **errors, 200: {"content": {"application/x-ndjson": {}},
                        "description": "One JSON record per line: meta, nodes, logs."}},
        response_class=Response, summary="Every record of the bank as JSON lines")
    def export(bank: BankName, who: Tenant) -> Response:
        with bank_of(who, bank, create=False) as mem:
            lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                     for r in mem.store.iter_export()]
        return Response("".join(lines), media_type="application/x-ndjson")

    @app.post("/v1/banks/{bank}/import", response_model=m.ImportResponse,
              responses={**errors, 403: {"model": m.ErrorResponse}},
              summary="Load exported records into a new (or empty) bank")
    def import_(bank: BankName, body: m.ImportRequest, who: Tenant) -> m.ImportResponse:
        """All records load in one transaction or none does (a bank made for it is removed)."""
        writable()
        emb = svc.banks.embedder
        first = body.records[0]
        if first.get("type") != "meta":
            raise HTTPException(422, "the first record must be the bank's meta record")
        if "embedder_name" in first and (
            first.get("embedder_name") != emb.name or first.get("embedder_dim") != emb.dim
        ):
            raise EmbedderMismatchError(
                f"the export was built with embedder {first.get('embedder_name')!r} (dim "
                f"{first.get('embedder_dim')}); this service uses {emb.name!r} (dim {emb.dim})"
            )
        loc = svc.space.location(who, bank)
        existed = svc.space.exists(loc)
        try:
            with svc.banks.use(loc, create=True) as mem:
                if mem.store.load_nodes():
                    raise HTTPException(409, f"bank {bank!r} already has nodes; import needs "
                                             "an empty bank")
                try:
                    n = mem.store.import_records(body.records)
                except InvalidImportError as e:
                    raise HTTPException(422, f"cannot import: {e}") from e
        except BaseException:
            if not existed:
                svc.banks.forget(loc)
                svc.space.drop(loc)
            raise
        svc.banks.forget(loc)  # reopen with the imported configuration
        return m.ImportResponse(nodes=n)

    _ = (list_banks, delete_bank, recall, learn, stats, tree, explain, export, import_, healthz,
         root)


def _node_out(n: Any) -> m.NodeOut:
    p = n.payload
    return m.NodeOut(
        id=n.id, tree=n.tree, kind=n.kind, label=n.label, parent=n.parent, depth=n.depth,
        success_hits=n.success_hits, consolidated=n.consolidated, origin=n.origin,
        source=n.source, trigger=n.trigger, payload=m.PayloadOut(
            activation=p.activation, procedure=p.procedure, termination=p.termination
        ),
        seq=n.seq, episode_id=n.episode_id, created_at=n.created_at,
    )  # fmt: skip
