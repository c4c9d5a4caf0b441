"""MCP over stdio when the client closes stdin with requests still in flight.

A script pipes its requests and closes stdin (``printf … | everos-reflect mcp``): the SDK's
loop cancelled every request in flight at the end of its input, so ``add_episode`` wrote its
Episode and never said its id. Now every request read is answered before the server ends.
"""

from __future__ import annotations

import io
import json
import logging
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from everos_reflect.api import mcp_server, ops
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LimitsSettings, Settings

LIMIT = 4096


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _opening() -> bytes:
    return _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}) + \
        _line({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _call(request_id: int | str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}


def _serve(root: Path, piped: bytes, capfd: pytest.CaptureFixture[str], raw: bool = False,
           **kwargs: Any) -> tuple[Any, Runtime]:
    """Serve ``piped`` (stdin already at its end) in-process; the answers by id (``raw``: as
    a list, one item a line)."""
    runtime = Runtime(root, Settings(limits=LimitsSettings(max_request_bytes=LIMIT)),
                      embedder=HashEmbedder())
    try:
        anyio.run(lambda: mcp_server.serve_stdio(runtime, io.BytesIO(piped), **kwargs))
    except BaseException:
        runtime.close()
        raise
    lines = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    if raw:
        return lines, runtime
    answers: dict[Any, list[dict[str, Any]]] = {}
    for answer in lines:
        answers.setdefault(answer.get("id"), []).append(answer)
    return answers, runtime


def test_requests_piped_before_stdin_closed_are_all_answered(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = _opening() + b"".join(_line(m) for m in [
        _call(2, "add_episode", {"user_id": "u_ann", "subject": "Pets",
                                 "content": "Ann adopted a grey cat called Miso.",
                                 "timestamp": "2026-10-12T09:30:00+00:00"}),
        _call("s-3", "search", {"query": "which cat", "user_id": "u_ann"}),
    ])
    # then, just before the end, a line that is no JSON and one over the limit: each still
    # gets its error
    piped += b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list"\n'
    piped += _line(_call(5, "search", {"query": "x" * LIMIT}))

    answers, runtime = _serve(root, piped, capfd)
    try:
        episodes = runtime.store.entries(UserRef.of("u_ann"), Kind.EPISODE)
    finally:
        runtime.close()

    assert set(answers) == {1, 2, "s-3", None, 5}
    assert all(len(each) == 1 for each in answers.values())
    added = answers[2][0]["result"]["structuredContent"]
    assert [e.id for e in episodes] == [added["id"]]
    assert "episodes" in answers["s-3"][0]["result"]["structuredContent"]
    assert answers[None][0]["error"]["code"] == types.PARSE_ERROR
    assert answers[5][0]["error"]["code"] == types.INVALID_REQUEST
    assert answers[5][0]["error"]["message"].startswith("message too large: ")


def test_a_call_that_never_answers_is_answered_abandoned_once(
    root: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A call stuck after stdin closed (nobody can cancel it now) must not hold the answers
    # back for ever: once no answer came for the bound it is answered as abandoned, and its
    # own answer, should it come later, is not sent as a second one.
    released = threading.Event()

    class Release(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "abandoned" in record.getMessage():
                released.set()

    def stuck(runtime: Runtime, body: Any) -> dict[str, Any]:
        assert released.wait(timeout=60), "never abandoned"
        return {"episodes": []}

    monkeypatch.setattr(ops, "search", stuck)
    mcp_server.log.addHandler(release := Release())
    try:
        piped = _opening() + _line(_call(7, "search", {"query": "cats", "user_id": "u1"})) \
            + _line({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
        with caplog.at_level(logging.WARNING, logger="everos_reflect.mcp"):
            # the bound need only outlast the answers that come at once (initialize, list)
            answers, runtime = _serve(root, piped, capfd, quiet_seconds=1)
        runtime.close()
    finally:
        mcp_server.log.removeHandler(release)

    assert set(answers) == {1, 7, 8}
    [abandoned] = answers[7]
    assert abandoned["error"]["code"] == types.CONNECTION_CLOSED
    assert abandoned["error"]["message"] == (
        "abandoned: stdin closed and no answer came for 1 s; the call may still take "
        "effect")
    assert "tools" in answers[8][0]["result"]
    assert "abandoned 1 MCP request with no answer for 1 s: ids 7" in caplog.text


def test_a_request_cancelled_by_the_client_is_not_waited_for(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # The server never answers a request the client cancelled: waiting for that answer
    # would hold the end for the whole bound, then answer it abandoned after all.
    piped = _opening() + _line(_call(7, "search", {"query": "cats", "user_id": "u1"})) + \
        _line({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 7, "reason": "changed my mind"}})
    answers, runtime = _serve(root, piped, capfd, quiet_seconds=30)
    runtime.close()

    assert set(answers) <= {1, 7}
    assert all(a.get("error", {}).get("code") != types.CONNECTION_CLOSED
               for each in answers.values() for a in each)
