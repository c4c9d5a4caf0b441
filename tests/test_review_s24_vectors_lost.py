"""Only the vector index deleted while the daemon serves (``rm -rf .index/lancedb`` to free
space), or its tables dropped by a ``reindex`` of another process: a search is correct data or
a 503, never LanceDB's "Not found: .../_versions" as a 500.

Before, ``search_vector`` and ``search_text`` built their LanceDB query (which reads the
table's schema) outside the guard that makes LanceDB's error a 503, and the daemon noticed a
deleted ``lancedb`` folder only by the reconcile scan, answering empty searches while it
embedded everything again.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from everos_reflect.api import ops
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.index.watcher import Watcher
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient, add_episode
from tests.waiting import wait_for

USER = "u_andrew"


@pytest.fixture
def rt(root: Path) -> Iterator[Runtime]:
    runtime = Runtime(root, Settings(), embedder=HashEmbedder(16))
    yield runtime
    runtime.close()


def _found(call: ApiClient, answers: list[tuple[int, str]], mode: str) -> set[str]:
    resp = call("POST", "/api/v1/memory/search", json={
        "query": "dog", "top_k": 10, "user_id": USER, "mode": mode})
    if resp.status_code != 200:
        answers.append((resp.status_code, resp.json()["error"]["code"]))
        return set()
    ids = {hit["id"] for hit in resp.json()["data"]["episodes"]}
    answers.append((200, ",".join(sorted(ids))))
    return ids


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_deleting_only_the_vector_index_while_serving_answers_503_or_every_hit(
        rt: Runtime, mode: str) -> None:
    call = ApiClient(rt)
    answers: list[tuple[int, str]] = []
    # no reconcile scan: the daemon must notice at the request itself
    with Watcher(rt, debounce=0.05, reconcile_interval=3600, optimize_interval=0):
        first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                            "2026-10-12T10:00:00+00:00")
        assert wait_for(lambda: _found(call, [], mode) == {first})

        # moved out, then deleted: rmtree in place raced the watcher still writing a table
        # (FileNotFoundError 'episodes.lance' on a land); the daemon tells the folder by its path
        gone = rt.root.parent / "deleted-lancedb"
        os.rename(rt.root / ".index" / "lancedb", gone)
        shutil.rmtree(gone, ignore_errors=True)

        assert wait_for(lambda: _found(call, answers, mode) == {first}), answers
    # every answer until then was a wait or a 503 saying the index is being rebuilt,
    # never an empty list passed off as the answer
    assert all(a == (503, "index_rebuilding") or a == (200, first) for a in answers), answers


def test_a_search_while_another_process_drops_the_tables_is_a_503_not_a_500(
        rt: Runtime) -> None:
    """A CLI ``reindex`` while ``serve`` runs moves every table aside first: the daemon's
    open tables then have no ``_versions`` until they are made again."""
    call = ApiClient(rt)
    first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                        "2026-10-12T10:00:00+00:00")
    from everos_reflect.index.sync import Indexer

    Indexer(rt).scan()
    assert _found(call, [], "vector") == {first}

    other = Runtime(rt.root, Settings(), embedder=HashEmbedder(16))
    try:
        other.vectors.reset()  # what a reindex does first
        for mode in ("vector", "keyword"):
            resp = call("POST", "/api/v1/memory/search", json={
                "query": "dog", "top_k": 10, "user_id": USER, "mode": mode})
            assert resp.status_code in (200, 503), resp.text
            if resp.status_code == 503:
                assert resp.json()["error"]["code"] == "index_unreadable", resp.text
    finally:
        other.close()


def test_a_scan_embedding_lost_vectors_again_makes_searches_wait(
        rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that finds the vector tables deleted (the watcher's, after a folder change)
    embeds their entries again and makes the ``lancedb`` folder anew. A search meanwhile
    answered 200 with no hits when the new folder got the deleted one's inode (seen on a
    land: the request's identity check passed); it now waits, then is told 503, as for a
    lost index."""
    call = ApiClient(rt)
    first = add_episode(call, USER, "Toby", "Andrew adopted a dog named Toby.",
                        "2026-10-12T10:00:00+00:00")
    assert _found(call, [], "vector") == {first}
    shutil.rmtree(rt.root / ".index" / "lancedb")

    answers: list[tuple[int, str]] = []
    rebuilding: list[bool] = []
    embed = rt.embedder.embed

    def embed_and_search(texts: list[str]) -> Any:
        if not rebuilding:  # the scan's first embedding call: a search comes in
            rebuilding.append(rt.index_rebuilding)
            _found(call, answers, "vector")
        return embed(texts)

    monkeypatch.setattr(rt.embedder, "embed", embed_and_search)
    monkeypatch.setattr(ops, "INDEX_REBUILD_WAIT_SECONDS", 0.2)
    Indexer(rt).scan()

    assert answers == [(503, "index_rebuilding")]  # was [(200, "")]: no hits, as an answer
    assert rebuilding == [True]
    assert not rt.index_rebuilding
    assert _found(call, [], "vector") == {first}
