"""MCP requests the SDK refuses before any tool runs are answered with the reason.

The SDK answered a ``tools/call`` whose ``arguments`` is no object or that names no tool, a
spec method's malformed params, and every request but ``ping`` sent before ``initialize``,
with one bare "Invalid request parameters": a client could not tell a wrong call from a
missing handshake. The code stays ``-32602``; the message names the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import types

from tests.test_mcp_eof import _call, _line, _opening, _serve


def test_a_request_before_initialize_is_refused_as_not_initialized(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = _line({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}) + \
        _line({"jsonrpc": "2.0", "id": "p", "method": "ping"}) + _opening() + \
        _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    assert answers[0] == [{"jsonrpc": "2.0", "id": 0, "error": {
        "code": types.INVALID_PARAMS,
        "message": "tools/list: not initialized: the session's first request must be "
                   "initialize",
        "data": {"code": "not_initialized"}}}]
    assert answers["p"][0]["result"] == {}
    assert "tools" in answers[2][0]["result"]


def test_malformed_tools_call_params_are_refused_naming_the_field(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = _opening() + b"".join(_line(m) for m in [
        {**_call(2, "search", {}), "params": {"name": "search", "arguments": [1, 2]}},
        {**_call(3, "search", {}), "params": {"arguments": {"query": "q"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call"},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": 5}},
        _call(6, "search", {"query": "q", "x": 1}),  # the tool's own check, as before
    ])

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    refused = {i: answers[i][0]["error"] for i in (2, 3, 4, 5, 6)}
    assert {e["code"] for e in refused.values()} == {types.INVALID_PARAMS}
    assert {i: e["message"] for i, e in refused.items()} == {
        2: "tools/call: params.arguments: must be an object, got an array: [1, 2]",
        3: "tools/call: params.name: missing required key",
        4: "tools/call: params: missing required key",
        5: "tools/list: params.cursor: must be a string, got a number: 5",
        6: "x: unknown key",
    }
    assert refused[2]["data"] == {"code": "invalid_request", "status": 422}


def test_an_empty_tool_name_is_said_to_be_empty(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # "unknown tool ''", as `trigger ''` said "unknown strategy ''"
    piped = _opening() + _line(_call(2, "", {})) + _line(_call(3, "serch", {}))

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    known = "add_episode, search, briefing, lessons, insights, explain, record_task"
    assert answers[2][0]["error"]["message"] == (
        f"invalid tool name '': must not be empty (known: {known})")
    assert answers[3][0]["error"]["message"] == f"unknown tool 'serch' (known: {known})"


def test_a_method_not_served_is_named_in_the_message(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # the SDK answered "Method not found", the method only in ``data``; "" alike
    piped = _opening() + b"".join(_line({"jsonrpc": "2.0", "id": i, "method": method})
                                  for i, method in [(2, "tools/cal"), (3, ""),
                                                    (4, "resources/list")])

    answers, runtime = _serve(root, piped, capfd)
    runtime.close()

    refused = {i: answers[i][0]["error"] for i in (2, 3, 4)}
    assert {e["code"] for e in refused.values()} == {types.METHOD_NOT_FOUND}
    assert {i: (e["message"], e["data"]) for i, e in refused.items()} == {
        2: ("unknown method 'tools/cal' (did you mean 'tools/call'?)", "tools/cal"),
        3: ("invalid method name '': must not be empty", ""),
        4: ("unknown method 'resources/list'", "resources/list"),
    }
