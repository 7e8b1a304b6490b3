"""``deltamem serve``, ``deltamem view`` and ``deltamem api-key``: thin wrappers.

The main CLI adds them with ``register(app)`` (this module imports neither
FastAPI nor uvicorn until a command runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deltamem.cli import options as opts
from deltamem.cli.options import Bank, Domain, Host, Keys


def register(app: typer.Typer) -> None:
    """Add the service commands to the ``deltamem`` Typer app."""
    app.command("serve")(serve)
    app.command("view")(view)
    app.command("api-key")(api_key)


def serve(
    storage: Annotated[
        str, typer.Argument(help="Folder of SQLite banks, or a postgresql://… URL.")
    ],
    keys: Keys = Path("deltamem-keys.json"),
    host: Host = "127.0.0.1",
    port: Annotated[int, opts.PORT()] = 8000,
    embedder: Annotated[str, opts.EMBEDDER()] = "minilm",
    extractor: Annotated[str, opts.EXTRACTOR()] = "structural",
    llm: Annotated[str | None, opts.LLM("none; --extractor llm needs one")] = None,
    domain: Domain = "generic",
    max_body: Annotated[int, typer.Option(help="Largest request body in bytes.")] = 4 << 20,
) -> None:
    """Serve banks over HTTP (recall, learn, stats, tree, export, import) and the viewer."""
    import uvicorn

    from deltamem.embed.factory import make_embedder
    from deltamem.errors import ConfigError
    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port must be in 0..65535, not {port}")
    is_folder = not storage.startswith(("postgresql://", "postgres://"))
    if is_folder and Path(storage).exists() and not Path(storage).is_dir():
        raise ConfigError(f"storage {storage} is a file; give a folder (or a postgresql:// URL)")
    ring = KeyRing.from_file(keys)
    if not len(ring):
        raise ConfigError(f"{keys} holds no keys; add one with `deltamem api-key TENANT`")
    from deltamem.extract.factory import make_extractor

    ext, llm_client = make_extractor(extractor, llm)
    if is_folder:
        try:
            Path(storage).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create storage folder {storage}: {e.strerror}") from e
    app = create_app(
        storage,
        embedder=make_embedder(embedder),
        keys=ring,
        extractor=ext,
        llm=llm_client,
        config={"domain": domain},
        max_body_bytes=max_body,
    )
    typer.echo(f"deltamem service on http://{host}:{port}  (docs: /docs, viewer: /viewer/)")
    uvicorn.run(app, host=host, port=port, log_level="warning")


def view(
    bank: Bank,
    port: Annotated[int, opts.PORT()] = 8765,
    embedder: Annotated[
        str | None, opts.EMBEDDER("the bank's: hashing:DIM for a hashing bank, else minilm")
    ] = None,
    edit: Annotated[bool, typer.Option(
        "--edit", help="Let the page edit, hide, relabel, delete and undo nodes (each change "
        "an audit row), behind a one-time key in the printed address.")] = False,
) -> None:
    """Show both trees of a bank in the browser (read-only unless --edit, on 127.0.0.1)."""
    from deltamem.server.viewer import view as run_view

    run_view(bank, port=port, embedder=embedder, edit=edit)


def api_key(
    tenant: Annotated[str, typer.Argument(help="Tenant the key belongs to.")],
    keys: Keys = Path("deltamem-keys.json"),
    note: Annotated[str, typer.Option(help="Free text stored with the hash.")] = "",
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="The key may only read: recall, stats, tree, export, the "
        "viewer (no learn, import, delete or inspector edits).")] = False,
) -> None:
    """Create an API key for a tenant; prints it once (only its hash is stored)."""
    from deltamem.service.keys import add_key

    typer.echo(add_key(keys, tenant, note, scope="read" if read_only else "write"))
