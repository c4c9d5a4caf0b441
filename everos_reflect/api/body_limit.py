"""Refuse request bodies over ``limits.max_request_bytes`` before they are read whole.

Pure ASGI, so it sees the body as it streams in: a declared ``Content-Length`` over the limit
is answered 413 at once, and a body that keeps coming past the limit (chunked, or a lying
length) is cut off by raising a 413 ``HTTPException`` from ``receive`` — inside the app, so the
API's own handler words the answer like every other error. (FastAPI's ``max_body_size`` answers
a declared length in plain text, not in the API's JSON error shape.)
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def too_large_message(limit: int) -> str:
    return f"request body is over limits.max_request_bytes ({limit:,} bytes)"


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._answer_413(send)
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, too_large_message(self.max_bytes))
            return message

        await self.app(scope, bounded, send)

    async def _answer_413(self, send: Send) -> None:
        body = json.dumps({"error": {"code": "too_large",
                                     "message": too_large_message(self.max_bytes)}}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
