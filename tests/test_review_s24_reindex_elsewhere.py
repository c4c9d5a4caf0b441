"""A ``reindex`` run by another process (the CLI) while ``serve`` or ``mcp`` answers: the
index is emptied, then filled again file by file and re-embedded. A search meanwhile waits
for it, or is told ``index_rebuilding``, and once it is done finds every hit.

Before, such a search was a 503 ``index_unreadable`` telling to run ``reindex`` (the one
running), or answered from the half-built index; and afterwards every hybrid search stayed a
503 until a restart or the reconcile scan when the reindex made no table again for a kind the
daemon had open (a root without atomic facts: LanceDB's "Not found: .../_versions").
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp.shared.exceptions import MCPError

from everos_reflect.api import mcp_server, ops
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient

USER = "u_andrew"


class HeldEmbedder(HashEmbedder):
    """Embeds as HashEmbedder; once ``hold`` is set, stops in its next call until released."""

    def __init__(self) -> None:
        super().__init__(16)
        self.hold = threading.Event()
        self.reached = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.hold.is_set():
            self.reached.set()
            self.release.wait(30)
        return super().embed(texts)


def _search_api(rt: Runtime, mode: str = "hybrid") -> Any:
    return ApiClient(rt)("POST", "/api/v1/memory/search", json={
        "query": "dog", "top_k": 10, "user_id": USER, "mode": mode})


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    ref = UserRef.of(USER)
    for day in range(1, 6):
        runtime.store.append_many(ref, Kind.EPISODE, [(
            {"timestamp": f"2026-10-{day:02d}T10:00:00+00:00"},
            {"Subject": f"Walk {day}", "Content": f"Andrew walked his dog on day {day}."})])
    Indexer(runtime).scan()
    yield runtime
    runtime.close()


@pytest.fixture
def elsewhere(rt: Runtime) -> Iterator[HeldEmbedder]:
    """A reindex by another runtime (another process, as far as the index can tell), held
    half-way: the index emptied, one file read, its embedding waiting."""
    first = _search_api(rt)  # the daemon was answering: its tables are open
    assert first.status_code == 200 and len(first.json()["data"]["episodes"]) == 5
    embedder = HeldEmbedder()
    other = Runtime(rt.root, Settings(), embedder=embedder)
    embedder.hold.set()
    worker = threading.Thread(target=lambda: Indexer(other).reindex())
    worker.start()
    try:
        assert embedder.reached.wait(20)
        yield embedder
    finally:
        embedder.release.set()
        worker.join(30)
        other.close()


def test_an_api_search_during_another_process_reindex_is_503_index_rebuilding(
        rt: Runtime, elsewhere: HeldEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "REINDEX_WAIT_SECONDS", 0.2)

    resp = _search_api(rt)

    assert resp.status_code == 503, resp.text
    assert resp.json()["error"]["code"] == "index_rebuilding"


@pytest.mark.parametrize(("tool", "arguments"), [
    ("search", {"user_id": USER, "query": "dog", "top_k": 10, "mode": "keyword"}),
    ("briefing", {"user_id": USER, "query": "dog", "max_tokens": 500})])
def test_an_mcp_read_during_another_process_reindex_waits_for_it_once_then_is_index_rebuilding(
        rt: Runtime, elsewhere: HeldEmbedder, monkeypatch: pytest.MonkeyPatch, tool: str,
        arguments: dict[str, Any]) -> None:
    """MCP syncs before a read: that sync waited for the indexer the reindex holds (10 s),
    then the read waited for the reindex (10 s more), 20 s in all. It waits for the reindex
    once, and syncs only after it."""
    from everos_reflect.index import rebuild

    monkeypatch.setattr(ops, "REINDEX_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(ops, "INDEX_WAIT_SECONDS", 0.2)  # the sync's wait, were it to wait
    waits: list[tuple[str, float | None]] = []
    wait_refilled, scan = rebuild.wait_refilled, Indexer.scan

    def waiting_for_reindex(index_dir: Path, timeout: float) -> bool:
        waits.append(("reindex", timeout))
        return wait_refilled(index_dir, timeout)

    def waiting_for_indexer(self: Indexer, *args: Any, **kwargs: Any) -> Any:
        waits.append(("indexer", kwargs.get("timeout")))
        return scan(self, *args, **kwargs)

    monkeypatch.setattr(rebuild, "wait_refilled", waiting_for_reindex)
    monkeypatch.setattr(Indexer, "scan", waiting_for_indexer)
    chosen = next(t for t in mcp_server.tools() if t.name == tool)

    with pytest.raises(MCPError) as info:
        mcp_server.call(rt, chosen, arguments)

    assert info.value.error.data["code"] == "index_rebuilding"
    assert waits == [("reindex", 0.2)]  # was [("indexer", 0.2), ("reindex", 0.2)]


@pytest.mark.parametrize("command", [["search", "dog", "--mode", "keyword", "--top-k", "10"],
                                     ["briefing", "dog", "--user", USER]])
def test_a_cli_read_during_another_process_reindex_is_told_not_answered_from_half_an_index(
        rt: Runtime, elsewhere: HeldEmbedder, monkeypatch: pytest.MonkeyPatch,
        command: list[str]) -> None:
    """The CLI's sync waited for the indexer the reindex holds (10 s), then the read answered
    from the half-built index: one hit of five, as if the rest did not exist. It waits for the
    reindex (10 s), then says so, as the API and MCP do."""
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    monkeypatch.setattr(ops, "REINDEX_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(ops, "INDEX_WAIT_SECONDS", 0.2)

    result = CliRunner().invoke(cli, [*command, "--root", str(rt.root)])

    assert result.exit_code == 1, result.output
    assert result.stderr == (f"error: the index {rt.root / '.index'} is being rebuilt by a "
                             "reindex from the Markdown: try again in a moment\n")


def test_a_search_waits_for_a_reindex_elsewhere_that_ends_and_finds_every_hit(
        rt: Runtime, elsewhere: HeldEmbedder) -> None:
    threading.Timer(0.3, elsewhere.release.set).start()

    resp = _search_api(rt)

    assert resp.status_code == 200, resp.text
    assert len(resp.json()["data"]["episodes"]) == 5
