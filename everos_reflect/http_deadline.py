"""HTTP clients for the ``openai`` SDK whose timeout bounds a whole response, not each read.

httpx's timeouts bound each read: a server (or proxy) that trickles its body a byte at a time
never lets one read time out, and held a call — and the Reflection run or index scan waiting
on it — for as long as it kept trickling. The LLM and the remote embedder both build their SDK
client on :func:`deadline_http_client`.
"""

from __future__ import annotations

import importlib
import math
import time
import zlib
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai

#: The HTTP library the SDK is built on: ``httpx`` for openai 1.x, its fork ``httpx2`` later.
_http: Any = importlib.import_module(
    openai.DefaultHttpxClient.__mro__[1].__module__.partition(".")[0])


class _DeadlineTransport(_http.BaseTransport):  # type: ignore[misc]
    """Bounds a whole response to ``seconds`` from the moment its request is sent.

    httpx's timeouts bound each read, not the exchange: a server (or proxy) that trickles its
    body a byte at a time never lets one read time out, and held a call (and with it a
    Reflection run) for as long as it kept trickling. Past the deadline the body's next chunk
    raises ``ReadTimeout``, which the SDK reports as a timeout like any other.
    """

    def __init__(self, inner: Any, seconds: float, max_bytes: int | None = None) -> None:
        self._inner, self._seconds, self._max_bytes = inner, seconds, max_bytes
        _bound_network(inner)

    def handle_request(self, request: Any) -> Any:
        deadline = time.monotonic() + self._seconds
        _DEADLINE.set((deadline, self._seconds))  # for this request's reads and writes
        if self._max_bytes is not None:
            request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        response = self._inner.handle_request(request)
        stream = _DeadlineStream(response.stream, deadline, self._seconds, request,
                                 self._max_bytes)
        if self._max_bytes is not None and "content-encoding" in response.headers:
            # decoded here, where the decoded bytes are counted: the HTTP library decodes
            # after the transport, so a 16 MB bound on the body let a gzip reply of 200 KB
            # inflate to 200 MB (and 1 MB to a gigabyte) before anything was checked
            codings = [c.strip().lower() for c in response.headers.get_list(
                "content-encoding", split_commas=True)]
            del response.headers["content-encoding"]
            stream = _DecodedStream(stream, codings, self._max_bytes, request)
        response.stream = stream
        return response

    def close(self) -> None:
        self._inner.close()


#: The deadline of the request this thread is making through a :class:`_DeadlineTransport`
#: (monotonic time, and the seconds it allows): every connect, read and write of it waits at
#: most until then.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("everos_http_deadline",
                                                               default=None)


def _bound_network(transport: Any) -> None:
    """Hold every socket wait of ``transport``'s connections to the deadline of the request
    they serve. The status line and headers arrive before there is a body to check: a
    server trickling headers (a byte, or a header line, well within each read's timeout)
    held a call for as long as it went on, an interactive search included. Leaves a
    transport without the HTTP library's connection pool (one a caller made) as it is."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is not None and not isinstance(backend, _DeadlineBackend):
        pool._network_backend = _DeadlineBackend(
            backend, importlib.import_module(type(pool).__module__.partition(".")[0]))


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout``, at most what is left of the current request's deadline; ``expired``
    raised once it has passed."""
    current = _DEADLINE.get()
    if current is None:
        return timeout
    deadline, seconds = current
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired(f"response not complete after {seconds:g} s")
    return left if timeout is None else min(timeout, left)


class _DeadlineBackend:
    """A network backend whose connects, reads and writes each wait at most until the
    current request's deadline (:data:`_DEADLINE`)."""

    def __init__(self, inner: Any, core: Any) -> None:
        self._inner, self._core = inner, core

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    **kwargs: Any) -> Any:
        return _DeadlineNetworkStream(self._inner.connect_tcp(
            host, port, _left(timeout, self._core.ConnectTimeout), **kwargs), self._core)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            **kwargs: Any) -> Any:
        return _DeadlineNetworkStream(self._inner.connect_unix_socket(
            path, _left(timeout, self._core.ConnectTimeout), **kwargs), self._core)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _DeadlineNetworkStream:
    def __init__(self, inner: Any, core: Any) -> None:
        self._inner, self._core = inner, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, self._core.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> Any:
        return _DeadlineNetworkStream(self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, self._core.ConnectTimeout)),
            self._core)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class UnusableResponse(_http.ReadError):  # type: ignore[misc]
    """A response body this client refuses to read on (the SDK reports it as a connection
    error, its ``__cause__`` this): too large, or in a content coding it cannot undo."""


