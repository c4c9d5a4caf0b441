"""One bad request, one answer: the CLI, the HTTP API and MCP name the same problem with the
same code (the API's ``error.code``, MCP's ``data.code``, the CLI's one line)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient


@pytest.fixture
def runtime(root: Path) -> Iterator[Runtime]:
    rt = Runtime(root, Settings(), embedder=HashEmbedder())
    yield rt
    rt.close()


def _mcp_error(runtime: Runtime, tool: str, args: dict[str, Any]) -> MCPError:
    [spec] = [t for t in mcp_server.tools() if t.name == tool]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(runtime, spec, args)
    return caught.value


@pytest.mark.parametrize(("tool", "args", "method", "url", "code"), [
    ("explain", {"entry_id": "nonsense", "user_id": "u_ann"},
     "GET", "/api/v1/memory/explain/nonsense?user_id=u_ann", "invalid_id"),
    ("insights", {"user_id": "../x"}, "GET", "/api/v1/memory/insights?user_id=../x",
     "invalid_id"),
    ("search", {"query": "q", "user_id": "a b"}, "POST", "/api/v1/memory/search", "invalid_id"),
    ("add_episode", {"user_id": "../x", "subject": "s", "content": "c"},
     "POST", "/api/v1/memory/episodes", "invalid_id"),
    ("search", {"query": "q", "top_k": 0}, "POST", "/api/v1/memory/search", "invalid_request"),
], ids=["explain-entry_id", "insights-user_id", "search-user_id", "add_episode-user_id",
        "search-top_k"])
def test_mcp_refuses_a_bad_field_with_the_code_and_status_the_api_gives(
        runtime: Runtime, tool: str, args: dict[str, Any], method: str, url: str,
        code: str) -> None:
    # MCP answered every request its schema refused as invalid_request, an id the API
    # answers invalid_id for too
    resp = ApiClient(runtime)(method, url, **({"json": args} if method == "POST" else {}))
    assert resp.status_code == 422 and resp.json()["error"]["code"] == code, resp.text
    error = _mcp_error(runtime, tool, args)
    assert error.data == {"code": code, "status": 422}
    # the same reason; the API also says where (``query.user_id``, ``path.entry_id``)
    assert resp.json()["error"]["message"].endswith(error.message)


@pytest.mark.parametrize(("cli_args", "method", "url", "body"), [
    (["explain", "in_20260230_0001", "--user", "u_ann"],
     "GET", "/api/v1/memory/explain/in_20260230_0001?user_id=u_ann", None),
    (["resolve", "rel_20260230_0001", "--note", "n", "--user", "u_ann"],
     "POST", "/api/v1/memory/relations/rel_20260230_0001/resolve",
     {"user_id": "u_ann", "note": "n"}),
    (["undo", "ep_20260230_0001", "--user", "u_ann"],
     "POST", "/api/v1/ome/undo", {"user_id": "u_ann", "entry_id": "ep_20260230_0001"}),
], ids=["explain", "resolve", "undo"])
def test_an_impossible_day_is_an_unknown_entry_at_the_cli_as_at_the_api(
        runtime: Runtime, root: Path, cli_args: list[str], method: str, url: str,
        body: dict[str, Any] | None) -> None:
    # 2026-02-30 names no entry: the API and MCP answer 404 unknown_entry; the CLI said
    # "invalid entry id …: bad date", as for an id that is not an id at all
    resp = ApiClient(runtime)(method, url, **({"json": body} if body else {}))
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "unknown_entry"
    message = resp.json()["error"]["message"]
    assert message.startswith(f"no entry {cli_args[1]} for user default_app/default_project/"
                              "u_ann: ")
    result = CliRunner().invoke(cli, [*cli_args, "--root", str(root)])
    assert result.exit_code == 1 and result.output == f"error: {message}\n"
    if cli_args[0] == "explain":
        error = _mcp_error(runtime, "explain", {"entry_id": cli_args[1], "user_id": "u_ann"})
        assert (error.message, error.data) == (message, {"code": "unknown_entry",
                                                         "status": 404})
