"""Run an ASGI app with uvicorn in a background thread (tests, benchmarks, notebooks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from deltamem.errors import DeltaMemError


@contextmanager
def running(app: Any, *, host: str = "127.0.0.1", port: int = 0,
            timeout: float = 30.0) -> Iterator[str]:
    """Serve ``app`` on ``host`` (a free port when ``port`` is 0); yields its base URL.

    The server stops when the block ends. Raises :class:`DeltaMemError` if it
    does not start within ``timeout`` seconds.
    """
    import uvicorn

    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, name="deltamem-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise DeltaMemError(f"server on {host}:{port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
