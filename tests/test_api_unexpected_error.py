"""A request that fails in a way no handler names (a bug, a library's error, an ``OSError``
with no file) is answered 500 with a JSON error saying what failed, as every other error is,
the traceback in the daemon's log: Starlette answered a plain-text "Internal Server Error",
which a client reading ``error.message`` could not read at all."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import httpx
import pytest

from everos_reflect.api import ops
from everos_reflect.api.app import create_app
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings


def _search(root: Path) -> httpx.Response:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    app = create_app(runtime, Engine(runtime))

    async def go() -> httpx.Response:
        # as a server answers: the exception is not raised into the client
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            return await c.post("/api/v1/memory/search", json={"query": "dogs"})

    try:
        return asyncio.run(go())
    finally:
        runtime.close()


@pytest.mark.parametrize(("error", "said"), [
    (RuntimeError("the vector table has no column 'x'"),
     "failed: the vector table has no column 'x'"),
    (OSError(errno.EMFILE, "Too many open files"), "failed: Too many open files;"),
])
def test_an_unexpected_error_is_a_json_500_saying_what_failed(
        root: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, said: str) -> None:
    def search(runtime: object, body: object) -> None:
        raise error

    monkeypatch.setattr(ops, "search", search)
    resp = _search(root)
    assert resp.status_code == 500
    assert resp.headers["content-type"] == "application/json"
    body = resp.json()
    assert body["error"]["code"] == "internal_error"
    assert body["error"]["message"].startswith("POST /api/v1/memory/search failed: ")
    assert said in body["error"]["message"]
    assert body["error"]["message"].endswith("; the daemon's log has the details")
