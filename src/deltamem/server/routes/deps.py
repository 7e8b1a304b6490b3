"""What every route takes: the caller's tenant (from its API key), the bank service, the
bank name of the path, and the error responses to document."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from deltamem.service import models as m
from deltamem.service.keys import KeyRing
from deltamem.service.tenants import LOCAL_TENANT, TenantBanks

__all__ = ["ERRORS", "WRITE_ERRORS", "BankName", "Service", "Tenant"]

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


def _tenant(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> str:
    """The tenant of the request's API key (401 when missing or unknown)."""
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


def _service(request: Request) -> TenantBanks:
    return request.app.state.service  # type: ignore[no-any-return]


Tenant = Annotated[str, Depends(_tenant)]
Service = Annotated[TenantBanks, Depends(_service)]
