"""MCP over stdio: a line (or a batch's element) that is JSON but no object (``null``,
``true``, ``"s"``, ``[[]]``'s inner array, ``1e400``) is answered Invalid Request saying a
message must be a JSON object and what it got, by its type: it said only "not a JSON-RPC 2.0
request, notification or response". The value is not echoed: a ``1e400`` is read as infinity,
a number nobody sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_mcp_eof import _opening, _serve

WHAT = ("invalid request: not a JSON-RPC 2.0 request, notification or response: a message "
        "must be a JSON object, got ")


def test_a_message_that_is_no_object_is_named_by_its_type(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + b'null\ntrue\n"s"\n1e400\n[[], 5, {"jsonrpc": "2.0", "id": 3, ' \
        b'"method": "ping"}]\n{"jsonrpc": "2.0", "id": 4, "method": "ping"}\n'
    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    alone = [a["error"]["message"] for a in answers
             if isinstance(a, dict) and a.get("id") is None]
    assert alone == [WHAT + "null", WHAT + "a boolean", WHAT + "a string", WHAT + "a number"]
    [batch] = [a for a in answers if isinstance(a, list)]
    assert [a["error"]["message"] for a in batch if "error" in a] == [
        WHAT + "an array", WHAT + "a number"]
    assert [a["id"] for a in batch if "result" in a] == [3]
    assert [a["id"] for a in answers if isinstance(a, dict) and "result" in a] == [1, 4]
