"""Waiting in tests for what another thread (a watcher, a server) does in its own time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from everos_reflect.markdown import settling


def wait_for(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    """``condition()``'s first truthy value, polled every 50 ms for up to ``timeout`` seconds;
    after that, its last value (falsy: the caller's assert fails with it). A generous
    ``timeout`` costs nothing when the condition holds early, and keeps a loaded machine from
    failing the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


@contextmanager
def serving(app: Any, timeout: float = 20.0) -> Iterator[tuple[Any, int]]:
    """``app`` served as ``serve`` serves it (its listening socket, its uvicorn settings and
    connection guards) on a free local port, in a thread; yields the ``uvicorn.Server`` and
    the port once it is up, and stops it on leaving."""
    import uvicorn

    from everos_reflect.serve import listen_socket, uvicorn_config

    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: server.started, timeout)
        yield server, port
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


def scripted_pauses(monkeypatch: Any, steps: list[Callable[[], None]]) -> list[float]:
    """Replace :func:`everos_reflect.markdown.settling.pause` (a wait, of the store or the
    indexer, for a log a writer may still be at work on) by one that records each wait and
    plays the writer's next step in it (none left: the writer is done). Returns the waits, in
    order."""
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if steps:
            steps.pop(0)()

    monkeypatch.setattr(settling, "pause", pause)
    return pauses
