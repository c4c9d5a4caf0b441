"""MCP over stdio: a number JSON has no words for, refused as the HTTP API refuses it.

The SDK's parser reads ``NaN``, ``Infinity`` and ``1e400`` (as infinity), so a tool said
"max_tokens: must be an integer, got a number: Infinity" of a ``1e400`` nobody sent as that,
where the HTTP API says "the number '1e400' is too large to be read". MCP now answers such a
line Invalid Request with the request's id in the API's words, and runs nothing; a string
that merely spells them is text like any other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.model import Kind, UserRef
from tests.test_mcp_eof import _opening, _serve

ADD = ('{{"jsonrpc": "2.0", "id": {id}, "method": "tools/call", "params": {{"name": '
       '"add_episode", "arguments": {{"user_id": "ann", "subject": "{subject}", "content": '
       '"Ann adopted a cat.", "timestamp": "2026-10-12T09:30:00+00:00", "importance": {n}}}}}}}')
WHY = "invalid request: the message is not valid JSON: "


def test_nan_infinity_and_a_number_past_a_float_are_named_and_nothing_is_written(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + "\n".join([
        ADD.format(id=2, subject="NaN", n="NaN"), ADD.format(id=3, subject="x", n="-Infinity"),
        ADD.format(id=4, subject="x", n="1e400"),
        ADD.format(id=5, subject="NaN Infinity 1e999", n=3)]).encode() + b"\n"
    answers, runtime = _serve(root, piped, capfd)
    try:
        assert [(a["error"]["code"], a["error"]["message"]) for n in (2, 3, 4)
                for a in answers[n]] == [
            (-32600, WHY + "NaN is not a JSON number"),
            (-32600, WHY + "-Infinity is not a JSON number"),
            (-32600, WHY + "the number '1e400' is too large to be read (past 1.798e+308)")]
        [written] = answers[5]
        assert "error" not in written, written
        assert [e.subject for e in runtime.store.entries(UserRef.of("ann"), Kind.EPISODE)] == [
            "NaN Infinity 1e999"]
    finally:
        runtime.close()
