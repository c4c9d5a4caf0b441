"""``rm -rf <root>/.index`` while ``everos-reflect mcp`` serves an agent (no daemon watching
the root): the next tool call notices, the index is rebuilt from the Markdown, and the agent
finds what it wrote before and after.

Before, the MCP server never noticed: every later write answered ``indexed: false`` with
LanceDB's "Not found: .../_versions", every search was an internal error, and its SQLite
connection went on writing into the deleted file, until the server was restarted.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.api.mcp_server import build_server, call, tools
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index import db as dbmod
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

USER = "u_andrew"
TOOLS = {t.name: t for t in tools()}


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    build_server(runtime)
    yield runtime
    runtime.close()


def _add(rt: Runtime, subject: str, ts: str) -> dict[str, Any]:
    return call(rt, TOOLS["add_episode"], {
        "user_id": USER, "subject": subject, "content": f"Andrew adopted a dog named {subject}.",
        "timestamp": ts})


def _found(rt: Runtime, mode: str) -> set[str]:
    data = call(rt, TOOLS["search"], {"user_id": USER, "query": "dog", "top_k": 10,
                                      "mode": mode})
    return {hit["id"] for hit in data["episodes"]}


@pytest.mark.parametrize("mode", ["keyword", "vector"])
def test_deleting_the_index_under_the_mcp_server_rebuilds_it_from_the_markdown(
        rt: Runtime, mode: str) -> None:
    first = _add(rt, "Toby", "2026-10-12T10:00:00+00:00")
    assert _found(rt, mode) == {first["id"]}

    shutil.rmtree(rt.root / ".index")
    second = _add(rt, "Buddy", "2026-10-13T10:00:00+00:00")

    assert "indexed" not in second, second  # indexed at once, as before the deletion
    assert _found(rt, mode) == {first["id"], second["id"]}
    # written into the new system.db at the root's path, not into the deleted one
    import sqlite3
    conn = sqlite3.connect(dbmod.db_path(rt.root))
    try:
        ids = {r[0] for r in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()
    assert ids == {first["id"], second["id"]}


@pytest.mark.parametrize(("tool", "arguments"), [
    ("search", {"user_id": USER, "query": "dog", "mode": "keyword"}),
    ("briefing", {"user_id": USER, "query": "dog", "max_tokens": 500}),
    ("add_episode", {"user_id": USER, "subject": "Rex", "content": "A dog named Rex.",
                     "timestamp": "2026-10-14T10:00:00+00:00"})])
def test_a_call_while_the_index_is_rebuilt_for_ever_waits_once_then_is_index_rebuilding(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch, tool: str,
        arguments: dict[str, Any]) -> None:
    """MCP and the API wait for a lost index by one constant
    (``ops.INDEX_REBUILD_WAIT_SECONDS``; each edge had its own), once a call."""
    from mcp.shared.exceptions import MCPError

    from everos_reflect.api import ops
    from tests.api_client import ApiClient

    _add(rt, "Toby", "2026-10-12T10:00:00+00:00")
    monkeypatch.setattr(ops, "INDEX_REBUILD_WAIT_SECONDS", 0.1)
    rt.index_keeper = lambda: None  # never says index_rebuilt: a rebuild that never ends
    waits: list[float] = []
    wait_index = rt.wait_index
    monkeypatch.setattr(rt, "wait_index", lambda timeout: waits.append(timeout)
                        or wait_index(timeout))
    shutil.rmtree(rt.root / ".index")

    with pytest.raises(MCPError) as refused:
        call(rt, TOOLS[tool], arguments)
    assert refused.value.error.data["code"] == "index_rebuilding"
    assert waits == [0.1]

    route = {"search": "/api/v1/memory/search", "briefing": "/api/v1/memory/briefing",
             "add_episode": "/api/v1/memory/episodes"}[tool]
    answer = ApiClient(rt)("POST", route, json=arguments)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "index_rebuilding"
    assert waits == [0.1, 0.1]
