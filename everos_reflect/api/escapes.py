"""Refuse a URL whose percent-escapes are no UTF-8 text, quoting what the client sent.

The server decodes the path and the query string before any route sees them, and a byte that
is no UTF-8 (``%ff``, a lone surrogate's ``%ed%a0%80``) became U+FFFD there: the answer
quoted back ``invalid entry id 'ep_��'`` or ``no route GET /api/v1/nope�``, which is not what
was sent and cannot be searched for in the client's code. A search term sent so (``caf%e9``,
Latin-1) was even taken as ``caf�``: a value changed without a word.

Pure ASGI, ahead of routing, like :class:`~everos_reflect.api.body_limit.BodyLimit`: the URL
itself is malformed, so the answer is 400 whatever the route (as an over-long body is 413)."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from everos_reflect.model import quoted_value, shown_key

#: How a client sends a character instead, said in every refusal.
_HOW = "send each character as the escapes of its UTF-8 bytes (é is %C3%A9)"


def _not_utf8(raw: bytes) -> bool:
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _shown(raw: bytes) -> str:
    """Bytes of a URL as the client wrote them; a byte outside ASCII (sent unescaped) as
    ``\\xff``, never decoded."""
    return raw.decode("ascii", "backslashreplace")


def url_problem(raw_path: bytes, query_string: bytes) -> str | None:
    """Why the URL's percent-escapes are no UTF-8 text, quoting the path segment or the query
    parameter as sent (``%ff`` stays ``%ff``), else ``None``."""
    for segment in raw_path.split(b"/"):
        if _not_utf8(segment):
            return (f"the URL path segment {quoted_value(_shown(segment))} (of "
                    f"{shown_key(_shown(raw_path))}) holds percent-escapes that are no UTF-8 "
                    f"text: {_HOW}")
    for pair in query_string.split(b"&"):
        key, _, value = pair.partition(b"=")
        if _not_utf8(key):
            return (f"the query parameter name {quoted_value(_shown(key))} holds "
                    f"percent-escapes that are no UTF-8 text: {_HOW}")
        if _not_utf8(value):
            return (f"the query parameter {shown_key(_shown(key))} holds "
                    f"{quoted_value(_shown(value))}, percent-escapes that are no UTF-8 text: "
                    f"{_HOW}")
    return None


class Utf8Url:
    """Answers 400 ``invalid_request`` to a request whose URL :func:`url_problem` refuses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path = scope.get("raw_path") or scope.get("path", "").encode("utf-8")
            problem = url_problem(raw_path, scope.get("query_string") or b"")
            if problem is not None:
                answer = JSONResponse({"error": {"code": "invalid_request", "message": problem}},
                                      status_code=400)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)
