"""The HTTP API given values a person did not mean, or a hostile client sends: each is a 4xx
naming the field, never a 500, never read as another value."""

from __future__ import annotations

import pytest

from tests.api_client import ApiClient


@pytest.mark.parametrize("route", ["/api/v1/ome/runs", "/api/v1/ome/reports"])
@pytest.mark.parametrize("limit", ["1_0", "%D9%A1%D9%A0", "%EF%BC%91", "%2010", "10.0", "+5"])
def test_a_limit_not_written_in_plain_digits_is_refused(
        call: ApiClient, route: str, limit: str) -> None:
    # pydantic read "1_0" as 10 and " 10" or "10.0" as 10: a typo answered with ten rows
    resp = call("GET", f"{route}?limit={limit}")
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith("limit: must be a whole number from 1 to 1000, got ")


def test_a_plain_limit_is_read_and_bounded(call: ApiClient) -> None:
    assert call("GET", "/api/v1/ome/runs?limit=10").status_code == 200
    resp = call("GET", "/api/v1/ome/runs?limit=-1")
    assert resp.status_code == 422
    assert "limit: " in resp.json()["error"]["message"]
