"""Looking into a bank: its figures, its trees, and how a query scores against them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from deltamem.server.routes.deps import ERRORS, BankName, CanWrite, Service, Tenant
from deltamem.service import models as m

router = APIRouter(prefix="/v1/banks/{bank}", responses=ERRORS)


@router.get("/stats", response_model=m.StatsResponse,
            summary="Node counts by tree, depth, kind and label")
def stats(bank: BankName, who: Tenant, svc: Service) -> m.StatsResponse:
    return svc.stats(who, bank)


@router.get("/tree", response_model=m.TreeResponse, summary="Every node of one or both trees")
def tree(
    bank: BankName,
    who: Tenant,
    svc: Service,
    can_write: CanWrite,
    which: Annotated[Literal["task", "env", "both"], Query(alias="tree")] = "both",
) -> m.TreeResponse:
    """``writable``: this caller may edit nodes here (a write key on a writable service)."""
    return svc.tree(who, bank, which).model_copy(update={"writable": can_write})


@router.post("/explain", response_model=m.ExplainResponse,
             summary="Scores of a query against both trees (the viewer's search)")
def explain(bank: BankName, body: m.ExplainRequest, who: Tenant, svc: Service) -> m.ExplainResponse:
    return svc.explain(who, bank, body.query, body.scene)
