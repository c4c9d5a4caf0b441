"""JSON-RPC batches over MCP stdio: a line holding a JSON array of messages (MCP 2025-03-26
servers must accept them). The SDK's transport reads one message a line and answered the
array with one Invalid Request (id null): none of its requests was ever answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from tests.test_mcp_eof import _call, _line, _opening, _serve


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
