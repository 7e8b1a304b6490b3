"""``deltamem mcp``: serve banks to MCP clients over stdio (local) or streamable HTTP (shared).

The main CLI adds it with ``register(app)``; nothing here imports the MCP SDK until the
command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deltamem.cli import options as opts
from deltamem.cli.options import Domain, Host, Keys


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the ``deltamem`` Typer app."""
    app.command("mcp")(mcp)


def mcp(
    target: Annotated[str, typer.Argument(
        metavar="BANK|STORAGE",
        help="One bank (a .db file, or a postgresql://…?bank=KEY URL) for a local agent, or a "
             "storage (a folder of banks, or a postgresql:// URL) as `deltamem serve` uses.")],
    http: Annotated[bool, typer.Option(
        "--http", help="Serve streamable HTTP (shared, API keys) instead of stdio.")] = False,
    keys: Keys = Path("deltamem-keys.json"),
    host: Host = "127.0.0.1",
    port: Annotated[int, opts.PORT()] = 8001,
    path: Annotated[str, typer.Option(help="URL path of the MCP endpoint (--http).")] = "/mcp",
    tenant: Annotated[str, typer.Option(
        help="stdio: whose banks a storage holds (the folder <storage>/<tenant>/).")] = "local",
    bank: Annotated[str, typer.Option(help="Bank of calls that name none (storage).")] = "default",
    embedder: Annotated[str, opts.EMBEDDER()] = "minilm",
    extractor: Annotated[str, opts.EXTRACTOR()] = "structural",
    llm: Annotated[str | None, opts.LLM("none; --extractor llm needs one")] = None,
    domain: Domain = "generic",
    judge: Annotated[str | None, opts.JUDGE(
        "none: every learn must give its success; a judge decides learns that give none")] = None,
) -> None:
    """Serve banks to MCP clients: tools recall, learn, stats, tree, banks; banks as resources.

    On stdio by default; with --http, streamable HTTP on --host and --port, each call
    with an API key from --keys.
    """
    import logging
    import sys

    from deltamem.domains import get_domain
    from deltamem.embed.factory import make_embedder
    from deltamem.errors import ConfigError

    try:
        from deltamem.integrations.mcp.server import build_server, http_app
        from deltamem.integrations.mcp.tools import BankService, is_single_bank
    except ModuleNotFoundError as e:
        raise ConfigError(f"`deltamem mcp` needs the MCP SDK ({e.name} is missing): "
                          "pip install 'deltamem[mcp]'") from None
    get_domain(domain)
    if http and is_single_bank(target):
        raise ConfigError("--http serves many tenants: give a storage (a folder or a "
                          "postgresql:// URL without bank=), not one bank")
    from deltamem.extract.factory import make_extractor

    ext, llm_client = make_extractor(extractor, llm)
    ring = None
    if http:
        from deltamem.service.keys import KeyRing

        ring = KeyRing.from_file(keys)
        if not len(ring):
            raise ConfigError(f"{keys} holds no keys; add one with `deltamem api-key TENANT`")
    # stdout is the protocol channel on stdio: logs go to stderr only
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    judge_obj = None
    if judge is not None:
        from deltamem.judge import LLMJudge, make_judge

        judge_obj = (LLMJudge(llm_client) if llm_client is not None and judge == llm
                     else make_judge(judge))
    service = BankService(target, embedder=make_embedder(embedder), extractor=ext,
                          llm=llm_client, config={"domain": domain}, default_bank=bank,
                          judge=judge_obj)
    server = build_server(service, keys=ring, tenant=tenant)
    try:
        if not http:
            server.run("stdio")
            return
        import uvicorn

        assert ring is not None
        app = http_app(server, ring, host=host, path=path)
        typer.echo(f"deltamem MCP server on http://{host}:{port}{path}", err=True)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        service.close()
