"""Request body size limit, enforced before anything is parsed.

A body whose ``Content-Length`` exceeds the limit is refused at once; a body
without one (chunked) is read (at most the limit is buffered) and refused as
soon as it goes over. Either way the answer is 413 and the endpoint never runs.
"""

from __future__ import annotations

import json
from typing import Any

ASGIApp = Any


class BodyLimit:
    """ASGI middleware: 413 for request bodies larger than ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    await self._refuse(send, 400, "Content-Length is not a number")
                    return
                if too_big:
                    await self._refuse(send, 413, self._message())
                    return
        chunks: list[bytes] = []
        seen = 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":  # client went away: let the app see it
                break
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await self._refuse(send, 413, self._message())
                return
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return f"request body larger than the limit of {self.max_bytes} bytes"

    @staticmethod
    async def _refuse(send: Any, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

