"""JSON-RPC 2.0 over the MCP stdio transport: a line that is not JSON gets a Parse error
(-32700, id null) and one that is JSON but no JSON-RPC message an Invalid Request (-32600);
the server goes on with the next line. The SDK's transport handed the parse failure to the
server, which logged it and answered nothing, so a client waited for ever."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from mcp import types

from tests.test_mcp import _params


def test_a_malformed_line_is_answered_and_the_server_goes_on(root: Path) -> None:
    params = _params(root)
    proc = subprocess.Popen([params.command, *params.args], env={**os.environ, **params.env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None

    def send(text: str) -> None:
        proc.stdin.write(text.encode() + b"\n")
        proc.stdin.flush()

    replies: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [replies.put(line) for line in proc.stdout],
                     daemon=True).start()

    def receive() -> dict[str, Any]:
        try:  # a server that answers nothing must fail the test, not hang it
            return json.loads(replies.get(timeout=30))
        except queue.Empty:
            raise AssertionError("no reply within 30 s") from None

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}))
        assert receive()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

        send('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"')  # cut short
        parse = receive()
        assert parse["id"] is None and parse["error"]["code"] == types.PARSE_ERROR
        assert parse["error"]["message"].startswith("parse error: the line is not JSON (")

        send("")  # a blank line between messages is not a message: nothing to answer
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": 42}))
        invalid = receive()
        assert invalid["id"] == 3 and invalid["error"]["code"] == types.INVALID_REQUEST
        assert invalid["error"]["message"] == (  # what is wrong named since session 49
            "invalid request: not a JSON-RPC 2.0 request, notification or response: method "
            "must be a string, got a number: 42")
        send("[1, 2]")  # a batch of two things that are no message: an array of two errors
        assert [(a["id"], a["error"]["code"]) for a in receive()] == \
            [(None, types.INVALID_REQUEST)] * 2

        # MCP ids are strings or integers: a request with another id was read as a
        # notification (its id dropped) and never answered.
        for bad in ("1.5", "null", "true", '{"a": 1}', "1e400"):
            send(f'{{"jsonrpc": "2.0", "id": {bad}, "method": "ping"}}')
            answer = receive()
            assert answer["id"] is None and answer["error"]["code"] == types.INVALID_REQUEST
            assert "the id must be a string or an integer, got " in answer["error"]["message"]

        send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        listed = receive()
        assert listed["id"] == 4 and "tools" in listed["result"]
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def test_a_request_with_a_lone_surrogate_is_answered_under_its_own_id(
    root: Path, capfd: Any
) -> None:
    """``"\\ud83d"`` (what JavaScript's JSON.stringify writes for an emoji cut in two) is JSON
    to RFC 8259 and to Python, not to the SDK's parser: a request holding one was answered a
    Parse error with id null ("the line is not JSON"), so the client never heard back about
    its id, where the same request in a batch, or over HTTP, got the field's 422."""
    from tests.test_mcp_eof import _line, _opening, _serve

    piped = _opening() + b"".join([
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search",'
        b' "arguments": {"user_id": "u_ann", "query": "cut \\ud83d"}}}\n',
        b'{"jsonrpc": "2.0", "id": "\\udc00", "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": 3, "method": "\\ud83d"}\n',
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled",'
        b' "params": {"requestId": 7, "reason": "\\ud83d"}}\n',  # a notification: no answer
        b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"x": "\\ud83d\\ude00"}}\n',
    ]) + _line({"jsonrpc": "2.0", "id": 5, "method": "ping"})

    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    by_id = {a["id"]: a for a in answers}  # a tool call answers when its thread is done
    assert sorted(map(str, [a["id"] for a in answers])) == ["1", "2", "3", "4", "5", "None"]
    assert by_id[2]["error"] == {
        "code": types.INVALID_PARAMS, "data": {"code": "invalid_request", "status": 422},
        "message": "query: holds U+D83D, a lone UTF-16 surrogate (half of a character): "
                   "not text"}
    assert by_id[None]["error"]["message"] == (
        "invalid request: id holds U+DC00, a lone UTF-16 surrogate (half of a character): "
        "not text")
    assert by_id[3]["error"]["message"].startswith("invalid request: method holds U+D83D")
    assert by_id[4]["result"] == {} and by_id[5]["result"] == {}  # a pair is one emoji
