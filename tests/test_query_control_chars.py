"""A ``search`` or ``briefing`` query holding a control character (a NUL, an ESC, DEL) is
refused naming it, at the CLI, the API and MCP: it was searched for, and an ESC alone
answered every Episode, as a query that said something. Tab and line breaks stay allowed;
so does an invisible formatting character (an emoji's joiner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server
from everos_reflect.cli.main import cli
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient


@pytest.mark.parametrize(("query", "code"), [("a\x00b", "0000"), ("\x1b", "001B"),
                                              ("dog\x7f", "007F")])
def test_a_query_with_a_control_character_is_refused_naming_it(
        tmp_path: Path, rt: Runtime, query: str, code: str) -> None:
    said = f"query: holds the control character U+{code}"
    tools = {t.name: t for t in mcp_server.tools()}
    mcp_server.call(rt, tools["add_episode"], {"user_id": "u", "subject": "Dog",
                                                "content": "Adopted Toby."})
    call = ApiClient(rt)
    for url, body in (("/api/v1/memory/search", {"query": query}),
                      ("/api/v1/memory/briefing", {"user_id": "u", "query": query})):
        resp = call("POST", url, json=body)
        assert resp.status_code == 422 and resp.json()["error"]["message"] == said, resp.text
    for tool, args in (("search", {"query": query}),
                       ("briefing", {"user_id": "u", "query": query})):
        with pytest.raises(MCPError) as refused:
            mcp_server.call(rt, tools[tool], args)
        assert refused.value.error.message == said
    cli_root = tmp_path / "cli"  # the CLI's embedder is not the 16-dimensional one of `rt`
    (cli_root / ".index").mkdir(parents=True)
    if "\x00" not in query:  # no NUL reaches argv
        for args in (["search", query], ["briefing", query, "--user", "u"]):
            result = CliRunner().invoke(cli, [*args, "--root", str(cli_root)])
            assert result.exit_code != 0 and said in result.output, result.output


def test_a_query_with_tabs_line_breaks_or_a_joiner_is_searched(rt: Runtime) -> None:
    tools = {t.name: t for t in mcp_server.tools()}
    mcp_server.call(rt, tools["add_episode"], {"user_id": "u", "subject": "Dog",
                                                "content": "Adopted Toby."})
    for query in ("dog\tToby\r\nadopted", "dog \U0001f468\u200d\U0001f469"):
        found = mcp_server.call(rt, tools["search"], {"query": query})["episodes"]
        assert [e["subject"] for e in found] == ["Dog"]
