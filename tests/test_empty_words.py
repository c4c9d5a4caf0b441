"""An empty text or list is "must not be empty", as a blank one is, at every edge: ``""``
was pydantic's "String should have at least 1 character" and ``[]`` "List should have at
least 1 item after validation, not 0", where ``"  "`` was "must not be empty"; ``search ''``
said "the search query is empty" where the API says "query: must not be empty". A blank
query is said in the same words as an empty one: "query must not be empty" was a second
wording (`search ''` and `briefing ''` differed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from tests.api_client import ApiClient


@pytest.mark.parametrize(("route", "body", "said"), [
    ("/api/v1/memory/search", {"query": ""}, "query: must not be empty"),
    ("/api/v1/memory/search", {"query": "q", "kinds": []}, "kinds: must not be empty"),
    ("/api/v1/memory/briefing", {"user_id": "u1", "query": ""}, "query: must not be empty"),
    ("/api/v1/memory/episodes", {"user_id": "u1", "subject": "", "content": "c"},
     "subject: must not be empty"),
    ("/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g", "steps": [],
                       "outcome": "success"}, "steps: must not be empty"),
])
def test_an_empty_field_is_refused_as_must_not_be_empty(
        call: ApiClient, route: str, body: dict[str, object], said: str) -> None:
    resp = call("POST", route, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == said


@pytest.mark.parametrize("route", ["/api/v1/memory/search", "/api/v1/memory/briefing"])
@pytest.mark.parametrize("query", ["", "  ", "\u200b"], ids=["empty", "spaces", "zwsp"])
def test_an_empty_or_blank_query_is_said_alike(call: ApiClient, route: str,
                                               query: str) -> None:
    resp = call("POST", route, json={"user_id": "u1", "query": query} if "briefing" in route
                else {"query": query})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == "query: must not be empty"


@pytest.mark.parametrize("command", [["search"], ["briefing", "--user", "u1"]])
@pytest.mark.parametrize("query", ["", "  "], ids=["empty", "spaces"])
def test_the_cli_says_an_empty_query_as_the_api_does(
        root: Path, command: list[str], query: str) -> None:
    result = CliRunner().invoke(cli, [*command, query, "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == "error: query: must not be empty"

