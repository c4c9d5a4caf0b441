"""MCP over stdio: a batch's element holding a number JSON has no words for is refused as the
same message on a line of its own is.

Session 48 made a single request holding ``NaN``, ``Infinity`` or ``1e400`` an Invalid
Request naming the number; inside a batch (a JSON array on one line) the same request was
passed on, and ``add_episode`` wrote ``"importance": NaN`` through to the tool's model, which
said "must be an integer, got a number: NaN" of a ``1e400`` nobody sent as that. Now each
such element gets its own error with its id (JSON-RPC 2.0 §6), nothing of it runs, and the
batch's other requests are answered as usual.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from everos_reflect.model import Kind, UserRef
from tests.test_mcp_eof import _call, _opening, _serve

WHY = "invalid request: the message is not valid JSON: "


def _add(request_id: int, subject: str, importance: str) -> str:
    call = json.dumps(_call(request_id, "add_episode", {
        "user_id": "ann", "subject": subject, "content": "Ann adopted a cat.",
        "timestamp": "2026-10-12T09:30:00+00:00", "importance": "IMPORTANCE"}))
    return call.replace('"IMPORTANCE"', importance)


def test_a_batch_refuses_each_unread_number_as_a_single_request_is(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    elements = [_add(2, "a", "NaN"), _add(3, "b", "-Infinity"), _add(4, "c", "1e400"),
                _add(5, "NaN Infinity 1e999", "3"),
                # a notification holding one: not run, and (a notification) not answered
                '{"jsonrpc": "2.0", "method": "notifications/cancelled", '
                '"params": {"requestId": 99, "reason": "x", "n": NaN}}',
                # a number deep inside the params, not in the arguments
                '{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"_meta": {"k": '
                '[1, 2.5, Infinity]}}}']
    single = _add(7, "d", "1e400")  # the same problem alone on its line: the same words
    piped = _opening() + ("[" + ", ".join(elements) + "]\n" + single + "\n").encode()

    answers, runtime = _serve(root, piped, capfd, raw=True)
    try:
        written = [e.subject for e in runtime.store.entries(UserRef.of("ann"), Kind.EPISODE)]
    finally:
        runtime.close()

    [array] = [a for a in answers if isinstance(a, list)]
    by_id = {a["id"]: a for a in array}
    assert sorted(by_id, key=str) == [2, 3, 4, 5, 6]
    assert [(by_id[n]["error"]["code"], by_id[n]["error"]["message"]) for n in (2, 3, 4, 6)] == [
        (-32600, WHY + "NaN is not a JSON number"),
        (-32600, WHY + "-Infinity is not a JSON number"),
        (-32600, WHY + "the number '1e400' is too large to be read (past 1.798e+308)"),
        (-32600, WHY + "Infinity is not a JSON number")]
    assert "error" not in by_id[5], by_id[5]
    [alone] = [a for a in answers if isinstance(a, dict) and a.get("id") == 7]
    assert alone["error"] == by_id[4]["error"]
    assert written == ["NaN Infinity 1e999"]
