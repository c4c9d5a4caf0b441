"""A synchronous client for the HTTP API in-process (httpx ASGI transport), for feature tests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from everos_reflect.api.app import create_app
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.runtime import Runtime


class ApiClient:
    """``client("POST", "/api/v1/tasks", json=...)`` → the response; one event loop per call."""

    def __init__(self, runtime: Runtime) -> None:
        self.app = create_app(runtime, Engine(runtime))

    def __call__(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                return await c.request(method, url, **kwargs)

        return asyncio.run(go())


def call_once(root: Path, method: str, url: str, *, dim: int = 64,
              **kwargs: Any) -> httpx.Response:
    """One request to the API on a runtime opened for it and closed after, as a client of a
    freshly started daemon sees the root (hash embedder of ``dim``)."""
    runtime = Runtime(root, embedder=HashEmbedder(dim))
    try:
        return ApiClient(runtime)(method, url, **kwargs)
    finally:
        runtime.close()


def add_episode(call: ApiClient, user: str, subject: str, content: str, timestamp: str) -> str:
    """Add an Episode over the API (it must answer 201); its id."""
    resp = call("POST", "/api/v1/memory/episodes", json={
        "user_id": user, "subject": subject, "content": content, "timestamp": timestamp})
    assert resp.status_code == 201, resp.text
    return resp.json()["data"]["id"]
