"""MCP over stdio: a message in which one object gives a key twice.

JSON leaves such an object undefined; the SDK's parser kept the last value, so
``{"user_id": "alice", ..., "user_id": "bob"}`` wrote to bob, where the HTTP API refuses the
same body naming the key (``api/json_body.py``). MCP now answers it Invalid Request with the
request's id, naming the key and where it is, and runs nothing: on its own line and in a batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.model import Kind, UserRef
from tests.test_mcp_eof import _opening, _serve

EPISODE = ('"subject": "Pets", "content": "Ann adopted a grey cat.", '
           '"timestamp": "2026-10-12T09:30:00+00:00"')


def _add_twice(request_id: int) -> bytes:
    return (f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": '
            f'{{"name": "add_episode", "arguments": {{"user_id": "alice", {EPISODE}, '
            f'"user_id": "bob"}}}}}}').encode()


def test_a_call_giving_an_argument_twice_is_refused_naming_it_and_writes_nothing(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    answers, runtime = _serve(root, _opening() + _add_twice(2) + b"\n", capfd)
    try:
        [answer] = answers[2]
        assert answer["error"]["code"] == -32600
        assert "'user_id' is given twice" in answer["error"]["message"]
        assert "params.arguments" in answer["error"]["message"]
        for user in ("alice", "bob"):
            assert runtime.store.entries(UserRef.of(user), Kind.EPISODE) == []
    finally:
        runtime.close()


def test_a_batch_element_giving_a_key_twice_is_refused_and_the_others_run(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    good = (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": '
            b'"add_episode", "arguments": {"user_id": "carol", ' + EPISODE.encode() + b'}}}')
    piped = _opening() + b"[" + _add_twice(3) + b", " + good + b"]\n"
    lines, runtime = _serve(root, piped, capfd, raw=True)
    try:
        [batch] = [line for line in lines if isinstance(line, list)]
        by_id = {answer["id"]: answer for answer in batch}
        assert "'user_id' is given twice" in by_id[3]["error"]["message"]
        assert "error" not in by_id[4]
        assert runtime.store.entries(UserRef.of("bob"), Kind.EPISODE) == []
        assert len(runtime.store.entries(UserRef.of("carol"), Kind.EPISODE)) == 1
    finally:
        runtime.close()
