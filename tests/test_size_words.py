"""A text or list too long says the most and how long it is, in one wording for the API, MCP
and the CLI commands that validate through the API's models: "String should have at most
2000 characters" did not say by how much, and the CLI printed pydantic's words as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from tests.api_client import ApiClient


@pytest.mark.parametrize(("route", "body", "said"), [
    ("/api/v1/memory/search", {"query": "q" * 10_001},
     "query: must be at most 10,000 characters, got 10,001"),
    ("/api/v1/memory/briefing", {"user_id": "u1", "query": "q" * 3000},
     "query: must be at most 2,000 characters, got 3,000"),
    ("/api/v1/tasks", {"user_id": "u1", "task_type": "deploy", "goal": "g",
                       "steps": ["s"] * 101, "outcome": "success"},
     "steps: must hold at most 100 items, got 101"),
])
def test_a_field_too_long_says_the_most_and_how_long_it_is(
        call: ApiClient, route: str, body: dict[str, object], said: str) -> None:
    resp = call("POST", route, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["message"] == said


def test_the_cli_says_a_briefing_query_too_long_as_the_api_does(root: Path) -> None:
    result = CliRunner().invoke(cli, ["briefing", "q" * 3000, "--user", "u1", "--root",
                                      str(root)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        "error: query: must be at most 2,000 characters, got 3,000")
