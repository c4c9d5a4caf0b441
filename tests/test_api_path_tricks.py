"""A path parameter that makes no route match (a ``/`` in it, decoded before routing, as in
``/memory/explain/..%2F..``, or none at all) is answered as the route answers a bad id: 422
``invalid_id`` naming the parameter, behind the token as the route is. Any other unmatched
path names the method and path, and a wrong method names the ones the route takes: each was a
bare "Not Found" / "Method Not Allowed" that named nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.embedding import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient

ENTRY = "expected e.g. ep_20261012_0001"
RELATION = "expected e.g. rel_20261012_0001"


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    rt = Runtime(root, embedder=HashEmbedder(16))
    yield ApiClient(rt)
    rt.close()


@pytest.mark.parametrize(("method", "url", "message"), [
    ("GET", "/api/v1/memory/explain/..%2F..?user_id=u1",
     f"entry_id: invalid entry id '../..': {ENTRY}"),
    ("GET", "/api/v1/memory/explain/ep_20261012_0001%2F..%2F..?user_id=u1",
     f"entry_id: invalid entry id 'ep_20261012_0001/../..': {ENTRY}"),
    ("GET", "/api/v1/memory/explain/?user_id=u1",
     "entry_id: invalid entry id '': must not be empty"),
    ("POST", "/api/v1/memory/relations/..%2F..%2Fx/resolve",
     f"rel_id: invalid relation id '../../x': {RELATION}"),
    ("POST", "/api/v1/memory/relations//resolve",
     "rel_id: invalid relation id '': must not be empty"),
])
def test_a_path_parameter_that_matched_no_route_is_named(
        call: ApiClient, method: str, url: str, message: str) -> None:
    resp = call(method, url, **({"json": {}} if method == "POST" else {}))
    assert resp.status_code == 422, resp.text
    assert resp.json() == {"error": {"code": "invalid_id", "message": message}}


def test_the_same_trick_without_the_token_is_refused_as_the_route_refuses_it(
        root: Path) -> None:
    rt = Runtime(root, Settings(server=ServerSettings(token="s3cret")), embedder=HashEmbedder(16))
    try:
        resp = ApiClient(rt)("GET", "/api/v1/memory/explain/..%2F..?user_id=u1")
    finally:
        rt.close()
    assert resp.status_code == 401, resp.text
    assert resp.json()["error"]["code"] == "unauthorized"


def test_an_unknown_route_is_named(call: ApiClient) -> None:
    resp = call("GET", "/api/v1/nothing")
    assert resp.status_code == 404
    assert resp.json() == {"error": {"code": "not_found", "message": (
        "no route GET /api/v1/nothing: the routes are listed by GET /openapi.json")}}


def test_a_wrong_method_names_the_one_the_route_takes(call: ApiClient) -> None:
    resp = call("GET", "/api/v1/memory/relations/rel_20261012_0001/resolve")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"
    assert resp.json()["error"]["message"] == (
        "GET is not allowed on /api/v1/memory/relations/rel_20261012_0001/resolve: it takes "
        "POST")
