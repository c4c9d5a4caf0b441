"""The 413 answer to a request body over ``limits.max_request_bytes`` is one sentence naming
the body's size and the limit, as the API's other size errors are ("entry … is 3,000 bytes,
over limits.max_entry_bytes (2,048)"): it said "request body is over
limits.max_request_bytes (8,192 bytes)", naming no size. A body streamed without a length is
refused at the first chunk past the limit: its size is then "at least" what arrived. A
``Content-Length`` of thousands of digits is over the limit, not Python's ValueError."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.api.body_limit import BodyLimit
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import LimitsSettings, Settings
from tests.api_client import ApiClient

LIMIT = 8192


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    rt = Runtime(root, replace(Settings(), limits=LimitsSettings(max_request_bytes=LIMIT)),
                 embedder=HashEmbedder())
    yield ApiClient(rt)
    rt.close()


def test_a_declared_length_over_the_limit_is_named_with_the_limit(
        call: ApiClient, root: Path) -> None:
    body = json.dumps({"user_id": "u_ann", "subject": "s", "content": "x" * 10_000})
    resp = call("POST", "/api/v1/memory/episodes", content=body,
                headers={"content-type": "application/json"})
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"] == {"code": "too_large", "message": (
        f"the request body is {len(body):,} bytes, over limits.max_request_bytes (8,192)")}
    assert list(root.rglob("*.md")) == []


def test_a_streamed_body_is_named_with_what_arrived(call: ApiClient, root: Path) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"user_id": "u_ann", "subject": "s", "content": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}'

    resp = call("POST", "/api/v1/memory/episodes", content=chunks(),
                headers={"content-type": "application/json"})
    assert resp.status_code == 413, resp.text
    message = resp.json()["error"]["message"]
    found = re.fullmatch(r"the request body is at least ([0-9,]+) bytes, over "
                         r"limits\.max_request_bytes \(8,192\)", message)
    assert found is not None, message
    # what arrived up to the first chunk past the limit, not the whole 100 kB
    assert LIMIT < int(found.group(1).replace(",", "")) <= LIMIT + 1000 + 50, message
    assert list(root.rglob("*.md")) == []


@pytest.mark.parametrize("declared", [b"9" * 5000, b"0" * 4999 + b"1" + b"0" * 5])
def test_a_content_length_of_thousands_of_digits_is_over_the_limit(declared: bytes) -> None:
    reached: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(True)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": [(b"content-length", declared)]}
    asyncio.run(BodyLimit(app, LIMIT)(scope, receive, send))
    assert reached == []
    assert sent[0]["status"] == 413
    message = json.loads(sent[1]["body"])["error"]["message"]
    assert message.startswith("the request body is ") and message.endswith(
        " bytes, over limits.max_request_bytes (8,192)"), message
    assert len(message) < 120, message


def test_a_small_content_length_with_leading_zeros_is_read(call: ApiClient) -> None:
    resp = call("GET", "/api/v1/health", headers={"content-length": "0" * 5000})
    assert resp.status_code == 200, resp.text
