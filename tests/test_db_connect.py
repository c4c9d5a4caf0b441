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
