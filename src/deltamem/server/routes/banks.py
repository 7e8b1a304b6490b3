"""The tenant's banks: list them, delete one."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from deltamem.server.routes.deps import WRITE_ERRORS, BankName, Service, Tenant, write_scope
from deltamem.service import models as m

router = APIRouter(prefix="/v1/banks")


@router.get("", response_model=m.BankListResponse,
            responses={401: {"model": m.ErrorResponse}}, summary="The tenant's banks")
def list_banks(who: Tenant, svc: Service) -> m.BankListResponse:
    """Names (sorted) and node counts of the calling tenant's banks; nobody else's."""
    found = svc.list(who)
    return m.BankListResponse(
        banks=[m.BankInfo(name=k, nodes=v) for k, v in sorted(found.items())]
    )


@router.delete("/{bank}", response_model=m.DeleteResponse, responses=WRITE_ERRORS,
               dependencies=[Depends(write_scope)],
               summary="Delete a bank and everything in it")
def delete_bank(bank: BankName, who: Tenant, svc: Service) -> m.DeleteResponse:
    """Removes the bank's storage (SQLite file / PostgreSQL schema); 404 when absent.

    Requests already using the bank finish first; requests arriving meanwhile wait,
    then find no bank (see :mod:`deltamem.service.banks` for other processes).
    """
    return svc.delete(who, bank)
