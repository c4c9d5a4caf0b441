"""A read of a memory root that is not there creates nothing: a clear error naming the path.

``Runtime`` opened on a path with no folder (a mistyped ``--root`` reaching the library, the
API or an MCP server built on it) created ``<path>/.index/sqlite/system.db`` on its first
read, so the mistake became an empty root that every later command accepted; the API's
insights and worldview answered an empty list for a root that had been deleted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from everos_reflect.api.app import create_app
from everos_reflect.api.mcp_server import MCPError, call, tools
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.engine import Engine
from everos_reflect.errors import NoRoot
from everos_reflect.model import Kind, UserRef
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings

READS = ["/api/v1/memory/insights?user_id=u1", "/api/v1/memory/worldview?user_id=u1",
         "/api/v1/memory/relations?user_id=u1", "/api/v1/ome/strategies", "/api/v1/ome/runs",
         "/api/v1/status"]


def _runtime(path: Path) -> Runtime:
    return Runtime(path, Settings(), embedder=HashEmbedder(16))


def test_opening_the_index_of_a_missing_root_names_it_and_creates_nothing(
        tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    rt = _runtime(missing)
    with pytest.raises(NoRoot, match=f"no memory root at {missing}: create one with"):
        rt.db()
    with pytest.raises(NoRoot):
        rt.vectors  # noqa: B018 - the property opens LanceDB
    outcome = Engine(rt, recover=False).trigger("reflect_episodes", force=True, timeout=5)
    assert outcome.status == "failed" and f"no memory root at {missing}" in str(outcome.error)
    assert not missing.exists()
    rt.close()


def test_the_first_append_of_a_new_root_still_creates_it(tmp_path: Path) -> None:
    new = tmp_path / "new"
    rt = _runtime(new)
    entry = rt.store.append(UserRef.of("u1"), Kind.EPISODE, {
        "timestamp": "2026-10-12T09:00:00+00:00", "parent_type": "memcell",
        "parent_id": "mc_1"}, {"Subject": "s", "Content": "c"})
    assert rt.db().execute("SELECT 1").fetchone()[0] == 1  # the root exists now
    assert rt.store.get(UserRef.of("u1"), entry.id).content == "c"
    rt.close()


@pytest.mark.parametrize("created", [False, True], ids=["never-created", "deleted"])
def test_api_reads_of_a_missing_root_are_503_naming_it(tmp_path: Path, created: bool) -> None:
    root = tmp_path / "root"
    if created:
        root.mkdir()
        (root / "ome.toml").write_text("")
    rt = _runtime(root)
    client = TestClient(create_app(rt, Engine(rt, recover=False)))
    if created:
        shutil.rmtree(root)
    for path in READS:
        answer = client.get(path)
        assert answer.status_code == 503, (path, answer.text)
        assert answer.json()["error"]["code"] == "root_gone"
        assert str(root) in answer.json()["error"]["message"]
    answer = client.post("/api/v1/memory/search", json={"query": "x"})
    assert answer.status_code == 503
    assert client.get("/api/v1/health").status_code == 200
    assert not root.exists()
    rt.close()


def test_an_mcp_read_of_a_missing_root_fails_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    rt = _runtime(missing)
    [insights] = [t for t in tools() if t.name == "insights"]
    with pytest.raises(MCPError) as caught:
        call(rt, insights, {"user_id": "u1"})
    assert caught.value.error.message == (
        f"no memory root at {missing}: create one with `everos-reflect init {missing}`")
    assert not missing.exists()
    rt.close()
