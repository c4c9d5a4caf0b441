"""JSON-RPC batches over MCP stdio: a line holding a JSON array of messages (MCP 2025-03-26
servers must accept them). The SDK's transport reads one message a line and answered the
array with one Invalid Request (id null): none of its requests was ever answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from tests.test_mcp_eof import LIMIT, _call, _line, _opening, _serve


def test_a_batch_is_answered_with_one_array_holding_each_answer(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    batch = [
        _call(2, "add_episode", {"user_id": "u_ann", "subject": "Pets",
                                 "content": "Ann adopted a grey cat called Miso.",
                                 "timestamp": "2026-10-12T09:30:00+00:00"}),
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},  # a notification: no answer
        _call(3, "search", {"user_id": "u_ann"}),  # no query: its tool error
        42,  # no message: Invalid Request, id null
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},  # no usable id: the same
    ]
    piped = _opening() + json.dumps(batch).encode() + b"\n" + \
        _line({"jsonrpc": "2.0", "id": 4, "method": "ping"})

    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    [array] = [a for a in answers if isinstance(a, list)]
    assert sorted(a["id"] for a in answers if a is not array) == [1, 4]  # nothing else alone
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for answer in array:
        by_id.setdefault(answer["id"], []).append(answer)
    assert set(by_id) == {2, "p", 3, None}
    assert by_id[2][0]["result"]["structuredContent"]["id"].startswith("ep_20261012_")
    assert by_id["p"][0]["result"] == {}
    assert by_id[3][0]["error"]["code"] == types.INVALID_PARAMS
    assert [a["error"]["code"] for a in by_id[None]] == [types.INVALID_REQUEST] * 2
    assert "got a number with a fraction" in by_id[None][1]["error"]["message"]


def test_a_batch_of_notifications_is_answered_nothing_and_an_empty_one_an_error(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = _opening() + b'[{"jsonrpc": "2.0", "method": "notifications/whatever"}]\n[]\n'

    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    assert [a["id"] for a in answers] == [1, None]
    assert answers[1]["error"]["code"] == types.INVALID_REQUEST


def test_a_lone_surrogate_in_a_batch_is_refused_and_the_server_goes_on(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """``"\\ud83d"`` (what JavaScript's JSON.stringify writes for an emoji cut in two) in a
    batch's id or method: Python's json reads it, the answer echoing it could not be written
    as UTF-8, and the whole server died, every later request unanswered."""
    batch = ('[{"jsonrpc": "2.0", "id": "\\ud83d", "method": "ping"},'
             ' {"jsonrpc": "2.0", "id": 2, "method": "\\ud83d"},'
             ' {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": {"\\udc00": 1}}},'
             ' {"jsonrpc": "2.0", "method": "notifications/cancelled",'
             '  "params": {"requestId": 9, "reason": "\\ud83d"}},'
             ' {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "search",'
             '  "arguments": {"user_id": "u_ann", "query": "cut \\ud83d"}}},'
             ' {"params": {"name": "search", "arguments": {"query": "\\ud83d"}},'  # id last
             '  "jsonrpc": "2.0", "id": "\\udc01", "method": "tools/call"}]')
    too_large = b'{"jsonrpc": "2.0", "id": "\\ud83d", "method": "ping", "params": {"x": "' + \
        b"x" * LIMIT + b'"}}\n'  # refused, its id unusable: answered with id null
    piped = _opening() + batch.encode() + b"\n" + too_large + \
        _line({"jsonrpc": "2.0", "id": 5, "method": "ping"})

    answers, runtime = _serve(root, piped, capfd, raw=True)
    runtime.close()

    [array] = [a for a in answers if isinstance(a, list)]
    assert [a["id"] for a in answers if a is not array] == [1, None, 5]
    errors = {a["id"]: a["error"] for a in array}
    assert sorted(map(str, [a["id"] for a in array])) == ["2", "3", "4", "None", "None"]
    assert [a["error"]["message"] for a in array if a["id"] is None] == [
        f"invalid request: id holds U+{c}, a lone UTF-16 surrogate (half of a character): "
        "not text" for c in ("D83D", "DC01")]
    assert errors[2]["message"].startswith("invalid request: method holds U+D83D")
    assert errors[3]["message"].startswith("invalid request: params._meta key '\\udc00' holds")
    assert errors[4] == {  # in a tool's arguments: the tool's own error, as over HTTP
        "code": types.INVALID_PARAMS, "data": {"code": "invalid_request", "status": 422},
        "message": "query: holds U+D83D, a lone UTF-16 surrogate (half of a character): "
                   "not text"}
