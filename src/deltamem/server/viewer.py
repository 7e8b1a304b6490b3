"""``deltamem view BANK``: the service, read-only and without keys, for one bank.

The tree viewer is a static page and a small script (``deltamem/server/static``, served
under ``/viewer/`` by every app :func:`~deltamem.server.app.create_app` builds) that draw
both trees of a bank. It reads ``/v1/banks/{bank}/tree`` and, for a typed query,
``/v1/banks/{bank}/explain`` from the service that serves it, so it works under
``deltamem serve`` (with an API key typed into the page) and under ``deltamem view BANK``
(:func:`make_view_app`: a read-only local service for one bank, no key). No build step:
plain HTML, CSS and one script.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_view_app", "view"]


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
