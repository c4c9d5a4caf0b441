"""Two request bodies the API answered in words no client could act on.

A body starting with a byte-order mark (what some Windows tools write first) was refused as
"Unexpected UTF-8 BOM (decode using utf-8-sig)", Python's advice to its own programmer: it
is ignored, as RFC 8259 §8.1 allows and as MCP's lines and the config files ignore it. A
POST with no body at all said "body: missing required key", a key nobody named.
"""

from __future__ import annotations

from tests.api_client import ApiClient, add_episode

JSON = {"content-type": "application/json"}


def test_a_body_after_a_byte_order_mark_is_read(call: ApiClient) -> None:
    add_episode(call, "u1", "Dogs", "Andrew adopted a dog named Toby.",
                "2026-10-01T10:00:00+00:00")
    resp = call("POST", "/api/v1/memory/search", headers=JSON,
                content="\ufeff".encode() + b'{"query": "dog", "user_id": "u1"}')
    assert resp.status_code == 200, resp.text
    assert [h["subject"] for h in resp.json()["data"]["episodes"]] == ["Dogs"]


def test_a_post_without_a_body_says_so(call: ApiClient) -> None:
    for headers in (JSON, {}):
        resp = call("POST", "/api/v1/memory/search", headers=headers, content=b"")
        assert (resp.status_code, resp.json()["error"]) == (422, {
            "code": "invalid_request",
            "message": "body: missing: the request sent none; send a JSON object"})
