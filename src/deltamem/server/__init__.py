"""deltamem as a shared service (optional extra ``deltamem[server]``).

* :mod:`deltamem.server.app` — the FastAPI app (``create_app``), its error answers;
* :mod:`deltamem.server.routes` — the routes, one router per resource (thin: what they do
  is :class:`deltamem.service.TenantBanks`, which the MCP server shares);
* :mod:`deltamem.server.limits` — request body size limit;
* :mod:`deltamem.server.viewer` — ``deltamem view``: the tree viewer (``static/``) on a
  read-only app for one bank;
* :mod:`deltamem.server.client` — :class:`Client`, the library API over HTTP
  (needs only httpx);
The commands ``deltamem serve``, ``deltamem view`` and ``deltamem api-key`` are
:mod:`deltamem.cli.serve`.

Nothing here is imported by ``import deltamem``.
"""
