"""A ``reindex`` with other embedding settings (hash and MiniLM, 16 and 384 dimensions) under
a ``serve`` that had searched: LanceDB refused each later query ("query dim(64) doesn't match
the column vector vector dim(32)"), a 500 from the API and a traceback from MCP. Every edge
now says which embedder made the index, which one this process embeds with, and what to do:
a 503 (the client did nothing wrong) and an MCP error with that code. (A fresh process, the
CLI's, already said so in one line when it opened the table.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.api.mcp_server import MCPError, call, tools
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient, add_episode

WHY = ("the vector index holds 32-dimensional vectors made by hash:32, but this process embeds "
       "with hash:64 (64 dimensions): the index was rebuilt with other embedding settings; "
       "restart with the settings it was built with, or run `everos-reflect reindex` with these")


def _reindex_with(root: Path, dim: int) -> None:
    other = Runtime(root, embedder=HashEmbedder(dim))
    try:
        Indexer(other).reindex()
    finally:
        other.close()


def test_a_reindex_with_another_embedder_under_serve_is_a_503_naming_both(root: Path) -> None:
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        api = ApiClient(rt)
        add_episode(api, "u1", "Dogs", "Andrew adopted a dog named Toby.",
                    "2026-10-01T10:00:00+00:00")
        query = {"query": "dog", "user_id": "u1"}
        assert api("POST", "/api/v1/memory/search", json=query).status_code == 200
        _reindex_with(root, 32)

        for body in (query, {**query, "mode": "vector"}):
            resp = api("POST", "/api/v1/memory/search", json=body)
            assert (resp.status_code, resp.json()["error"]) == (
                503, {"code": "embedder_mismatch", "message": WHY})
        resp = api("POST", "/api/v1/memory/briefing", json={**query, "max_tokens": 500})
        assert (resp.status_code, resp.json()["error"]["code"]) == (503, "embedder_mismatch")
        keyword = api("POST", "/api/v1/memory/search", json={**query, "mode": "keyword"})
        assert [h["subject"] for h in keyword.json()["data"]["episodes"]] == ["Dogs"]

        with pytest.raises(MCPError) as raised:
            call(rt, next(t for t in tools() if t.name == "search"), query)
        assert (str(raised.value), raised.value.error.data) == (
            WHY, {"code": "embedder_mismatch", "status": 503})
    finally:
        rt.close()

