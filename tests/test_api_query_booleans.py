"""A query-string boolean of the HTTP API is ``true`` or ``false`` (any case), as its OpenAPI
schema says: pydantic's lax reading took ``yes``, ``on``, ``1``, ``t`` or ``y`` for true and
``no``, ``off``, ``0`` for false, so a typo or another convention answered a different list."""

from __future__ import annotations

import pytest

from tests.api_client import ApiClient

ROUTES = [("/api/v1/memory/insights", "include_stale"), ("/api/v1/memory/worldview", "history")]


@pytest.mark.parametrize(("route", "name"), ROUTES)
@pytest.mark.parametrize("value", ["yes", "on", "1", "0", "no", "off", "t", "y", "", " true"])
def test_a_query_boolean_other_than_true_or_false_is_refused_naming_it(
        call: ApiClient, route: str, name: str, value: str) -> None:
    resp = call("GET", route, params={"user_id": "u", name: value})
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"] == f"{name}: " + (
        f"must be true or false, got {value!r}" if value else
        "must not be empty (true or false)")


@pytest.mark.parametrize(("route", "name"), ROUTES)
@pytest.mark.parametrize("value", ["true", "false", "True", "FALSE"])
def test_true_and_false_in_any_case_are_read(
        call: ApiClient, route: str, name: str, value: str) -> None:
    # Python's requests and httpx write True as "True"
    assert call("GET", route, params={"user_id": "u", name: value}).status_code == 200
