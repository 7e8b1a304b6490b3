"""deltamem as a Model Context Protocol server (``deltamem mcp``; extra ``deltamem[mcp]``).

* :mod:`.tools` — the tools' logic over the bank service (:mod:`deltamem.service`; no MCP
  import);
* :mod:`.server` — the MCP server (official ``mcp`` SDK): tools, resources, the HTTP key gate;
* the command ``deltamem mcp`` is :mod:`deltamem.cli.mcp`.

Importing this package imports neither the SDK nor FastAPI.
"""
