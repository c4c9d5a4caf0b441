"""Every command's ``--json`` follows one rule (README, "Command line"): it prints what the API
answers under ``data`` for the same resource -- its keys at the top, never wrapped in
``{"data": …}`` -- and a command with no route prints one object of its own the same way.
``insights``, ``search``, ``explain``, ``provenance`` and ``reindex`` printed ``{"data": …}``
while ``worldview``, ``relations`` and ``lessons`` printed the bare document: a script had to
know which."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.cli import (
    belief_cmds,
    cluster_cmds,
    common,
    engine_cmds,
    index_cmds,
    insight_cmds,
    memory_cmds,
    reflect_cmds,
    store_cmds,
)
from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.model import Kind
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from tests.api_client import ApiClient
from tests.test_aside_settings import ADA, edges, tasks


def _runtime(root: Path) -> Runtime:
    return Runtime(root, Settings(), embedder=HashEmbedder(32))


@pytest.fixture
def seeded(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A root with Episodes, insights, convictions, relations and tasks of user ``ada``; every
    command opens it with the hash embedder, as the API client does."""
    rt = _runtime(root)
    relation = edges(rt)[0]
    tasks(rt)
    insight = rt.store.entries(ADA, Kind.INSIGHT)[0].id
    episode = rt.store.entries(ADA, Kind.EPISODE)[0].id
    rt.close()

    def fake_open(given: str | None) -> Runtime:
        return _runtime(common.existing_root(given))

    for module in (belief_cmds, cluster_cmds, engine_cmds, index_cmds, insight_cmds,
                   memory_cmds, reflect_cmds, store_cmds, common):
        if hasattr(module, "open_runtime"):
            monkeypatch.setattr(module, "open_runtime", fake_open)
    yield {"insight": insight, "episode": episode, "relation": relation}


def _api(root: Path, method: str, url: str, body: dict[str, Any] | None) -> Any:
    rt = _runtime(root)
    try:
        resp = ApiClient(rt)(method, url, json=body)
    finally:
        rt.close()
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


#: (the command, the API route for the same resource or None, the keys both print)
SHAPES: list[tuple[list[str], tuple[str, str, dict[str, Any] | None] | None, set[str] | None]] = [
    (["search", "release"], ("POST", "/api/v1/memory/search", {"query": "release"}),
     {"episodes"}),
    (["insights", "--user", "ada"], ("GET", "/api/v1/memory/insights?user_id=ada", None),
     {"insights", "total"}),
    (["explain", "{insight}", "--user", "ada"],
     ("GET", "/api/v1/memory/explain/{insight}?user_id=ada", None), None),
    (["worldview", "--user", "ada"], ("GET", "/api/v1/memory/worldview?user_id=ada", None),
     {"convictions"}),
    (["relations", "--user", "ada"], ("GET", "/api/v1/memory/relations?user_id=ada", None),
     {"relations"}),
    (["lessons", "--task-type", "deploy", "--user", "ada"],
     ("GET", "/api/v1/lessons?task_type=deploy&user_id=ada", None), {"lessons", "total"}),
    (["briefing", "release", "--user", "ada"],
     ("POST", "/api/v1/memory/briefing", {"user_id": "ada", "query": "release"}), None),
    (["reports"], ("GET", "/api/v1/ome/reports", None), {"reports"}),
    (["runs"], ("GET", "/api/v1/ome/runs", None), {"runs"}),
    (["strategies"], ("GET", "/api/v1/ome/strategies", None), None),
    (["status"], ("GET", "/api/v1/status", None), None),
    (["lint"], ("GET", "/api/v1/lint", None), None),
    # no route: an object of their own, never wrapped
    (["reindex"], None, {"entries_upserted", "files_synced"}),
    (["provenance", "{episode}", "--user", "ada"], None, {"sentences"}),
    (["clusters"], None, {"clusters"}),
    (["settings"], None, {"strategies"}),
]


@pytest.mark.parametrize(("argv", "route", "keys"), SHAPES, ids=[s[0][0] for s in SHAPES])
def test_json_is_what_the_api_answers_under_data(
        root: Path, seeded: dict[str, str], argv: list[str],
        route: tuple[str, str, dict[str, Any] | None] | None, keys: set[str] | None) -> None:
    argv = [a.format(**seeded) for a in argv]
    result = CliRunner().invoke(cli, [*argv, "--json", "--root", str(root)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert isinstance(printed, dict) and "data" not in printed, list(printed)
    if route is not None:
        method, url, body = route
        answered = _api(root, method, url.format(**seeded), body)
        assert set(printed) == set(answered)
    if keys is not None:
        assert keys <= set(printed), sorted(printed)
