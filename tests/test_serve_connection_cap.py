"""``serve`` holds a bounded number of connections: clients that connect and send nothing
each held a file descriptor until their read deadline, and enough of them exhausted the
daemon's descriptors. One connection beyond the bound is answered 503 with a JSON error and
closed; once a connection is let go, the next client is served."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from everos_reflect.api import slow_clients
from tests.waiting import serving

#: A bound on waiting for the server, not a timing assertion.
BOUND_SECONDS = 20.0
REQUEST = b"GET /ping HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"


async def ping(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"4")]})
    await send({"type": "http.response.body", "body": b"pong"})


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[uvicorn.Server, int]]:
    monkeypatch.setattr(slow_clients, "MAX_CONNECTIONS", 2)
    with serving(ping, BOUND_SECONDS) as served:
        yield served


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=BOUND_SECONDS)


def held(server: uvicorn.Server, count: int) -> bool:
    deadline = time.monotonic() + BOUND_SECONDS
    while time.monotonic() < deadline:
        if len(server.server_state.connections) == count:
            return True
        time.sleep(0.02)
    return False


def answer(conn: socket.socket) -> bytes:
    """Send a request and read until the server closes the connection."""
    conn.sendall(REQUEST)
    got = b""
    while data := conn.recv(65536):
        got += data
    return got


def test_a_connection_beyond_the_bound_is_answered_503_and_the_next_one_served(
        server: tuple[uvicorn.Server, int]) -> None:
    uv, port = server
    idle = [connect(port), connect(port)]  # connected, sending nothing
    try:
        assert held(uv, 2)
        with connect(port) as extra:
            got = answer(extra)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), got
        error = json.loads(body)["error"]
        assert error["code"] == "too_many_connections"
        assert error["message"].startswith("the daemon holds 2 connections already")

        idle.pop().close()
        assert held(uv, 1)
        with connect(port) as next_one:
            assert answer(next_one).endswith(b"\r\n\r\npong")
    finally:
        for conn in idle:
            conn.close()
