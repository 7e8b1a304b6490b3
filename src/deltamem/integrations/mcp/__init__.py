"""deltamem as a Model Context Protocol server (``deltamem mcp``; extra ``deltamem[mcp]``).

* :mod:`.service` — the tools' logic over tenant-scoped banks (no MCP import);
* :mod:`.server` — the MCP server (official ``mcp`` SDK): tools, resources, the HTTP key gate;
* :mod:`.cli` — ``deltamem mcp``.

Importing this package imports neither the SDK nor FastAPI.
"""
