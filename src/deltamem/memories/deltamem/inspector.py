"""The inspector's edits of a DeltaMem bank: change a node's text, hide, relabel, delete,
undo; each change one audit row.

The functions take an open :class:`~deltamem.memories.deltamem.DeltaMem` (its methods
``edit_node``, ``hide_node``, ``relabel_node``, ``delete_node``, ``undo_edit`` and ``edits``
call them) and work without the browser or the service; the viewer's HTTP routes
(:mod:`deltamem.server.routes.inspection`) call them through
:class:`deltamem.service.TenantBanks`.

Each operation runs in one store transaction: it checks the nodes are as the caller last saw
them, writes the change, appends one audit row (:mod:`~deltamem.memories.deltamem.edit_log`:
who, when, what, every touched node before and after) and bumps the bank's edit counter;
then the bank view loads afresh. What each does:

* **edit**: a node's trigger and payload (activation, procedure, termination). A new
  trigger is embedded again through the bank's embedder (``embed_passages``, as a learn
  embeds it); a bank opened without an embedder refuses (never a stand-in vector).
* **hide** / **unhide**: a hidden node and its subtree stay stored but leave the trees:
  never matched, recalled, or written under. Unhide brings them back.
* **relabel**: SUCCESS ↔ FAILURE (a FAILURE node is penalised by ε in Eq. 6 and recalled
  as a warning).
* **delete**: removes the node. A node with children is refused
  (:class:`~deltamem.errors.EditConflictError`) unless ``subtree=True``, which removes it
  with all its descendants (as pruning does). Re-parenting the children is not offered: a
  residual is a delta on the chain above it (Eq. 7), so under another parent it would
  compose to a procedure no episode showed.
* **undo**: reverts one edit exactly: the fields the edit changed get their earlier values,
  a deleted node comes back with its id, ``seq``, counts and flags, and every embedding is
  re-computed from the restored trigger through the bank's embedder. An edit whose nodes
  changed since (a later edit not undone first) is refused
  (:class:`~deltamem.errors.EditConflictError`); an undo is itself an edit, and undoing it
  redoes the change.

Learned counts (hits, failures, last use) move with learns, not edits: an undo compares and
restores the edited fields only, except that a deletion's undo restores the counts the
nodes had when deleted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from deltamem.core.payload import Payload
from deltamem.core.tree import Node
from deltamem.embed.base import Embedder
from deltamem.errors import (
    BankReadOnlyError,
    EditConflictError,
    EmbedderError,
    InvalidInputError,
    NodeNotFound,
)
from deltamem.memories.deltamem.bank import BankView
from deltamem.memories.deltamem.edit_log import (
    ACTIONS,
    EDITS_KEY,
    POLICY,
    Edit,
    Snapshots,
    edits,
    hidden_ids,
    node_of,
    snapshot,
)
from deltamem.store.base import Store

__all__ = ["EDITED_FIELDS", "delete_node", "edit_node", "hide_node", "relabel_node",
           "undo_edit"]



class Inspected(Protocol):
    """What the inspector needs of an open :class:`~deltamem.memories.deltamem.DeltaMem`."""

    store: Store
    bank: BankView
    embedder: Embedder | None
    readonly: bool


EDITED_FIELDS = ("label", "trigger", "payload", "hidden")
"""The snapshot fields an edit changes (what an undo checks and restores)."""
TEXT_MAX = 20000
"""Characters a trigger or payload field may have."""


def _text(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > TEXT_MAX:
        raise InvalidInputError(f"{name} must be text of at most {TEXT_MAX} characters")
    return value


def _writable(mem: Inspected) -> None:
    if mem.readonly:
        raise BankReadOnlyError(f"bank {mem.store.path} is open read-only; the inspector "
                                "cannot edit it (open it without readonly)")


def _stored(mem: Inspected, node_id: str) -> Node:
    found = mem.store.nodes_by_id([node_id])
    if not found:
        raise NodeNotFound(f"no node {node_id!r} in this bank")
    return found[0]


def _subtree(mem: Inspected, root: Node) -> list[Node]:
    """``root`` and its descendants, parents first (read from the store: hidden ones too)."""
    nodes = mem.store.load_nodes()
    keep = {root.id}
    out = [root]
    for n in nodes:
        if n.parent in keep:
            keep.add(n.id)
            out.append(n)
    return out


def _embed(mem: Inspected, triggers: list[str]) -> list[Any]:
    if mem.embedder is None:
        raise EmbedderError("re-embedding a node needs the bank's embedder: open the bank "
                            "with it (a bank opened for inspection only cannot be edited)")
    return list(mem.embedder.embed_passages(triggers))


def _now_state(mem: Inspected, ids: list[str], hidden: set[str]) -> Snapshots:
    found = {n.id: n for n in mem.store.nodes_by_id(ids)}
    return {i: (snapshot(found[i], i in hidden) if i in found else None) for i in ids}


def _same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(a.get(k) == b.get(k) for k in EDITED_FIELDS)


def _commit(mem: Inspected, *, op: str, node: Mapping[str, Any], who: str, reason: str,
            before: Snapshots, after: Snapshots, undoes: str | None = None) -> Edit:
    """Check the nodes are still as ``before`` says, write ``after``, append the audit row
    and bump the edit counter, in one transaction; then reload the bank view."""
    _writable(mem)
    if not isinstance(who, str) or not who.strip():
        raise InvalidInputError("an edit needs a 'who' (the editor's name)")
    store = mem.store
    inserted = sorted((s for i, s in after.items() if before.get(i) is None and s is not None),
                      key=lambda s: int(s["seq"]))  # parents first
    vecs = iter(_embed(mem, [s["trigger"] for s in inserted]) if inserted else [])
    retexted = [i for i, s in after.items()
                if s is not None and before.get(i) is not None
                and s["trigger"] != before[i]["trigger"]]  # type: ignore[index]
    new_vecs = dict(zip(retexted, _embed(mem, [after[i]["trigger"] for i in retexted]),  # type: ignore[index]
                        strict=True)) if retexted else {}
    edit = Edit(id=f"ed-{uuid.uuid4().hex[:16]}", op=op, node_id=str(node["id"]),
                tree=str(node["tree"]), who=who.strip(), at=time.time(), reason=reason,
                before=before, after=after, undoes=undoes)
    with store.transaction():
        rows = store.audit()
        now = _now_state(mem, list(before), hidden_ids(store, rows))
        for i, snap in before.items():
            if not _same(now[i], snap):
                raise EditConflictError(
                    f"node {i} changed since (a later edit?): undo the later edits first"
                    if snap is not None else f"node {i} exists again: nothing to restore")
        gone = [i for i, s in after.items() if s is None and before.get(i) is not None]
        if gone:
            store.delete_nodes(gone)
        for snap in inserted:
            parent = snap["parent"]
            if parent is not None and parent not in after and not store.nodes_by_id([parent]):
                raise EditConflictError(f"node {snap['id']}'s parent {parent} is gone: undo "
                                        "its deletion first")
            store.insert_node(node_of(snap, next(vecs)), keep_seq=True)
        for i, snap in after.items():
            prev = before.get(i)
            if snap is None or prev is None:
                continue
            if any(snap[k] != prev[k] for k in ("label", "trigger", "payload")):
                current = store.nodes_by_id([i])[0]
                store.update_node(i, label=snap["label"], trigger=snap["trigger"],
                                  payload=Payload.from_dict(snap["payload"]),
                                  embedding=new_vecs.get(i, current.embedding))
        store.add_audit(episode_id="", node_id=edit.node_id, tree=edit.tree,
                        action=ACTIONS[op], policy=POLICY, reason=reason,
                        record=edit.record(), created_at=edit.at)
        store.set_meta(EDITS_KEY, str(int(store.meta().get(EDITS_KEY) or 0) + 1))
    mem.bank.reset()
    return edit


def _one(mem: Inspected, node_id: str) -> tuple[Node, dict[str, Any]]:
    node = _stored(mem, node_id)
    return node, snapshot(node, node.id in hidden_ids(mem.store))


def edit_node(mem: Inspected, node_id: str, *, who: str, trigger: str | None = None,
              activation: str | None = None, procedure: str | None = None,
              termination: str | None = None, reason: str = "") -> Edit:
    """Change a node's trigger and/or payload fields (``None``: keep); a new trigger is
    embedded again. Returns the edit (an edit that changes nothing is refused)."""
    node, before = _one(mem, node_id)
    after = {**before, "payload": dict(before["payload"])}
    if (t := _text("trigger", trigger)) is not None:
        if not t.strip():
            raise InvalidInputError("a node's trigger cannot be empty")
        after["trigger"] = t
    for name, key, value in (("activation", "activation_condition", activation),
                             ("procedure", "execution_procedure", procedure),
                             ("termination", "termination_condition", termination)):
        if (v := _text(name, value)) is not None:
            after["payload"][key] = v
    if _same(before, after):
        raise InvalidInputError(f"the edit changes nothing of node {node_id}")
    return _commit(mem, op="edit", node=before, who=who, reason=reason,
                   before={node.id: before}, after={node.id: after})


def hide_node(mem: Inspected, node_id: str, *, who: str, hidden: bool = True,
              reason: str = "") -> Edit:
    """Hide a node and its subtree from recall (``hidden=False``: show them again)."""
    node, before = _one(mem, node_id)
    if before["hidden"] == hidden:
        raise InvalidInputError(f"node {node_id} is already {'hidden' if hidden else 'shown'}")
    return _commit(mem, op="hide" if hidden else "unhide", node=before, who=who,
                   reason=reason, before={node.id: before},
                   after={node.id: {**before, "hidden": hidden}})


def relabel_node(mem: Inspected, node_id: str, label: str, *, who: str,
                 reason: str = "") -> Edit:
    """Set a node's label to ``SUCCESS`` or ``FAILURE``."""
    if label not in ("SUCCESS", "FAILURE"):
        raise InvalidInputError(f"label must be SUCCESS or FAILURE, not {label!r}")
    node, before = _one(mem, node_id)
    if before["label"] == label:
        raise InvalidInputError(f"node {node_id} is already {label}")
    return _commit(mem, op="relabel", node=before, who=who, reason=reason,
                   before={node.id: before}, after={node.id: {**before, "label": label}})


