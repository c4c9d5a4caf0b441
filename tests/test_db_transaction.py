"""``index.db.transaction``: the long-lived connection leaves every block outside a transaction,
and the error that ended the block is the one raised."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from everos_reflect.index.db import connect, transaction


def _deferred_fk(conn: sqlite3.Connection) -> None:
    """A parent/child pair whose foreign key is checked at COMMIT: an honest way to make a
    COMMIT fail, as a full disk or an I/O error can at that point too."""
    conn.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE child(id INTEGER PRIMARY KEY, pid INTEGER "
                 "REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")


def test_a_failed_commit_is_rolled_back_and_the_connection_stays_usable(root: Path) -> None:
    # The failed COMMIT left the connection inside the transaction: every later block failed
    # with "cannot start a transaction within a transaction" (the daemon's connection until a
    # restart), and the refused rows were still pending for whichever COMMIT came next.
    conn = connect(root)
    _deferred_fk(conn)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"), transaction(conn):
        conn.execute("INSERT INTO child VALUES (1, 99)")
    assert not conn.in_transaction

    with transaction(conn):
        conn.execute("INSERT INTO parent VALUES (5)")

    assert conn.execute("SELECT COUNT(*) FROM child").fetchone()[0] == 0
    assert [tuple(r) for r in conn.execute("SELECT id FROM parent")] == [(5,)]
    conn.close()


def test_a_full_database_reports_full_not_a_failed_rollback(root: Path) -> None:
    # SQLITE_FULL can roll the transaction back by itself; the ROLLBACK that followed then
    # raised "cannot rollback - no transaction is active", hiding why the write failed.
    conn = connect(root)
    conn.execute("CREATE TABLE t(x TEXT)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(sqlite3.OperationalError, match="full"), transaction(conn):
        for _ in range(100):
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 3000,))
    assert not conn.in_transaction
    conn.execute(f"PRAGMA max_page_count = {pages + 1000}")
    with transaction(conn):
        conn.execute("INSERT INTO t VALUES ('ok')")
    assert [tuple(r) for r in conn.execute("SELECT x FROM t")] == [("ok",)]
    conn.close()


def test_the_error_inside_the_block_is_raised_and_rolled_back(root: Path) -> None:
    conn = connect(root)
    conn.execute("CREATE TABLE t(x TEXT)")
    with pytest.raises(KeyError), transaction(conn):
        conn.execute("INSERT INTO t VALUES ('lost')")
        raise KeyError("boom")
    assert not conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0
    conn.close()
