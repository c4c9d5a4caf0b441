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

#: Most digits of a declared length shown as written; past them ``9.99e+4999``, as
#: :func:`~everos_reflect.problem_words.shown_number` shows a long number.
_SHOWN_DIGITS = 15


def too_large_message(limit: int, size: int | str, *, whole: bool = True) -> str:
    """``the request body is 10,051 bytes, over limits.max_request_bytes (8,192)``: the
    body's size and the limit, as the API's other size errors say them (it said only "request
    body is over limits.max_request_bytes (8,192 bytes)"). ``whole`` False for a body refused
    before its end: its size is then "at least" what arrived. ``size`` a string: a declared
    length's digits, too many for ``int()`` (Python reads 4,300 at most)."""
    if isinstance(size, str):
        shown = (f"{int(size):,}" if len(size) <= _SHOWN_DIGITS
                 else f"{size[0]}.{size[1:3]}e+{len(size) - 1}")
    else:
        shown = f"{size:,}"
    return (f"the request body is {'' if whole else 'at least '}{shown} bytes, over "
            f"limits.max_request_bytes ({limit:,})")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        # read without its leading zeros, and more digits than the limit has is over it,
        # never read: int() of 5,000 digits raised ValueError out of the middleware
        digits = declared.lstrip(b"0") or b"0"
        if declared.isdigit() and (len(digits) > len(str(self.max_bytes))
                                   or int(digits) > self.max_bytes):
            await self._answer_413(send, digits.decode("ascii"))
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, too_large_message(
                        self.max_bytes, seen, whole=not message.get("more_body", False)))
            return message

        await self.app(scope, bounded, send)

    async def _answer_413(self, send: Send, declared: str) -> None:
        body = json.dumps({"error": {"code": "too_large", "message": too_large_message(
            self.max_bytes, declared)}}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
