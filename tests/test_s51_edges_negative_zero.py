"""``-0`` sent for a whole number that must be 1 or more is quoted back as sent.

Python's ``json`` reads the JSON number ``-0`` as the int ``0``, so ``"top_k": -0`` was
refused "got 0", a value the client never wrote (the environment variables were fixed the
same way in session 50).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from everos_reflect.api.json_body import parse_json_body
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient
from tests.test_mcp_eof import _opening, _serve

JSON = {"content-type": "application/json"}


@pytest.fixture()
def call(root: Path) -> ApiClient:
    runtime = Runtime(root, embedder=HashEmbedder(64))
    yield ApiClient(runtime)
    runtime.close()


def message(resp: object) -> str:
    assert resp.status_code == 422, resp.text  # type: ignore[attr-defined]
    return resp.json()["error"]["message"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("path", "body", "said"), [
    ("/api/v1/memory/search", '{"query": "x", "user_id": "u1", "top_k": -0}',
     "top_k: must be a whole number from 1 to 100, got -0"),
    ("/api/v1/memory/briefing", '{"query": "x", "user_id": "u1", "max_tokens": -0}',
     "max_tokens: must be a whole number from 1 to "),
    ("/api/v1/memory/episodes", '{"user_id": "u1", "subject": "s", "content": "c", '
     '"importance": -0}', "importance: must be a whole number from 1 to 10, got -0"),
])
def test_a_negative_zero_is_quoted_as_sent(call: ApiClient, path: str, body: str,
                                           said: str) -> None:
    said_now = message(call("POST", path, content=body.encode(), headers=JSON))
    assert said_now.startswith(said), said_now
    assert said_now.endswith("got -0"), said_now


def test_a_plain_zero_is_still_said_zero(call: ApiClient) -> None:
    body = b'{"query": "x", "user_id": "u1", "top_k": 0, "note": "-0 in a string"}'
    said = message(call("POST", "/api/v1/memory/search", content=body, headers=JSON))
    assert said.startswith("top_k: must be a whole number from 1 to 100, got 0")


def test_a_negative_zero_is_zero_everywhere_else() -> None:
    from everos_reflect.api.json_body import NegativeZero

    data = parse_json_body(b'{"a": -0, "b": [0, -0, 10, -10], "c": -0.0, "d": "-0"}')
    assert data == {"a": 0, "b": [0, 0, 10, -10], "c": -0.0, "d": "-0"}
    assert isinstance(data["a"], NegativeZero) and not isinstance(data["b"][0], NegativeZero)
    assert json.dumps(data) == '{"a": 0, "b": [0, 0, 10, -10], "c": -0.0, "d": "-0"}'
    # a body with no "-0" in it is read by json's own integer conversion
    assert type(parse_json_body(b'{"a": 0}')["a"]) is int


def test_mcp_quotes_a_negative_zero_as_sent(root: Path,
                                            capfd: pytest.CaptureFixture[str]) -> None:
    line = ('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": '
            '"search", "arguments": {"query": "x", "user_id": "u1", "top_k": -0}}}')
    answers, runtime = _serve(root, _opening() + line.encode() + b"\n", capfd)
    runtime.close()
    [answer] = answers[2]
    text = json.dumps(answer)
    assert "got -0" in text, text
