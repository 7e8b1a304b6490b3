"""The tree viewer: a static page and a small script that draw both trees of a bank.

The page (``static/index.html``) reads ``/v1/banks/{bank}/tree`` and, for a typed
query, ``/v1/banks/{bank}/explain`` from the service that serves it, so it works
under ``deltamem serve`` (with an API key typed into the page) and under
``deltamem view BANK`` (a read-only local service for one bank, no key). No
build step: plain HTML, CSS and one script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"

__all__ = ["STATIC", "make_view_app", "mount", "view"]


def mount(app: Any) -> None:
    """Serve the page under ``/viewer/`` of a FastAPI app."""
    from fastapi.staticfiles import StaticFiles

    if not (STATIC / "index.html").exists():
        from deltamem.errors import ConfigError

        raise ConfigError(f"viewer files are missing from {STATIC} (broken install)")
    app.mount("/viewer", StaticFiles(directory=STATIC, html=True), name="viewer")


def make_view_app(bank: str, *, embedder: str | None = None) -> Any:
    """A read-only app serving one bank (file path or URL) to the viewer, without keys.

    ``embedder`` is an embedder spec (see :func:`deltamem.embed.factory.make_embedder`);
    by default it is guessed from the bank (``hashing-N`` banks get ``hashing:N``,
    others ``minilm``). A bank built with another embedder raises
    :class:`~deltamem.errors.EmbedderMismatchError` when first read.
    """
    from deltamem.embed.factory import make_embedder
    from deltamem.server.app import create_app
    from deltamem.store.factory import open_store

    location = str(bank)
    store = open_store(location, readonly=True)
    try:
        name = str(store.meta().get("embedder_name") or "")
    finally:
        store.close()
    if embedder is None:
        embedder = f"hashing:{name.split('-')[1]}" if name.startswith("hashing-") else "minilm"
    return create_app(
        ".", embedder=make_embedder(embedder), keys=None, readonly=True, fixed_bank=location
    )


def view(bank: str, *, host: str = "127.0.0.1", port: int = 8765,
         embedder: str | None = None) -> None:  # pragma: no cover - runs a server
    """Serve the viewer for ``bank`` at ``http://host:port/viewer/?bank=local`` until stopped."""
    import uvicorn

    app = make_view_app(bank, embedder=embedder)
    print(f"viewer: http://{host}:{port}/viewer/?bank=local  (Ctrl-C to stop)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
