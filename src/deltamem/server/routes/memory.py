"""The memory loop over HTTP: recall before a task, learn after it."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from deltamem.server.routes.deps import (
    ERRORS,
    WRITE_ERRORS,
    BankName,
    Service,
    Tenant,
    json_response,
    write_scope,
)
from deltamem.service import models as m

router = APIRouter(prefix="/v1/banks/{bank}")


@router.post("/recall", response_model=m.RecallResponse, responses=ERRORS,
             summary="Recall memory for a task (read-only)")
def recall(bank: BankName, body: m.RecallRequest, who: Tenant, svc: Service) -> Response:
    """Eq. 6 match in each tree and the matched chains; a missing bank recalls nothing."""
    r = svc.recall(who, bank, body.task.to_task())
    return json_response(m.RecallResponse(**m.RecallOut.of(r).model_dump()))


@router.post("/learn", response_model=m.LearnResponse, responses=WRITE_ERRORS,
             dependencies=[Depends(write_scope)],
             summary="Learn from a finished episode (creates the bank)")
def learn(bank: BankName, body: m.LearnRequest, who: Tenant, svc: Service) -> Response:
    """All of the episode's writes commit together; ``usage`` counts LLM tokens spent."""
    given = body.recall.to_recall() if body.recall is not None else None
    return json_response(svc.learn(who, bank, body.episode.to_episode(), given))
