"""A JSON value of the wrong type is named in JSON's words by the HTTP API and MCP alike:
MCP took its ``query`` argument for the query string of a URL ("query: must be a valid
string" of ``["dog"]``, where the API said what it got), and a choice given as a list was
shown as Python's repr (``"outcome": ["success"]``: "got ['success']")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.api import mcp_server
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, embedder=HashEmbedder(16))
    yield rt
    rt.close()


def _mcp(runtime: Runtime, tool: str, args: dict[str, Any]) -> str:
    [spec] = [t for t in mcp_server.tools() if t.name == tool]
    with pytest.raises(mcp_server.MCPError) as caught:
        mcp_server.call(runtime, spec, args)
    assert caught.value.error.data == {"code": "invalid_request", "status": 422}
    return str(caught.value)


@pytest.mark.parametrize(("tool", "url"), [("search", "/api/v1/memory/search"),
                                           ("briefing", "/api/v1/memory/briefing")])
def test_a_query_that_is_no_string_is_named_alike_by_mcp_and_the_api(
        runtime: Runtime, tool: str, url: str) -> None:
    args = {"user_id": "u1", "query": ["dog"]}
    said = 'query: must be a string, got an array: ["dog"]'
    assert _mcp(runtime, tool, args) == said
    resp = ApiClient(runtime)("POST", url, json=args)
    assert (resp.status_code, resp.json()["error"]["message"]) == (422, said)


def test_a_choice_given_as_a_list_is_shown_as_json_writes_it(runtime: Runtime) -> None:
    args = {"user_id": "u1", "task_type": "deploy", "goal": "Ship it.", "steps": ["Deploy."],
            "outcome": ["success"]}
    said = 'outcome: must be one of: success, failure, partial; got an array: ["success"]'
    assert _mcp(runtime, "record_task", args) == said
    resp = ApiClient(runtime)("POST", "/api/v1/tasks", json=args)
    assert (resp.status_code, resp.json()["error"]["message"]) == (422, said)
