"""A request body holding a raw control character inside a string, or a string never closed,
was refused as "Invalid control character at at line 1, column 13": json's message ends in
"at", and the character went unnamed. It names the character and how to write it."""

from __future__ import annotations

from tests.api_client import ApiClient


def test_a_raw_control_character_in_a_body_is_named_once_with_its_escape(call: ApiClient
                                                                          ) -> None:
    def message(raw: bytes) -> str:
        resp = call("POST", "/api/v1/memory/search", content=raw,
                    headers={"content-type": "application/json"})
        assert resp.status_code == 422, resp.text
        return resp.json()["error"]["message"]

    assert message(b'{"query": "a\x00b"}') == (
        "request body is not valid JSON: the control character U+0000 stands in a string "
        "unescaped (write it as \\u0000) at line 1, column 13")
    assert message(b'{"query": "dog') == (
        "request body is not valid JSON: Unterminated string starting at line 1, column 11")
