"""MCP over stdio: a line that is not UTF-8 is refused naming the byte, never read with the
byte replaced. A Latin-1 ``é`` (byte 0xe9) in ``add_episode``'s content was stored as U+FFFD
("caf\\ufffd au lait") and answered as a success: the text changed without a word. An invalid
id sent so was quoted back as ``'u\\ufffd1'``, which the client never sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_mcp_eof import _call, _line, _opening, _serve

ADD = (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add_episode", '
       b'"arguments": {"user_id": "u1", "subject": "Latin-1", "content": "caf\xe9 au lait"}}}\n')


def test_a_line_that_is_not_utf8_is_refused_and_nothing_is_written(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + ADD + _line(_call(3, "lessons", {"task_type": "deploy"}))
    answers, runtime = _serve(root, piped, capfd)
    try:
        [refused] = answers[2]
        offset = ADD.index(b"\xe9")
        assert {k: refused["error"][k] for k in ("code", "message")} == {
            "code": -32700,
            "message": f"parse error: the line is not UTF-8 (byte 0xe9 at offset {offset}): "
                       "nothing of it was read; send it as UTF-8"}
        assert not list(root.rglob("episode-*.md"))  # nothing stored, replaced or not
        # the session goes on
        assert answers[3][0]["result"]["structuredContent"] == {"lessons": [], "total": 0}
    finally:
        runtime.close()


def test_the_same_message_in_utf8_is_stored_as_sent(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + ADD.replace(b"\xe9", "é".encode())
    answers, runtime = _serve(root, piped, capfd)
    try:
        assert "result" in answers[2][0], answers
        [log] = root.rglob("episode-*.md")
        assert "café au lait" in log.read_text("utf-8")
    finally:
        runtime.close()


def test_a_request_without_a_usable_id_at_its_start_is_answered_with_id_null(
        root: Path, capfd: pytest.CaptureFixture[str]) -> None:
    piped = _opening() + b'{"jsonrpc": "2.0", "method": "tools/list", "id": "\xff"}\n'
    lines, runtime = _serve(root, piped, capfd, raw=True)
    try:
        [error] = [line for line in lines if "error" in line]
        assert error["id"] is None
        assert error["error"]["message"].startswith(
            "parse error: the line is not UTF-8 (byte 0xff at offset ")
    finally:
        runtime.close()
