"""CLI commands on a root in an unusual state (never indexed, invalid ``ome.toml``, a daemon
serving it): each says what is true, exits accordingly and leaves nothing half-made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from everos_reflect.cli.main import cli
from everos_reflect.index.db import db_path


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("EVEROS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root with one Episode that no command has indexed yet."""
    path = tmp_path / "root"
    assert run("init", str(path)).exit_code == 0
    added = run("add", "--root", str(path), "--user", "u1", "--subject", "S",
                "--content", "hello world", "--timestamp", "2026-10-12T10:00:00+00:00")
    assert added.exit_code == 0, added.output
    assert not db_path(path).exists()
    return path


def episodes(root: Path) -> dict[str, object]:
    result = run("status", "--root", str(root), "--json")
    doc = json.loads(result.stdout)
    return {"from": doc["counts_from"], "live": doc["totals"]["episode"]["live"]}


@pytest.mark.parametrize("name", ["reflect_episodes", "no_such_strategy"])
def test_trigger_refused_on_a_never_indexed_root_leaves_no_index(root: Path, name: str) -> None:
    result = run("trigger", name, "--root", str(root))
    assert result.exit_code in (1, 4), result.output
    assert not db_path(root).exists()
    assert episodes(root) == {"from": "markdown", "live": 1}


def test_status_counts_from_the_markdown_while_an_empty_index_holds_no_log(root: Path) -> None:
    from everos_reflect.index import db as dbmod

    dbmod.connect(root).close()  # made by an older version, or any command that opened it
    assert episodes(root) == {"from": "markdown", "live": 1}
    text = run("status", "--root", str(root)).stdout
    assert "index: not built yet" in text
    # once built, the index is read
    assert run("reindex", "--root", str(root)).exit_code == 0
    assert episodes(root) == {"from": "index", "live": 1}


def test_reports_on_a_never_indexed_root_leaves_no_index(root: Path) -> None:
    result = run("reports", "--root", str(root), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not db_path(root).exists()
