"""A URL whose percent-escapes are no UTF-8 text is refused quoting what the client sent.

The server decoded ``%ff`` to U+FFFD before any route saw it, and the answer quoted that back
(``invalid entry id '�'``, ``no route GET /api/v1/nope�``): not what was sent, so the client
could not find it in its own code. A value sent so (``user_id=%ff``) was even taken as
``'\\ufffd'``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.api.escapes import url_problem
from everos_reflect.embedding import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import ServerSettings, Settings
from tests.api_client import ApiClient

HOW = "send each character as the escapes of its UTF-8 bytes (é is %C3%A9)"


@pytest.fixture
def call(root: Path) -> Iterator[ApiClient]:
    rt = Runtime(root, embedder=HashEmbedder(16))
    yield ApiClient(rt)
    rt.close()


@pytest.mark.parametrize(("method", "url", "message"), [
    ("GET", "/api/v1/memory/explain/%ff?user_id=u1",
     "the URL path segment '%ff' (of /api/v1/memory/explain/%ff) holds percent-escapes that "
     f"are no UTF-8 text: {HOW}"),
    ("GET", "/api/v1/memory/explain/ep_%FF%fe?user_id=u1",
     "the URL path segment 'ep_%FF%fe' (of /api/v1/memory/explain/ep_%FF%fe) holds "
     f"percent-escapes that are no UTF-8 text: {HOW}"),
    ("POST", "/api/v1/memory/relations/rel_%ed%a0%80/resolve",  # a lone surrogate's bytes
     "the URL path segment 'rel_%ed%a0%80' (of /api/v1/memory/relations/rel_%ed%a0%80/resolve)"
     f" holds percent-escapes that are no UTF-8 text: {HOW}"),
    ("GET", "/api/v1/nope%ff",
     f"the URL path segment 'nope%ff' (of /api/v1/nope%ff) holds percent-escapes that are no "
     f"UTF-8 text: {HOW}"),
    ("GET", "/api/v1/memory/explain/ep_20261012_0001?user_id=%ff",
     f"the query parameter user_id holds '%ff', percent-escapes that are no UTF-8 text: {HOW}"),
    ("GET", "/api/v1/memory/insights?user_id=u1&caf%e9=1",
     f"the query parameter name 'caf%e9' holds percent-escapes that are no UTF-8 text: {HOW}"),
])
def test_escapes_that_are_no_utf8_are_quoted_as_sent(
        call: ApiClient, method: str, url: str, message: str) -> None:
    resp = call(method, url, **({"json": {}} if method == "POST" else {}))
    assert resp.status_code == 400, resp.text
    assert resp.json() == {"error": {"code": "invalid_request", "message": message}}
    assert "\ufffd" not in resp.text and "\\ufffd" not in resp.text


def test_utf8_escapes_still_reach_the_route(call: ApiClient) -> None:
    # é sent right is read as é: the route's own answer, naming the decoded value
    resp = call("GET", "/api/v1/memory/explain/%C3%A9?user_id=u1")
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"].startswith("entry_id: invalid entry id 'é'")
    assert call("GET", "/api/v1/health?x=%C3%A9").status_code == 200


def test_a_long_path_is_quoted_cut(call: ApiClient) -> None:
    resp = call("GET", "/api/v1/memory/explain/" + "%ff" * 5_000 + "?user_id=u1")
    assert resp.status_code == 400
    assert len(resp.json()["error"]["message"]) < 1_000


def test_the_refusal_is_the_same_with_a_token_set(root: Path) -> None:
    # a malformed URL is refused before any route, as an over-long body is: it reveals nothing
    # a route holds, and the client learns what to fix whatever its token
    rt = Runtime(root, Settings(server=ServerSettings(token="s3cret")),
                 embedder=HashEmbedder(16))
    try:
        resp = ApiClient(rt)("GET", "/api/v1/memory/explain/%ff?user_id=u1")
    finally:
        rt.close()
    assert resp.status_code == 400, resp.text
    assert "'%ff'" in resp.json()["error"]["message"]


def test_url_problem_is_none_for_plain_urls() -> None:
    assert url_problem(b"/api/v1/memory/explain/ep_20261012_0001", b"user_id=u1&x=%C3%A9") is None
    assert url_problem(b"/a/%zz/%", b"q=100%&r=%") is None  # not escapes at all: as sent
