"""An entry id of the form whose day cannot exist (month 13, February 30) names no entry: the
CLI, the API and MCP answer "no entry" (404 by design, ``lookup_entry_id``) and said only
"bad date", naming no part of it. Each edge names the part now, in the same words."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli.main import cli
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.mark.parametrize(("entry_id", "why"), [
    ("ep_20261312_0001", "its day 2026-13-12 is not a date (there is no month 13: months "
                         "are 01-12)"),
    ("in_20260230_0001", "its day 2026-02-30 is not a date (February has 28 days in 2026)"),
])
def test_an_impossible_day_is_named_alike_at_the_cli_the_api_and_mcp(
        rt: Runtime, root: Path, entry_id: str, why: str) -> None:
    message = (f"no entry {entry_id} for user default_app/default_project/u_ann: invalid "
               f"entry id '{entry_id}': {why}")
    resp = ApiClient(rt)("GET", f"/api/v1/memory/explain/{entry_id}",
                         params={"user_id": "u_ann"})
    assert (resp.status_code, resp.json()["error"]) == (
        404, {"code": "unknown_entry", "message": message})
    result = CliRunner().invoke(cli, ["explain", entry_id, "--user", "u_ann",
                                      "--root", str(root)])
    assert (result.exit_code, result.output) == (1, f"error: {message}\n")
    [spec] = [t for t in mcp_server.tools() if t.name == "explain"]
    with pytest.raises(MCPError) as caught:
        mcp_server.call(rt, spec, {"entry_id": entry_id, "user_id": "u_ann"})
    assert (caught.value.message, caught.value.data) == (
        message, {"code": "unknown_entry", "status": 404})
