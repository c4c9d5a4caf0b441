"""The first requests a new app answers, arriving at once.

Every guarded route checks its query string against a table built from the OpenAPI document
on first use. FastAPI caches a query model's fields (``LessonsQuery``) in an ``lru_cache``
that two first builds can each fill, one replacing the other's fields while the first still
looks its own up: a ``KeyError`` out of ``get_openapi``, a 500 to whichever requests raced
(about one fresh ``serve`` in six with 16 requests at once). The table is now built when the
app is made, before any request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi._compat import v2

from everos_reflect.api import app as app_module
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

CALLERS = 8


@pytest.fixture
def fresh_fastapi_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Caches as in a process that has answered nothing yet, with FastAPI's field lookup
    made slow, so first builds that overlap do (they did by chance before)."""
    fields = v2.get_model_fields

    def slow_fields(model: Any) -> Any:
        time.sleep(0.05)
        return fields(model)

    monkeypatch.setattr(v2, "get_model_fields", slow_fields)
    v2.get_cached_model_fields.cache_clear()
    app_module._query_table.cache_clear()
    yield
    v2.get_cached_model_fields.cache_clear()
    app_module._query_table.cache_clear()


def test_the_first_requests_of_a_new_app_made_at_once_are_all_answered(
        root: Path, fresh_fastapi_caches: None) -> None:
    runtime = Runtime(root, embedder=HashEmbedder())
    try:
        call = ApiClient(runtime)
        start = threading.Barrier(CALLERS)
        answers: list[int | str] = []

        def first_request() -> None:
            start.wait()
            try:
                answers.append(call("GET", "/api/v1/lessons?task_type=deploy").status_code)
            except Exception as exc:  # the ASGI transport re-raises what became a 500
                answers.append(repr(exc)[:200])

        threads = [threading.Thread(target=first_request) for _ in range(CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [200] * CALLERS
    finally:
        runtime.close()


def test_a_request_after_the_first_still_checks_its_query(root: Path) -> None:
    runtime = Runtime(root, embedder=HashEmbedder())
    try:
        resp = ApiClient(runtime)("GET", "/api/v1/lessons?task_type=deploy&limt=3")
        assert resp.status_code == 422
        assert isinstance(resp, httpx.Response)
        assert "unknown query parameter: limt" in resp.json()["error"]["message"]
    finally:
        runtime.close()
