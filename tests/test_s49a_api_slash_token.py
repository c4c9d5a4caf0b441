"""A route's path with a trailing ``/`` is answered behind the token as the route meant is,
for the routes of an included router too (the memory, belief and insight routes): FastAPI
matches such a router as one entry with no dependencies of its own, so it was taken for an
open route and ``GET /api/v1/memory/explain/<id>/`` told a client without the token the route
it meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/v1/memory/explain/ep_20261012_0001/?user_id=u1"),
    ("GET", "/api/v1/memory/insights/?user_id=u1"),
    ("GET", "/api/v1/memory/worldview/?user_id=u1"),
])
def test_an_included_routes_slash_form_is_behind_the_token(
        root: Path, method: str, path: str) -> None:
    rt = Runtime(root, Settings(server=ServerSettings(token="s3cret")), embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        meant = call(method, path.replace("/?", "?"))
        refused = call(method, path)
        allowed = call(method, path, headers={"authorization": "Bearer s3cret"})
    finally:
        rt.close()
    assert meant.status_code == 401, meant.text  # the route meant is behind the token
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "unauthorized"
    assert allowed.status_code == 404, allowed.text
    assert "no route's path ends in '/'" in allowed.json()["error"]["message"]
