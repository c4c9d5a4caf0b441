"""An id sent holding a lone UTF-16 surrogate (``"\\udcff"``, JSON's escape) is named by its
code point, as a text field holding one is. It was quoted back as ``'u1\\xff'``: the escape a
folder's byte that is not UTF-8 is shown with, a byte the client never sent."""

from __future__ import annotations

import pytest

from tests.api_client import ApiClient

LONE = "a lone UTF-16 surrogate (half of a character): not text"


@pytest.mark.parametrize(("field", "escape", "code"), [
    ("user_id", "u1\\udcff", "DCFF"), ("user_id", "u1\\ud83d", "D83D"),
    ("app_id", "\\udc80", "DC80"), ("project_id", "p\\udfff", "DFFF")])
def test_an_id_holding_a_lone_surrogate_names_it(
        call: ApiClient, field: str, escape: str, code: str) -> None:
    body = '{"user_id": "u1", "subject": "s", "content": "c"}'
    body = body.replace('"user_id": "u1"', f'"{field}": "{escape}"') if field == "user_id" \
        else body.replace("{", f'{{"{field}": "{escape}", ', 1)
    resp = call("POST", "/api/v1/memory/episodes", content=body,
                headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == {"code": "invalid_id",
                                    "message": f"{field}: holds U+{code}, {LONE}"}


def test_search_names_it_alike(call: ApiClient) -> None:
    # search takes its user in the body too: the same check, the same words
    resp = call("POST", "/api/v1/memory/search", content='{"user_id": "u\\udcff", "query": "x"}',
                headers={"content-type": "application/json"})
    assert resp.json()["error"]["message"] == f"user_id: holds U+DCFF, {LONE}"
