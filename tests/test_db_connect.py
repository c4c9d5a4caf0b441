"""``index.db.connect`` on a brand-new root opened by several threads at once.

A watcher thread and a reader each opening a fresh ``system.db`` raced on the switch to WAL:
SQLite answers that pragma with "database is locked" without running the busy handler, so one
of them failed (a reconcile scan logged as failed, a flaky watcher test).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from everos_reflect.index import db as dbmod


def test_many_threads_opening_a_fresh_root_all_succeed(tmp_path: Path) -> None:
    # Before the fix about one trial in twenty failed; forty trials make a silent regression
    # very unlikely to pass.
    for trial in range(40):
        root = tmp_path / f"r{trial}"
        errors: list[BaseException] = []

        def open_once(root: Path = root, errors: list[BaseException] = errors) -> None:
            try:
                dbmod.connect(root).close()
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=open_once) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], f"trial {trial}: {errors[0]!r}"
        conn = dbmod.connect(root, readonly=True)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()


class _Flaky:
    """Stands in for a connection whose WAL switch is refused a few times."""

    def __init__(self, refusals: int, message: str = "database is locked") -> None:
        self.refusals = refusals
        self.message = message
        self.calls = 0

    def execute(self, sql: str) -> _Flaky:
        assert sql == "PRAGMA journal_mode = WAL"
        self.calls += 1
        if self.calls <= self.refusals:
            raise sqlite3.OperationalError(self.message)
        return self

    def fetchall(self) -> list[tuple[str]]:
        return [("wal",)]


def test_the_wal_switch_waits_out_a_locked_database() -> None:
    conn = _Flaky(refusals=3)
    dbmod._enable_wal(conn, deadline_s=5.0)  # type: ignore[arg-type]
    assert conn.calls == 4


def test_the_wal_switch_gives_up_at_its_deadline() -> None:
    conn = _Flaky(refusals=10**9)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        dbmod._enable_wal(conn, deadline_s=0.05)  # type: ignore[arg-type]


def test_other_errors_are_not_retried() -> None:
    conn = _Flaky(refusals=1, message="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        dbmod._enable_wal(conn, deadline_s=5.0)  # type: ignore[arg-type]
    assert conn.calls == 1


def _blocked_index(root: Path) -> Path:
    """A root whose ``system.db`` cannot be opened: a folder sits where the file goes (what a
    read-only mount or a full disk also give: "unable to open database file")."""
    (root / "ome.toml").write_text("")
    db = dbmod.db_path(root)
    db.mkdir(parents=True)
    return db


def test_an_index_that_cannot_be_opened_is_a_domain_error_naming_it(tmp_path: Path) -> None:
    from everos_reflect.errors import EverosError, IndexUnavailable

    db = _blocked_index(tmp_path)
    with pytest.raises(IndexUnavailable) as caught:
        dbmod.connect(tmp_path)
    assert isinstance(caught.value, EverosError)
    assert isinstance(caught.value, sqlite3.OperationalError)  # readers that degrade still do
    assert str(caught.value).startswith(f"cannot open the index {db}: {db} is a folder, not a "
                                        "database file")


@pytest.mark.parametrize("args", [["reports"], ["runs"], ["strategies"], ["clusters"],
                                  ["search", "dog"], ["trigger", "reflect_episodes"]])
def test_cli_commands_on_an_index_that_cannot_be_opened_say_so_in_one_line(
        tmp_path: Path, args: list[str]) -> None:
    from click.testing import CliRunner

    from everos_reflect.cli.main import cli

    db = _blocked_index(tmp_path)
    result = CliRunner().invoke(cli, [*args, "--root", str(tmp_path)])
    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: cannot open the index {db}: {db} is a folder, not a "
                           "database file")


def test_the_api_answers_503_for_an_index_that_cannot_be_opened() -> None:
    from everos_reflect.api.ops import error_code
    from everos_reflect.errors import IndexUnavailable

    assert error_code(IndexUnavailable("/r/system.db", "disk I/O error")) == \
        (503, "index_unavailable")



def test_the_api_answers_503_for_an_index_that_is_not_a_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # system.db found to be junk while serving (overwritten, truncated) is the server's fault,
    # not the request's: it was answered 400 bad_request.
    from everos_reflect.embedding import HashEmbedder
    from everos_reflect.errors import IndexUnreadable
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import Settings
    from tests.api_client import ApiClient

    dbmod.connect(tmp_path).close()  # an index that was built (serve builds it at start)
    runtime = Runtime(tmp_path, Settings(), embedder=HashEmbedder(16))
    try:
        client = ApiClient(runtime)

        def junk() -> sqlite3.Connection:
            raise IndexUnreadable(dbmod.db_path(tmp_path), "file is not a database")

        monkeypatch.setattr(runtime, "db", junk)
        answer = client("GET", "/api/v1/ome/runs")
    finally:
        monkeypatch.undo()
        runtime.close()
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert body["error"]["code"] == "index_unreadable"
    assert "is not a readable SQLite database" in body["error"]["message"]
