"""What every route takes: the caller's tenant (from its API key), the bank service, the
bank name of the path, and the error responses to document."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi import Path as PathParam
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from deltamem.service import models as m
from deltamem.service.keys import KeyRing
from deltamem.service.tenants import LOCAL_TENANT, TenantBanks

__all__ = ["ERRORS", "WRITE_ERRORS", "BankName", "CanWrite", "Editor", "Service", "Tenant",
           "json_response", "write_scope"]

BankName = Annotated[
    str, PathParam(pattern=m.BANK_PATTERN, description="Bank name (unique per tenant).")
]
_bearer = HTTPBearer(auto_error=False, description="API key as a bearer token.")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key header.")

ERRORS: dict[int | str, dict[str, Any]] = {
    c: {"model": m.ErrorResponse} for c in (401, 404, 409, 413, 422)
}
"""The error responses of a route that names a bank."""
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {**ERRORS, 403: {"model": m.ErrorResponse}}
"""… and of one that writes (a read-only service answers 403)."""


async def _tenant(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str:
    """The tenant of the request's API key (401 when missing or unknown).

    ``async`` (it never blocks: a hash and a few comparisons), like :func:`_service`, so
    FastAPI runs it on the event loop instead of handing it to a worker thread: a thread
    hop per dependency cost ~0.1–1 ms a request on a busy machine (the service profile,
    ``docs/performance.md``)."""
    keys: KeyRing | None = request.app.state.keys
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


def _key(bearer: HTTPAuthorizationCredentials | None, header: str | None) -> str | None:
    return bearer.credentials if bearer is not None else header


async def write_scope(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> None:
    """403 for a read-only key (``"scope": "read"`` in the key file): what every route that
    writes depends on, besides the tenant (401 for a missing or unknown key)."""
    keys: KeyRing | None = request.app.state.keys
    if keys is None:
        return  # the keyless local viewer: a read-only service refuses writes itself
    key = _key(bearer, header)
    if keys.tenant(key) is None:
        raise HTTPException(401, "missing API key" if not key else "unknown API key",
                            headers={"WWW-Authenticate": "Bearer"})
    if not keys.writable(key):
        raise HTTPException(403, "this API key is read-only")


async def _editor(
    request: Request,
    who: Annotated[str, Depends(_tenant)],
    _: Annotated[None, Depends(write_scope)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str:
    """Who an inspector edit is by, for its audit row: ``tenant NAME (key FINGERPRINT)``
    (``local`` without keys); a read-only key is a 403."""
    key = _key(bearer, header)
    if request.app.state.keys is None or not key:
        return who
    return f"tenant {who} (key {KeyRing.fingerprint(key)})"


async def _can_write(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> bool:
    """Whether this request could write: a writable service and a key that may write (the
    viewer shows its edit controls only then)."""
    if request.app.state.service.readonly:
        return False
    keys: KeyRing | None = request.app.state.keys
    return keys is None or keys.writable(_key(bearer, header))


async def _service(request: Request) -> TenantBanks:
    return request.app.state.service  # type: ignore[no-any-return]


def json_response(model: BaseModel) -> Response:
    """``model`` as the JSON response, serialised where the route runs (its worker thread).

    A route declares its ``response_model`` (the OpenAPI schema) and returns this: FastAPI
    then sends it as is, where returning the model would make it validate the model again
    against the same class and serialise it on another worker thread."""
    return Response(model.model_dump_json(), media_type="application/json")


Tenant = Annotated[str, Depends(_tenant)]
Editor = Annotated[str, Depends(_editor)]
CanWrite = Annotated[bool, Depends(_can_write)]
Service = Annotated[TenantBanks, Depends(_service)]
