"""MCP ``search`` and ``briefing`` see the logs as they are, as the CLI's do: an Episode added
or edited by hand since the last sync is indexed before the read, with no ``serve`` watching
the root (an agent's usual setup)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from everos_reflect.api import mcp_server
from everos_reflect.embedding import HashEmbedder
from everos_reflect.errors import ProviderUnavailable
from everos_reflect.index.sync import Indexer
from everos_reflect.model import UserRef
from everos_reflect.runtime import Runtime

ANN = UserRef.of("u_ann")
KAYAK = """<!-- entry:ep_20261012_0002 -->
---
owner_id: u_ann
timestamp: 2026-10-12T11:00:00+00:00
parent_type: memcell
parent_id: mc_1
---
## Subject
Kayak

## Content
Ann bought a red kayak named Splash.
<!-- /entry:ep_20261012_0002 -->
"""


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, embedder=HashEmbedder(64))
    yield runtime
    runtime.close()


def _tool(name: str) -> mcp_server.Tool:
    return next(t for t in mcp_server.tools() if t.name == name)


def test_mcp_search_and_briefing_find_an_episode_added_by_hand(rt: Runtime) -> None:
    # MCP indexed only what its own tools wrote: an Episode a person added to the log since
    # the last sync was not found (the CLI's search syncs first and found it)
    mcp_server.call(rt, _tool("add_episode"), {
        "user_id": "u_ann", "subject": "Pets", "content": "Ann adopted a grey cat called Miso.",
        "timestamp": "2026-10-12T09:30:00+00:00", "importance": 5})
    log = rt.store.path_for_id(ANN, "ep_20261012_0001")
    log.write_text(log.read_text() + KAYAK)

    found = mcp_server.call(rt, _tool("search"), {"query": "red kayak Splash",
                                                   "user_id": "u_ann", "mode": "keyword"})
    briefed = mcp_server.call(rt, _tool("briefing"), {"query": "red kayak Splash",
                                                       "user_id": "u_ann", "max_tokens": 300})

    assert [h["id"] for h in found["episodes"]] == ["ep_20261012_0002"]
    assert "ep_20261012_0002" in [i["id"] for i in briefed["items"]]
    assert "index" not in found and "note" not in found  # a root that can be written
    assert Indexer(rt).pending()["files_changed"] == 0


def test_a_sync_that_fails_answers_from_the_index_and_says_so(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    mcp_server.call(rt, _tool("add_episode"), {
        "user_id": "u_ann", "subject": "Pets", "content": "Ann adopted a grey cat called Miso.",
        "timestamp": "2026-10-12T09:30:00+00:00", "importance": 5})

    def down(self: Indexer, *args: object, **kwargs: object) -> None:
        raise ProviderUnavailable("embedding server unreachable")

    monkeypatch.setattr(Indexer, "scan", down)
    found = mcp_server.call(rt, _tool("search"), {"query": "grey cat Miso", "user_id": "u_ann",
                                                   "mode": "keyword"})

    assert [h["id"] for h in found["episodes"]] == ["ep_20261012_0001"]
    assert found["note"] == ("the index could not be brought up to date with the logs "
                             "(embedding server unreachable): answered "
                             "as last indexed; changes since may not be seen")
