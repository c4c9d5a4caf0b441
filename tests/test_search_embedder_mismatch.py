"""A ``reindex`` with other embedding settings (hash and MiniLM, 16 and 384 dimensions) under
a ``serve`` that had searched: LanceDB refused each later query ("query dim(64) doesn't match
the column vector vector dim(32)"), a 500 from the API and a traceback from MCP. Every edge
now says which embedder made the index, which one this process embeds with, and what to do:
a 503 (the client did nothing wrong) and an MCP error with that code. A fresh process (a
``serve``, ``mcp`` or CLI started after the reindex) says it in the same words and code: it
answered 400 ``bad_request`` in other words when it opened the table; and a write it cannot
index names it as its ``index_error``."""

from __future__ import annotations

from pathlib import Path

import pytest

from everos_reflect.api.mcp_server import MCPError, call, tools
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.errors import EmbedderMismatch
from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient, add_episode

WHY = ("the vector index holds 32-dimensional vectors made by hash:32, but this process embeds "
       "with hash:64 (64 dimensions): the index was rebuilt with other embedding settings; "
       "restart with the settings it was built with, or run `everos-reflect reindex` with these")


def assert_mcp_search_refused(rt: Runtime, query: dict[str, str]) -> None:
    """MCP's search answers the API's 503 ``embedder_mismatch``, in the same words."""
    with pytest.raises(MCPError) as raised:
        call(rt, next(t for t in tools() if t.name == "search"), query)
    assert (str(raised.value), raised.value.error.data) == (
        WHY, {"code": "embedder_mismatch", "status": 503})


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

        assert_mcp_search_refused(rt, query)
    finally:
        rt.close()



def _indexed_then_reindexed(root: Path) -> None:
    """One Episode indexed with hash:64, then the index rebuilt with hash:32: what a fresh
    ``serve`` (or CLI, or MCP) on hash:64 finds."""
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        add_episode(ApiClient(rt), "u1", "Dogs", "Andrew adopted a dog named Toby.",
                    "2026-10-01T10:00:00+00:00")
    finally:
        rt.close()
    _reindex_with(root, 32)


def test_a_fresh_serve_on_an_index_of_another_embedder_is_the_same_503(root: Path) -> None:
    # it opened the table with the dimension check of the vector index: a 400 `bad_request`
    # in other words ("the episodes vector index holds 32-dimensional vectors but ...")
    _indexed_then_reindexed(root)
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        api = ApiClient(rt)
        query = {"query": "dog", "user_id": "u1"}
        resp = api("POST", "/api/v1/memory/search", json=query)
        assert (resp.status_code, resp.json()["error"]) == (
            503, {"code": "embedder_mismatch", "message": WHY})
        resp = api("POST", "/api/v1/memory/briefing", json={**query, "max_tokens": 500})
        assert (resp.status_code, resp.json()["error"]["code"]) == (503, "embedder_mismatch")
    finally:
        rt.close()
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        assert_mcp_search_refused(rt, query)
    finally:
        rt.close()


def test_cli_search_on_an_index_of_another_embedder_names_both(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli import index_cmds
    from everos_reflect.cli.main import cli

    _indexed_then_reindexed(root)
    monkeypatch.setattr(index_cmds, "open_runtime",
                        lambda _root: Runtime(root, embedder=HashEmbedder(64)))
    result = CliRunner().invoke(cli, ["search", "dog", "--user", "u1", "--root", str(root)])
    assert result.exit_code != 0
    assert WHY in " ".join(result.output.split())


@pytest.mark.parametrize("searched_first", [False, True])
def test_an_episode_written_over_an_index_of_another_embedder_says_so(
        root: Path, searched_first: bool) -> None:
    # the Episode is written (201, indexed: false); the reason was LanceDB's "Invalid input,
    # cannot cast field 'vector' from FixedSizeList(64 x Float32) to ..." under a serve that
    # had the table open, or the vector index's other words in a fresh one
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        api = ApiClient(rt)
        add_episode(api, "u1", "Dogs", "Andrew adopted a dog named Toby.",
                    "2026-10-01T10:00:00+00:00")
        if not searched_first:
            rt.close()
            _reindex_with(root, 32)
            rt = Runtime(root, embedder=HashEmbedder(64))
            api = ApiClient(rt)
        else:
            _reindex_with(root, 32)
        resp = api("POST", "/api/v1/memory/episodes", json={
            "user_id": "u1", "subject": "Cats", "content": "Bea has a cat.",
            "timestamp": "2026-10-02T10:00:00+00:00"})
        assert resp.status_code == 201
        data = resp.json()["data"]
        assert (data["indexed"], data["index_error"]) == (False, WHY)
        assert "Bea has a cat." in rt.store.get(UserRef.of("u1"), data["id"]).sections["Content"]
    finally:
        rt.close()


def test_a_read_only_root_of_another_embedder_is_refused_the_same(root: Path) -> None:
    # a read-only root opened its tables without the dimension check: its keyword search
    # answered 200 as if nothing were wrong, and two stored vectors read back failed with
    # numpy's "index 1 is out of bounds for axis 0 with size 1"
    rt = Runtime(root, embedder=HashEmbedder(64))
    try:
        api = ApiClient(rt)
        for n, (subject, content) in enumerate((("Dogs", "Andrew adopted a dog named Toby."),
                                                ("Cats", "Bea has a cat."))):
            add_episode(api, "u1", subject, content, f"2026-10-0{n + 1}T10:00:00+00:00")
    finally:
        rt.close()
    _reindex_with(root, 32)
    rt = Runtime(root, embedder=HashEmbedder(64))
    rt.__dict__["read_only"] = True  # what a read-only mount makes it (test_read_only_root.py)
    try:
        api = ApiClient(rt)
        for mode in ("keyword", "hybrid"):
            resp = api("POST", "/api/v1/memory/search",
                       json={"query": "dog", "user_id": "u1", "mode": mode})
            assert (resp.status_code, resp.json()["error"]) == (
                503, {"code": "embedder_mismatch", "message": WHY})
        assert rt.vectors.read_only
        with pytest.raises(EmbedderMismatch, match="32-dimensional vectors made by hash:32"):
            rt.vectors.get_vectors("episode", UserRef.of("u1"),
                                   ["ep_20261001_0001", "ep_20261002_0001"])
    finally:
        rt.close()