class ResponseTooLarge(UnusableResponse):
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


#: The content codings a client with ``max_bytes`` asks for, and decodes itself
#: (:class:`_DecodedStream`); the ``zlib`` window bits of each.
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
ACCEPT_ENCODING = "gzip, deflate"
#: The most content codings one response may stack (as the HTTP library allows).
_MAX_CODINGS = 5


class _DecodedStream(_http.SyncByteStream):  # type: ignore[misc]
    """A body's content codings undone, the decoded bytes held to ``max_bytes`` as they come
    out (each step of the inflation is bounded, so no chunk can blow up in memory first)."""

    def __init__(self, stream: Any, codings: list[str], max_bytes: int, request: Any) -> None:
        self._stream, self._max_bytes, self._request = stream, max_bytes, request
        self._codings = [c for c in codings if c and c != "identity"]

    def __iter__(self) -> Iterator[bytes]:
        unknown = [c for c in self._codings if c not in _WBITS]
        if unknown or len(self._codings) > _MAX_CODINGS:
            raise UnusableResponse(
                f"response in content coding {', '.join(self._codings)[:100]}, not one asked "
                f"for ({ACCEPT_ENCODING})", request=self._request)
        chunks: Iterator[bytes] = iter(self._stream)
        for coding in reversed(self._codings):  # the last one applied is undone first
            chunks = self._inflated(chunks, coding)
        yield from chunks

    def _inflated(self, chunks: Iterator[bytes], coding: str) -> Iterator[bytes]:
        inflater = zlib.decompressobj(_WBITS[coding])
        produced, started = 0, False
        for chunk in chunks:
            data = chunk
            while data:
                room = self._max_bytes - produced + 1
                try:
                    out = inflater.decompress(data, room)
                except zlib.error as exc:
                    if coding == "deflate" and not started:  # raw deflate, without zlib's header
                        inflater, started = zlib.decompressobj(-zlib.MAX_WBITS), True
                        continue
                    raise UnusableResponse(f"response not valid {coding}: {exc}",
                                           request=self._request) from exc
                started = True
                produced += len(out)
                self._check(produced)
                if out:
                    yield out
                data = inflater.unconsumed_tail
        out = inflater.flush(self._max_bytes - produced + 1)
        self._check(produced + len(out))
        if out:
            yield out

    def _check(self, produced: int) -> None:
        if produced > self._max_bytes:
            raise ResponseTooLarge(f"response larger than {self._max_bytes:,} bytes",
                                   request=self._request)

    def close(self) -> None:
        self._stream.close()


def deadline_http_client(seconds: float, *, max_bytes: int | None = None,
                         **kwargs: Any) -> Any:
    """The SDK's default HTTP client (its pool limits, redirects, ``kwargs``, the proxy the
    environment names) whose every response must be complete within ``seconds`` of its
    request being sent and, with ``max_bytes``, hold at most that many body bytes,
    compressed and decoded (:class:`ResponseTooLarge` past it)."""
    return _DeadlineClient(seconds, max_bytes, **kwargs)


class _DeadlineClient(openai.DefaultHttpxClient):  # type: ignore[misc,valid-type]
    """The SDK's client, each transport it makes (direct, and one per proxy the environment
    names: ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``) wrapped in a
    :class:`_DeadlineTransport`. Handed a transport, the HTTP library reads no proxy from the
    environment: behind a proxy, the LLM and the remote embedder could not reach their
    server, as the SDK's own client does."""

    def __init__(self, seconds: float, max_bytes: int | None, **kwargs: Any) -> None:
        self._deadline = (seconds, max_bytes)
        super().__init__(**kwargs)

    def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _DeadlineTransport(super()._init_transport(*args, **kwargs), *self._deadline)

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _DeadlineTransport(super()._init_proxy_transport(*args, **kwargs),
                                  *self._deadline)


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a server's ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)
    asks for; None when it asks for none it says clearly. One reading for the LLM client's
    backoff and the embedder's error message."""
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            seconds = float(ms) / 1000
        elif (value := headers.get("retry-after")) is None:
            return None
        else:
            try:
                seconds = float(value)
            except ValueError:
                seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
    except (ValueError, TypeError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
