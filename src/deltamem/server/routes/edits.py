"""The inspector's edits over HTTP: change a node's text, hide, relabel, delete, undo, list.

Every route that changes a node needs a key that may write (a read-only key or the
read-only ``deltamem view`` answers 403) and returns the edit as its audit row holds it;
what each does is :mod:`deltamem.memories.deltamem.inspector`. 404: no such bank, node or
edit; 409: the node changed since the edit being undone, or a node with children deleted
without ``subtree=true``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi import Path as PathParam

from deltamem.server.routes.deps import ERRORS, WRITE_ERRORS, BankName, Editor, Service, Tenant
from deltamem.service import models as m

router = APIRouter(prefix="/v1/banks/{bank}")

NodeId = Annotated[str, PathParam(pattern=m.NODE_PATTERN, description="A node's id.")]
EditId = Annotated[str, PathParam(pattern=m.EDIT_PATTERN, description="An edit's id.")]


@router.get("/edits", response_model=m.EditsResponse, responses=ERRORS,
            summary="The inspector's edits of the bank (its audit rows), oldest first")
def list_edits(bank: BankName, who: Tenant, svc: Service) -> m.EditsResponse:
    return svc.edits(who, bank)


@router.post("/nodes/{node_id}/edit", response_model=m.EditOut, responses=WRITE_ERRORS,
             summary="Change a node's trigger (embedded again) or payload")
def edit_node(bank: BankName, node_id: NodeId, body: m.NodeEditRequest, who: Tenant,
              editor: Editor, svc: Service) -> m.EditOut:
    return svc.edit_node(who, bank, node_id, body, editor)


@router.post("/nodes/{node_id}/hide", response_model=m.EditOut, responses=WRITE_ERRORS,
             summary="Hide a node and its subtree from recall, or show them again")
def hide_node(bank: BankName, node_id: NodeId, body: m.HideRequest, who: Tenant,
              editor: Editor, svc: Service) -> m.EditOut:
    return svc.hide_node(who, bank, node_id, body.hidden, editor, body.reason)


@router.post("/nodes/{node_id}/relabel", response_model=m.EditOut, responses=WRITE_ERRORS,
             summary="Set a node's label (SUCCESS or FAILURE)")
def relabel_node(bank: BankName, node_id: NodeId, body: m.RelabelRequest, who: Tenant,
                 editor: Editor, svc: Service) -> m.EditOut:
    return svc.relabel_node(who, bank, node_id, body.label, editor, body.reason)


@router.delete("/nodes/{node_id}", response_model=m.EditOut, responses=WRITE_ERRORS,
               summary="Delete a node (with children: only with subtree=true)")
def delete_node(
    bank: BankName, node_id: NodeId, who: Tenant, editor: Editor, svc: Service,
    subtree: Annotated[bool, Query(description="Delete the node's descendants too.")] = False,
    reason: Annotated[str, Query(max_length=2000)] = "",
) -> m.EditOut:
    return svc.delete_node(who, bank, node_id, editor, subtree=subtree, reason=reason)


@router.post("/edits/{edit_id}/undo", response_model=m.EditOut, responses=WRITE_ERRORS,
             summary="Revert one edit exactly (embeddings re-computed)")
def undo_edit(bank: BankName, edit_id: EditId, body: m.UndoRequest, who: Tenant,
              editor: Editor, svc: Service) -> m.EditOut:
    return svc.undo_edit(who, bank, edit_id, editor, body.reason)
