"""HTTP clients for the ``openai`` SDK whose timeout bounds a whole response, not each read.

httpx's timeouts bound each read: a server (or proxy) that trickles its body a byte at a time
never lets one read time out, and held a call — and the Reflection run or index scan waiting
on it — for as long as it kept trickling. The LLM and the remote embedder both build their SDK
client on :func:`deadline_http_client`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from typing import Any

import openai

#: The HTTP library the SDK is built on: ``httpx`` for openai 1.x, its fork ``httpx2`` later.
_http: Any = importlib.import_module(
    openai.DefaultHttpxClient.__mro__[1].__module__.partition(".")[0])
#: The SDK's own pool limits (passing a transport replaces the one it would have made).
_CONNECTION_LIMITS = _http.Limits(max_connections=1000, max_keepalive_connections=100)


class _DeadlineTransport(_http.BaseTransport):  # type: ignore[misc]
    """Bounds a whole response to ``seconds`` from the moment its request is sent.

    httpx's timeouts bound each read, not the exchange: a server (or proxy) that trickles its
    body a byte at a time never lets one read time out, and held a call (and with it a
    Reflection run) for as long as it kept trickling. Past the deadline the body's next chunk
    raises ``ReadTimeout``, which the SDK reports as a timeout like any other.
    """

    def __init__(self, inner: Any, seconds: float, max_bytes: int | None = None) -> None:
        self._inner, self._seconds, self._max_bytes = inner, seconds, max_bytes

    def handle_request(self, request: Any) -> Any:
        deadline = time.monotonic() + self._seconds
        response = self._inner.handle_request(request)
        response.stream = _DeadlineStream(response.stream, deadline, self._seconds, request,
                                          self._max_bytes)
        return response

    def close(self) -> None:
        self._inner.close()


class ResponseTooLarge(_http.ReadError):  # type: ignore[misc]
    """A response body past the client's ``max_bytes``: cut off, never read whole."""


class _DeadlineStream(_http.SyncByteStream):  # type: ignore[misc]
    def __init__(self, stream: Any, deadline: float, seconds: float,
                 request: Any, max_bytes: int | None = None) -> None:
        self._stream, self._deadline, self._seconds = stream, deadline, seconds
        self._request, self._max_bytes = request, max_bytes

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise _http.ReadTimeout(
                    f"response still arriving after {self._seconds:g} s", request=self._request)
            received += len(chunk)
            if self._max_bytes is not None and received > self._max_bytes:
                raise ResponseTooLarge(f"response larger than {self._max_bytes:,} bytes",
                                       request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


def deadline_http_client(seconds: float, *, max_bytes: int | None = None,
                         **kwargs: Any) -> Any:
    """The SDK's default HTTP client (its pool limits, redirects, ``kwargs``) whose every
    response must be complete within ``seconds`` of its request being sent and, with
    ``max_bytes``, hold at most that many body bytes (:class:`ResponseTooLarge` past it)."""
    transport = _DeadlineTransport(_http.HTTPTransport(limits=_CONNECTION_LIMITS), seconds,
                                   max_bytes)
    return openai.DefaultHttpxClient(transport=transport, **kwargs)
