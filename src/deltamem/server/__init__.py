"""deltamem as a shared service (optional extra ``deltamem[server]``).

* :mod:`deltamem.server.app` — the FastAPI app (``create_app``);
* :mod:`deltamem.server.auth` — API keys, hashed at rest, mapped to tenants;
* :mod:`deltamem.server.banks` — where each tenant's banks live, open-bank cache;
* :mod:`deltamem.server.limits` — request body size limit;
* :mod:`deltamem.server.models` — request/response bodies (the OpenAPI spec);
* :mod:`deltamem.server.client` — :class:`Client`, the library API over HTTP
  (needs only httpx);
* :mod:`deltamem.server.cli` — ``deltamem serve``, ``deltamem view``, ``deltamem api-key``.

Nothing here is imported by ``import deltamem``.
"""
