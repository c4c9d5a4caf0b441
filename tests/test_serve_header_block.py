"""``serve`` answers 431 ``headers_too_large`` to a header block over h11's 16 KiB bound
however it arrives. h11 bounds only a block whose end it is still waiting for: one that came
whole in a single read (the event loop reads up to 256 KiB at once) was served however large,
so a 60 KiB block sent on loopback was answered 200 and the same block cut by the network
431. The protocol is fed here directly, each request in one read, so nothing depends on how
the network cuts it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from uvicorn.server import ServerState

from everos_reflect.api.slow_clients import DeadlineH11Protocol
from everos_reflect.serve import uvicorn_config


class Transport(asyncio.Transport):
    """What the protocol writes, and whether it closed the connection."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = b""
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000),
                "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.sent += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"5")]})
    await send({"type": "http.response.body", "body": b"hello"})


def answer_in_one_read(request: bytes) -> tuple[bytes, bytes, bool]:
    """The status line and body the daemon's protocol answers ``request`` with, given whole
    in one read, and whether it closed the connection."""
    loop = asyncio.new_event_loop()
    try:
        protocol = DeadlineH11Protocol(uvicorn_config(hello, "127.0.0.1", 8000), ServerState(),
                                       {}, _loop=loop)
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(request)
        loop.run_until_complete(asyncio.sleep(0.05))  # let an app answer, if one was called
        protocol.connection_lost(None)
    finally:
        loop.close()
    head, _, body = transport.sent.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body, transport.closed


def request_with_header(size: int) -> bytes:
    return (b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: " + b"a" * size
            + b"\r\n\r\n")


@pytest.mark.parametrize("size", [20_000, 60_000, 200_000])
def test_a_header_block_over_16_kib_in_one_read_is_answered_431(size: int) -> None:
    line, body, closed = answer_in_one_read(request_with_header(size))
    assert line == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert json.loads(body) == {"error": {
        "code": "headers_too_large",
        "message": "the request's header block is over 16,384 bytes"}}
    assert closed


def test_a_header_block_just_within_16_kib_is_served() -> None:
    request = request_with_header(0)
    request = request_with_header(16 * 1024 - len(request))
    assert len(request) == 16 * 1024
    line, body, _ = answer_in_one_read(request)
    assert line == b"HTTP/1.1 200 OK"
    assert body == b"hello"
