"""The HTTP routes, one router per resource: :mod:`.meta` (health, front page),
:mod:`.banks` (list, delete), :mod:`.memory` (recall, learn), :mod:`.inspection` (stats, tree,
explain), :mod:`.transfer` (export, import), :mod:`.edits` (the inspector's edits).
:mod:`.deps` holds what they all take."""

from deltamem.server.routes import banks, edits, inspection, memory, meta, transfer

ROUTERS = (meta.router, banks.router, memory.router, inspection.router, transfer.router,
           edits.router)
"""In the order of the OpenAPI spec."""

__all__ = ["ROUTERS"]
