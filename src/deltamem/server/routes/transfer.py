"""A bank in and out as JSON lines (the records of ``deltamem export``)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from deltamem.server.routes.deps import (
    ERRORS,
    WRITE_ERRORS,
    BankName,
    Service,
    Tenant,
    write_scope,
)
from deltamem.service import models as m

router = APIRouter(prefix="/v1/banks/{bank}")


@router.get("/export", responses={
    **ERRORS, 200: {"content": {"application/x-ndjson": {}},
                    "description": "One JSON record per line: a header, meta, nodes, "
                                   "logs, a trailer (counts by type, a SHA-256 over the "
                                   "records)."}},
    response_class=Response, summary="Every record of the bank as JSON lines")
def export(bank: BankName, who: Tenant, svc: Service) -> Response:
    lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
             for r in svc.export(who, bank)]
    return Response("".join(lines), media_type="application/x-ndjson")


@router.post("/import", response_model=m.ImportResponse, responses=WRITE_ERRORS,
             dependencies=[Depends(write_scope)],
             summary="Load exported records into a new (or empty) bank")
def import_(bank: BankName, body: m.ImportRequest, who: Tenant, svc: Service) -> m.ImportResponse:
    """All records load in one transaction or none does (a bank made for it is removed)."""
    return svc.import_(who, bank, body.records, partial=body.partial)
