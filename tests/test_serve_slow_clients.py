"""``serve``'s HTTP server holds a slow client only so long: a request that does not arrive
whole (headers or body trickled a byte at a time) is answered 408 and its connection closed;
a request received whole is answered however long its work takes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from everos_reflect.api import slow_clients
from tests.waiting import serving

#: How long a test waits for the server to cut a trickling client off (a bound, not a timing
#: assertion: the deadline in these tests is half a second).
BOUND_SECONDS = 20.0


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, then answers it back (after a pause on ``/slow``)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(1.5)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(slow_clients, "REQUEST_READ_SECONDS", 0.5)
    with serving(echo, BOUND_SECONDS) as (_, number):
        yield number


def trickle(conn: socket.socket, head: bytes) -> bytes | None:
    """Send ``head``, then one more byte every tenth of a second; everything the server sent
    once it closed the connection, or ``None`` if it still held it after the bound."""
    conn.sendall(head)
    conn.settimeout(0.1)
    got = b""
    until = time.monotonic() + BOUND_SECONDS
    while time.monotonic() < until:
        try:
            data = conn.recv(65536)
        except TimeoutError:
            try:
                conn.send(b"a")
            except OSError:  # closed under us: read what came before
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    got += conn.recv(65536)
                return got
            continue
        except OSError:
            return got
        if not data:
            return got
        got += data
    return None


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=BOUND_SECONDS)


def test_headers_sent_a_byte_at_a_time_are_answered_408_and_closed(port: int) -> None:
    with connect(port) as conn:
        got = trickle(conn, b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    assert got is not None, "the server held a client trickling its headers"
    assert got.startswith(b"HTTP/1.1 408 ")
    assert b'"code": "request_timeout"' in got


def test_a_body_sent_a_byte_at_a_time_is_answered_408_and_closed(port: int) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc"
    with connect(port) as conn:
        got = trickle(conn, head)
    assert got is not None, "the server held a client trickling its body"
    assert got.startswith(b"HTTP/1.1 408 ")


def test_a_kept_alive_connection_trickling_its_next_request_is_closed(port: int) -> None:
    with connect(port) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        first = b""
        while not first.endswith(b"hi"):
            first += conn.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        got = trickle(conn, b"GET / HTTP/1.1\r\nX-Slow: ")
    assert got is not None, "the server held a kept-alive client trickling a request"
    assert got.startswith(b"HTTP/1.1 408 ")


def test_a_request_received_whole_is_answered_however_long_its_work_takes(port: int) -> None:
    # the route sleeps three times the read deadline: the deadline is on reading, not working
    with connect(port) as conn:
        conn.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                     b"Connection: close\r\n\r\nhello")
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 ")
    assert got.endswith(b"hello")


def _answer(port: int, request: bytes) -> tuple[bytes, dict[str, Any]]:
    """The status line and JSON body of the answer to ``request`` (a connection closed)."""
    import json

    with connect(port) as conn:
        conn.sendall(request)
        got = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := conn.recv(65536):
                got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), got
    return head.split(b"\r\n")[0], json.loads(body)


@pytest.mark.parametrize(("request_bytes", "status", "message"), [
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000,  # and more to come
     b"HTTP/1.1 431 Request Header Fields Too Large",
     {"code": "headers_too_large",
      "message": "the request's header block is over 16,384 bytes"}),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
     b"HTTP/1.1 400 Bad Request",
     {"code": "invalid_http",
      "message": "the request is no valid HTTP/1.1: illegal chunk header 'zz\\r\\n'"}),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!",
     b"HTTP/1.1 400 Bad Request",
     {"code": "invalid_http",
      "message": "the request is no valid HTTP/1.1: conflicting Content-Length headers"}),
])
def test_a_request_that_is_no_valid_http_gets_a_json_error_naming_why(
        port: int, request_bytes: bytes, status: bytes, message: dict[str, str]) -> None:
    # uvicorn answered them all a plain-text 400 "Invalid HTTP request received."
    line, body = _answer(port, request_bytes)
    assert line == status
    assert body == {"error": message}


def test_the_daemon_still_answers_after_a_request_that_is_no_valid_http(port: int) -> None:
    _answer(port, b"G\xffT / HTTP/1.1\r\nHost: x\r\n\r\n")
    with connect(port) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                     b"Connection: close\r\n\r\nok")
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"ok")


CHUNKED = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
FRAMING_REFUSED = {"code": "headers_too_large", "message": (
    "the chunk extensions and trailers of the request's body are over 16,384 bytes")}


@pytest.mark.parametrize("body", [
    # 2,000 one-byte chunks, each with a 10 KB extension: 20 MB for 2,000 bytes of data
    (b"1;e=" + b"x" * 10_000 + b"\r\na\r\n") * 2_000 + b"0\r\n\r\n",
    # one chunk-size line with a 60 KB extension
    b"1;e=" + b"x" * 60_000 + b"\r\na\r\n0\r\n\r\n",
    # trailer blocks of 60 KB and of 1 MB
    b"1\r\na\r\n0\r\nX-T: " + b"y" * 60_000 + b"\r\n\r\n",
    b"1\r\na\r\n0\r\nX-T: " + b"y" * 1_000_000 + b"\r\n\r\n",
    b"1\r\na\r\n0\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"y" * 1_000) for i in range(100))
    + b"\r\n",
])
def test_chunk_extensions_and_trailers_past_16_kib_are_answered_431(port: int,
                                                                    body: bytes) -> None:
    # they were read past whatever their size (only a line h11 waited for the end of was
    # bounded): the 20 MB body was answered 200 with its 2,000 bytes
    line, answer = _answer(port, CHUNKED + body)
    assert line == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert answer == {"error": FRAMING_REFUSED}


def test_a_chunked_body_of_many_small_chunks_with_short_extensions_is_read_whole(
        port: int) -> None:
    body = b"".join(b"1;n=%d\r\n%c\r\n" % (i % 10, 97 + i % 26) for i in range(3_000))
    with connect(port) as conn:
        conn.sendall(CHUNKED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
                     + body + b"0\r\nX-Checksum: abc\r\n\r\n")
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 ")
    assert got.endswith(bytes(97 + i % 26 for i in range(3_000)))
