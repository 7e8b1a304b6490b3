"""``deltamem view BANK``: the service, read-only and without keys, for one bank.

The tree viewer is a static page and a small script (``deltamem/server/static``, served
under ``/viewer/`` by every app :func:`~deltamem.server.app.create_app` builds) that draw
both trees of a bank. It reads ``/v1/banks/{bank}/tree`` and, for a typed query,
``/v1/banks/{bank}/explain`` from the service that serves it, so it works under
``deltamem serve`` (with an API key typed into the page) and under ``deltamem view BANK``
(:func:`make_view_app`: a read-only local service for one bank, no key). No build step:
plain HTML, CSS and one script.

The page edits nodes (text, hide, relabel, delete, undo: the inspector,
:mod:`deltamem.memories.deltamem.inspector`) when the service lets its key write: under
``deltamem serve`` with a key whose scope is ``write``, or under ``deltamem view BANK
--edit``, which serves the bank writable behind a one-time key made at start and handed to
the page in the address's fragment (``#key=…``, never sent to the server in a URL). Plain
``deltamem view`` stays read-only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_view_app", "view"]


def make_view_app(bank: str, *, embedder: str | None = None,
                  edit_key: str | None = None) -> Any:
    """A read-only app serving one bank (file path or URL) to the viewer, without keys;
    with ``edit_key``, a writable one that needs that key (the inspector's edits).

    ``embedder`` is an embedder spec (see :func:`deltamem.embed.factory.make_embedder`);
    by default it is guessed from the bank (``hashing-N`` banks get ``hashing:N``,
    others ``minilm``). A bank built with another embedder raises
    :class:`~deltamem.errors.EmbedderMismatchError` when first read.
    """
    from deltamem.embed.factory import make_embedder
    from deltamem.server.app import create_app
    from deltamem.service.keys import KeyRing
    from deltamem.store.factory import open_store

    location = str(bank)
    store = open_store(location, readonly=True)
    try:
        name = str(store.meta().get("embedder_name") or "")
    finally:
        store.close()
    if embedder is None:
        embedder = f"hashing:{name.split('-')[1]}" if name.startswith("hashing-") else "minilm"
    keys = None if edit_key is None else KeyRing.from_keys({edit_key: "local"})
    return create_app(".", embedder=make_embedder(embedder), keys=keys,
                      readonly=edit_key is None, fixed_bank=location)


def view(bank: str, *, host: str = "127.0.0.1", port: int = 8765,
         embedder: str | None = None, edit: bool = False) -> None:  # pragma: no cover
    """Serve the viewer for ``bank`` at ``http://host:port/viewer/?bank=local`` until stopped
    (``edit``: writable, behind a one-time key in the printed address)."""
    import uvicorn

    from deltamem.service.keys import new_key

    key = new_key() if edit else None
    app = make_view_app(bank, embedder=embedder, edit_key=key)
    frag = f"#key={key}" if key else ""
    print(f"viewer: http://{host}:{port}/viewer/?bank=local{frag}  (Ctrl-C to stop)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
