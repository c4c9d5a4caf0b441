"""A search or briefing a person waits on embeds its query in one attempt, without sleeping
through a rate-limited server's Retry-After.

The remote embedder's client retried each request ``[embedding] max_retries`` times (2 by
default) and the ``openai`` SDK slept for a 429's Retry-After between them (it honours up to
60 s): a query embedding for ``search`` or ``briefing`` (HTTP API, MCP, CLI) waited minutes
before failing. So did ``POST /api/v1/memory/episodes``, which indexes the new entry before
answering. Now those calls take one attempt and fail at once, naming what the server said;
indexing in the background (the watcher, ``scan``, a Reflection run) keeps its retries. No
wall-clock asserts: the requests the fake server saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli.main import cli
from everos_reflect.embedding import CachingEmbedder
from everos_reflect.embedding.openai_embed import OpenAIEmbedder
from everos_reflect.index.sync import Indexer
from everos_reflect.model import Kind, UserRef, new_episode
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient, add_episode

pytest_plugins = ["tests.fake_openai"]

ANDREW = UserRef.of("u_andrew")
RATE_LIMITED = "rate limited (429), retry after 60 s"


def rate_limited(fake: Any, times: int = 3) -> None:
    fake.script_embeddings(*[fake.Status(429, headers={"retry-after": "60"})] * times)


def embedding_requests(fake: Any) -> int:
    return sum(r.path.endswith("/embeddings") for r in fake.requests)


@pytest.fixture
def runtime(root: Path, fake_openai: Any) -> Any:
    embedder = OpenAIEmbedder(model="m", dimensions=8, base_url=fake_openai.base_url,
                              api_key="k", retries=2)
    rt = Runtime(root, embedder=CachingEmbedder(embedder))
    yield rt
    rt.close()


@pytest.mark.parametrize("route", ["search", "briefing"])
def test_api_query_on_a_rate_limited_embedder_answers_503_after_one_request(
        runtime: Runtime, fake_openai: Any, route: str) -> None:
    call = ApiClient(runtime)
    add_episode(call, "u_andrew", "Dog", "Andrew adopted a dog named Toby.",
                "2026-09-10T10:00:00+00:00")
    before = embedding_requests(fake_openai)
    rate_limited(fake_openai)

    resp = call("POST", f"/api/v1/memory/{route}", json={"query": "dog", "user_id": "u_andrew"})

    assert embedding_requests(fake_openai) == before + 1  # one attempt, no Retry-After sleep
    assert resp.status_code == 503, resp.text
    error = resp.json()["error"]
    assert error["code"] == "provider_unavailable"
    assert RATE_LIMITED in error["message"]


def test_api_add_on_a_rate_limited_embedder_writes_the_entry_and_answers_after_one_request(
        runtime: Runtime, fake_openai: Any) -> None:
    rate_limited(fake_openai)

    resp = ApiClient(runtime)("POST", "/api/v1/memory/episodes", json={
        "user_id": "u_andrew", "subject": "Dog", "content": "Andrew adopted a dog.",
        "timestamp": "2026-09-10T10:00:00+00:00"})

    assert embedding_requests(fake_openai) == 1  # one attempt, no Retry-After sleep
    assert resp.status_code == 201, resp.text
    data = resp.json()["data"]
    assert data["indexed"] is False
    assert RATE_LIMITED in data["index_error"]
    assert runtime.store.get(ANDREW, data["id"]).content == "Andrew adopted a dog."


@pytest.mark.parametrize("indexed_first", [True, False])
def test_cli_search_on_a_rate_limited_embedder_exits_1_naming_the_429(
        root: Path, fake_openai: Any, indexed_first: bool) -> None:
    """Indexed first, the query's embedding meets the 429; not, the sync before the read
    (a new or hand-edited log) does: the person who typed ``search`` waits for both."""
    (root / "everos.toml").write_text(
        f'[embedding]\nprovider = "openai"\nmodel = "m"\ndimensions = 8\n'
        f'base_url = "{fake_openai.base_url}"\napi_key = "k"\n')
    runner = CliRunner()
    added = runner.invoke(cli, ["add", "--root", str(root), "--user", "u_andrew",
                                "--subject", "Dog", "--content", "Andrew adopted a dog.",
                                "--timestamp", "2026-09-10T10:00:00+00:00"])
    assert added.exit_code == 0, added.output
    if indexed_first:
        assert runner.invoke(cli, ["reindex", "--root", str(root)]).exit_code == 0
    before = embedding_requests(fake_openai)
    rate_limited(fake_openai)

    result = runner.invoke(cli, ["search", "dog", "--root", str(root), "--user", "u_andrew"])

    assert embedding_requests(fake_openai) == before + 1  # one attempt, no Retry-After sleep
    assert result.exit_code == 1, result.output
    assert RATE_LIMITED in result.output


def test_background_indexing_still_retries_a_rate_limited_request(
        runtime: Runtime, fake_openai: Any) -> None:
    episode = new_episode(ANDREW, subject="Dog", content="Andrew adopted a dog.",
                          timestamp="2026-09-10T10:00:00+00:00")
    runtime.store.append(ANDREW, Kind.EPISODE, episode.meta, episode.sections, day=episode.day)
    fake_openai.script_embeddings(fake_openai.Status(429, headers={"retry-after-ms": "1"}))

    report = Indexer(runtime).scan()

    assert report.problems == {} and report.entries_embedded == 1
    assert embedding_requests(fake_openai) == 2  # the 429, then the retry that succeeded
    assert runtime.db().execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1