def delete_node(mem: Inspected, node_id: str, *, who: str, subtree: bool = False,
                reason: str = "") -> Edit:
    """Remove a node; one with children only with ``subtree=True`` (then with all its
    descendants), else :class:`~deltamem.errors.EditConflictError`."""
    node = _stored(mem, node_id)
    nodes = _subtree(mem, node)
    if len(nodes) > 1 and not subtree:
        raise EditConflictError(
            f"node {node_id} has {len(nodes) - 1} descendant(s); delete the subtree "
            "(subtree=True) or its children first (a residual means nothing under "
            "another parent, so children are not re-parented)")
    hidden = hidden_ids(mem.store)
    before: Snapshots = {n.id: snapshot(n, n.id in hidden) for n in nodes}
    return _commit(mem, op="delete", node=before[node.id] or {}, who=who, reason=reason,
                   before=before, after=dict.fromkeys(before))


def undo_edit(mem: Inspected, edit_id: str, *, who: str, reason: str = "") -> Edit:
    """Revert the edit ``edit_id`` (see the module doc); returns the undo's own edit."""
    target = next((e for e in edits(mem.store) if e.id == edit_id), None)
    if target is None:
        raise NodeNotFound(f"no inspector edit {edit_id!r} in this bank")
    after: Snapshots = {}
    for i, snap in target.before.items():
        now = target.after.get(i)
        if snap is None or now is None:
            after[i] = snap
        else:  # the edited fields go back; counts stay as learns left them
            after[i] = {**now, **{k: snap[k] for k in EDITED_FIELDS}}
    before: Snapshots = dict(target.after)
    stored = {n.id: n for n in mem.store.nodes_by_id([i for i, s in before.items() if s])}
    hidden = hidden_ids(mem.store)
    for i, snap in before.items():  # the current counts, so the undo's row is exact
        now = snapshot(stored[i], i in hidden) if i in stored else None
        if not _same(now, snap):
            raise EditConflictError(
                f"node {i} changed since edit {edit_id} (a later edit?): undo the later "
                "edits first" if snap is not None else
                f"node {i} exists again: nothing to restore")
        if snap is not None and now is not None:
            before[i] = now
            if after[i] is not None and target.before.get(i) is not None:
                after[i] = {**before[i], **{k: target.before[i][k]  # type: ignore[index]
                                            for k in EDITED_FIELDS}}
    head = {"id": target.node_id, "tree": target.tree}
    return _commit(mem, op="undo", node=head, who=who, reason=reason, before=before,
                   after=after, undoes=target.id)
