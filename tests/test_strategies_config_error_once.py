"""``strategies --json``, the API's ``/ome/strategies`` and ``fleet status --json`` say an
invalid strategy configuration once, as ``status`` does: ``config.strategies_error``, each
row saying only ``config_invalid``. Every row repeated the whole error, seven times over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.embedding.base import HashEmbedder
from everos_reflect.engine.registry import known_strategies
from everos_reflect.runtime import Runtime
from tests.api_client import ApiClient

pytestmark = pytest.mark.usefixtures("no_everos_env")

BAD = '[strategies.reflect_episodes]\nenabled = true\nmax_clusters_per_run = "ten"\n'
KEY = "strategies.reflect_episodes.max_clusters_per_run: must be"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_said_once(doc: dict[str, object], text: str) -> None:
    error = doc["config"]["strategies_error"]  # type: ignore[index]
    assert KEY in error
    rows = doc["strategies"]
    assert [r["name"] for r in rows] == known_strategies()  # type: ignore[union-attr]
    for row in rows:  # type: ignore[union-attr]
        assert "config_error" not in row
        assert row["config_invalid"] is True
    assert text.count("max_clusters_per_run") == 1, text


def test_strategies_json_says_the_config_error_once(root: Path) -> None:
    (root / "ome.toml").write_text(BAD)
    result = run("strategies", "--root", str(root), "--json")
    assert result.exit_code == 1  # as before: nothing runs until it is fixed
    assert_said_once(json.loads(result.stdout), result.stdout)


def test_strategies_json_of_a_valid_config_has_no_strategies_error(root: Path) -> None:
    (root / "ome.toml").write_text("[strategies.reflect_episodes]\nenabled = true\n")
    result = run("strategies", "--root", str(root), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["config"] == {"in_force": "ome.toml"}
    assert {r["config_invalid"] for r in doc["strategies"]} == {False}
    assert {r["via"] for r in doc["strategies"]} == {"in-process"}


def test_the_api_strategies_say_the_config_error_once(root: Path) -> None:
    (root / "ome.toml").write_text(BAD)
    runtime = Runtime(root, embedder=HashEmbedder(16))
    try:
        resp = ApiClient(runtime)("GET", "/api/v1/ome/strategies")
    finally:
        runtime.close()
    assert resp.status_code == 200, resp.text
    assert_said_once(resp.json()["data"], resp.text)


def test_fleet_status_json_says_each_roots_config_error_once(tmp_path: Path) -> None:
    from tests.fleet_support import build_root
    from tests.test_fleet_cli import _fleet

    build_root(tmp_path / "shard-a")
    build_root(tmp_path / "shard-b", ome=BAD)
    result = run("fleet", "status", "--fleet", _fleet(tmp_path), "--json")
    assert result.exit_code == 1
    a, b = json.loads(result.stdout)["roots"]
    assert a["config"] == {"in_force": "ome.toml"}
    assert {r["config_invalid"] for r in a["strategies"]} == {False}
    assert KEY in b["config"]["strategies_error"]
    for row in b["strategies"]:
        assert "config_error" not in row and row["config_invalid"] is True
    # once: not one copy per strategy, nor a second in the root's ``config_error``
    assert result.stdout.count("max_clusters_per_run") == 1, result.stdout
    assert b["config"]["in_force"] == "none" and "config_error" not in b


def test_the_daemon_client_reads_the_error_back_for_each_row() -> None:
    from everos_reflect.status import rows_of_document, strategies_document

    rows = [{"name": "a", "config_error": "bad", "config_in_force": "none"},
            {"name": "b", "config_error": "bad", "config_in_force": "none"}]
    doc = strategies_document(rows)
    assert doc["config"] == {"in_force": "none", "strategies_error": "bad"}
    assert doc["strategies"] == [{"name": "a", "config_invalid": True},
                                 {"name": "b", "config_invalid": True}]
    assert rows_of_document(doc) == rows
    # a daemon of an earlier version answers the rows with their own config_error
    assert rows_of_document({"strategies": rows}) == rows
