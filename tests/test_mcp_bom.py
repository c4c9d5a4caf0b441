"""MCP over stdio: a message whose line starts with a UTF-8 byte order mark.

Some Windows shells and editors put a BOM before the first line they write. The transport
answered that line "parse error: the line is not JSON (… expected value at line 1 column 1)"
with id null, so the client's ``initialize`` was never answered and it waited for ever. RFC
8259 §8.1 lets a parser ignore a BOM; the line is now read without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_mcp_eof import _call, _line, _opening, _serve

BOM = b"\xef\xbb\xbf"


def test_a_session_whose_first_line_starts_with_a_bom_is_answered(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = BOM + _opening() + BOM + _line(_call(2, "lessons", {"task_type": "deploy"}))
    answers, runtime = _serve(root, piped, capfd)
    try:
        assert "result" in answers[1][0], answers
        assert answers[2][0]["result"]["structuredContent"] == {"lessons": [], "total": 0}
    finally:
        runtime.close()


def test_a_bom_inside_a_line_is_still_no_json(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    piped = _opening() + b'{"jsonrpc": "2.0", ' + BOM + b'"id": 2, "method": "tools/list"}\n'
    lines, runtime = _serve(root, piped, capfd, raw=True)
    try:
        errors = [line for line in lines if "error" in line]
        assert [e["error"]["code"] for e in errors] == [-32700], json.dumps(lines)[:500]
    finally:
        runtime.close()


def test_a_line_over_the_limit_that_starts_with_a_bom_is_still_refused_whole(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    big = _line(_call(2, "search", {"query": "x" * 8000}))
    piped = _opening() + BOM + big + _line(_call(3, "lessons", {"task_type": "deploy"}))
    answers, runtime = _serve(root, piped, capfd)
    try:
        assert "message too large" in answers[2][0]["error"]["message"]
        assert answers[3][0]["result"]["structuredContent"] == {"lessons": [], "total": 0}
        assert set(answers) == {1, 2, 3}
    finally:
        runtime.close()
