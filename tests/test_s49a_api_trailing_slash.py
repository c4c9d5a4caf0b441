"""A route's path with a trailing ``/`` (``POST /api/v1/memory/search/``) is answered as an
unknown route is, naming the path meant, and behind the token as that route is.

Starlette answered it 307 with an empty body and a ``Location`` without the slash: a client
that does not follow redirects for a POST (httpx, by default; most do not resend a body) was
left with nothing to read, and SPEC §7 wants every bad request answered with a 4xx and a JSON
error naming the problem. Nothing runs for such a request: an Episode POSTed there is not
written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient

EPISODE = {"user_id": "u1", "subject": "Pets", "content": "Ann adopted a cat.",
           "timestamp": "2026-10-12T09:30:00+00:00"}


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/api/v1/memory/search", {"query": "cat"}),
    ("POST", "/api/v1/memory/episodes", EPISODE),
    ("GET", "/api/v1/health", None),
    ("GET", "/api/v1/memory/explain/ep_20261012_0001", None),
])
def test_a_trailing_slash_is_a_404_naming_the_route_meant(
        rt: Runtime, method: str, path: str, body: dict[str, str] | None) -> None:
    call = ApiClient(rt)
    resp = call(method, path + "/", **({"json": body} if body is not None else {}))

    assert resp.status_code == 404, (resp.status_code, resp.headers, resp.text)
    assert "location" not in resp.headers
    assert resp.json() == {"error": {"code": "not_found", "message": (
        f"no route {method} {path}/: no route's path ends in '/' (the route meant is "
        f"{method} {path}); the routes are listed by GET /openapi.json")}}
    assert rt.store.entries(UserRef.of("u1"), Kind.EPISODE) == []  # nothing ran
    # the path as the contract writes it is served
    served = call(method, path, **({"json": body} if body is not None else {}))
    assert "no route" not in served.text, served.text


def test_two_trailing_slashes_and_an_unknown_path_with_one_are_unknown_routes(
        rt: Runtime) -> None:
    call = ApiClient(rt)
    for path in ("/api/v1/memory/search//", "/api/v1/nothing/"):
        resp = call("POST", path, json={"query": "cat"})
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["message"] == (
            f"no route POST {path}: the routes are listed by GET /openapi.json")


def test_behind_the_token_as_the_route_meant_is(root: Path) -> None:
    rt = Runtime(root, Settings(server=ServerSettings(token="s3cret")), embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        refused = call("POST", "/api/v1/memory/search/", json={"query": "cat"})
        allowed = call("POST", "/api/v1/memory/search/", json={"query": "cat"},
                       headers={"authorization": "Bearer s3cret"})
    finally:
        rt.close()
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "unauthorized"
    assert allowed.status_code == 404, allowed.text


def test_a_wrong_method_with_a_trailing_slash_names_the_path_meant(rt: Runtime) -> None:
    resp = ApiClient(rt)("GET", "/api/v1/memory/search/")
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"]["message"] == (
        "no route GET /api/v1/memory/search/: no route's path ends in '/' (the path meant is "
        "/api/v1/memory/search); the routes are listed by GET /openapi.json")


def test_a_route_open_without_the_token_is_named_without_it(root: Path) -> None:
    rt = Runtime(root, Settings(server=ServerSettings(token="s3cret")), embedder=HashEmbedder(16))
    try:
        call = ApiClient(rt)
        open_route = call("GET", "/api/v1/health")
        slashed = call("GET", "/api/v1/health/")
    finally:
        rt.close()
    assert open_route.status_code == 200, open_route.text  # health takes no token
    assert slashed.status_code == 404, slashed.text
    assert "(the route meant is GET /api/v1/health)" in slashed.json()["error"]["message"]
