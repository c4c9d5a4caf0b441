"""MCP over stdio: JSON that is no JSON-RPC 2.0 message is answered Invalid Request naming
what is wrong (``jsonrpc must be "2.0", got "1.0"``, ``params must be an object``), with the
request's id; every such answer said "not a JSON-RPC 2.0 request, notification or response"
and named nothing to fix. Alone on a line and in a batch alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_mcp_eof import _opening, _serve

WHAT = "invalid request: not a JSON-RPC 2.0 request, notification or response"


@pytest.mark.parametrize(("message", "said"), [
    ({"jsonrpc": "1.0", "id": 6, "method": "ping"}, f'{WHAT}: jsonrpc must be "2.0", got a '
                                                      'string: "1.0"'),
    ({"id": 6, "method": "ping"}, f'{WHAT}: jsonrpc must be "2.0", got none'),
    ({"jsonrpc": 2.0, "id": 6, "method": "ping"},
     f'{WHAT}: jsonrpc must be "2.0", got a number: 2.0'),
    ({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": []},
     f"{WHAT}: params must be an object, got an array: []"),
    ({"jsonrpc": "2.0", "id": 6, "method": 42}, f"{WHAT}: method must be a string, got a "
                                                 "number: 42"),
    ({"jsonrpc": "2.0", "id": 6},
     f"{WHAT}: it has no method (a request or notification), nor a result or error"),
])
def test_the_problem_is_named_alone_and_in_a_batch(
        root: Path, capfd: pytest.CaptureFixture[str], message: dict[str, object],
        said: str) -> None:
    in_batch = {**message, "id": 7}
    piped = _opening() + (json.dumps(message) + "\n" + json.dumps([in_batch]) + "\n").encode()
    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()
    [alone] = [a for a in answers if isinstance(a, dict) and a.get("id") == 6]
    [[batched]] = [a for a in answers if isinstance(a, list)]
    assert alone["error"] == {"code": -32600, "message": said}
    assert batched["id"] == 7 and batched["error"] == {"code": -32600, "message": said}
