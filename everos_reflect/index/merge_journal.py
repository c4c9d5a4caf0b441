"""The ``merge_journal`` table: Reflection's merges in flight (see ``strategies/journal.py``).

Storage only — one row per merge, holding the plan as JSON and the step it reached; the commit
protocol and recovery that read and write it live with Reflection. Kept here so that SQL stays
inside :mod:`everos_reflect.index`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from everos_reflect.index.db import connect_to_read, db_path, transaction, utcnow_iso
from everos_reflect.model import UserRef


def insert(conn: sqlite3.Connection, row_id: str, ref: UserRef, cluster_id: str,
           plan_json: str, step: str) -> None:
    """A new row, in its own transaction (before the merge's first Markdown write)."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO merge_journal (id, app_id, project_id, user_id, cluster_id, plan, step, "
            "created_at) VALUES (?,?,?,?,?,?,?,?)",
            (row_id, ref.app, ref.project, ref.user_id, cluster_id, plan_json, step,
             utcnow_iso()))


def set_step(conn: sqlite3.Connection, row_id: str, plan_json: str, step: str) -> None:
    """Record the step a merge reached (with its plan as of now), in its own transaction."""
    with transaction(conn):
        conn.execute("UPDATE merge_journal SET plan=?, step=? WHERE id=?",
                     (plan_json, step, row_id))


def insert_many(conn: sqlite3.Connection,
                rows: Sequence[tuple[str, UserRef, str, str, str]]) -> None:
    """New rows ``(id, ref, cluster_id, plan JSON, step)``, all in one transaction (a batch of
    merges journalled before its first Markdown write)."""
    now = utcnow_iso()
    with transaction(conn):
        conn.executemany(
            "INSERT INTO merge_journal (id, app_id, project_id, user_id, cluster_id, plan, step, "
            "created_at) VALUES (?,?,?,?,?,?,?,?)",
            [(row_id, ref.app, ref.project, ref.user_id, cluster_id, plan_json, step, now)
             for row_id, ref, cluster_id, plan_json, step in rows])


def set_steps(conn: sqlite3.Connection, rows: Sequence[tuple[str, str]], step: str) -> None:
    """Record that every row ``(id, plan JSON)`` reached ``step``, in one transaction."""
    with transaction(conn):
        conn.executemany("UPDATE merge_journal SET plan=?, step=? WHERE id=?",
                         [(plan_json, step, row_id) for row_id, plan_json in rows])


def delete(conn: sqlite3.Connection, row_id: str) -> None:
    """Remove a finished merge's row; inside the caller's transaction."""
    conn.execute("DELETE FROM merge_journal WHERE id=?", (row_id,))


def rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``(plan JSON, step)`` of every row, oldest first."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT plan, step FROM merge_journal ORDER BY created_at, id")]


def rows_at(conn: sqlite3.Connection, step: str) -> list[tuple[str, str]]:
    """``(row id, plan JSON)`` of every row at ``step``, oldest first."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT id, plan FROM merge_journal WHERE step = ? ORDER BY created_at, id", (step,))]


def row_mentioning(conn: sqlite3.Connection, ref: UserRef, text: str, *,
                   except_step: str | None = None) -> str | None:
    """The id of a row of ``ref`` whose plan mentions ``text`` (an entry id), if any (rows at
    ``except_step`` left out)."""
    row = conn.execute(
        "SELECT id FROM merge_journal WHERE app_id=? AND project_id=? AND user_id=? "
        "AND plan LIKE ? AND step IS NOT ?",
        (ref.app, ref.project, ref.user_id, f"%{text}%", except_step)).fetchone()
    return None if row is None else str(row[0])


def has_rows(root: Path) -> bool:
    """Whether ``root``'s journal holds rows, read without creating or migrating anything
    (cheap enough to ask before every command)."""
    path = db_path(root)
    if not path.exists():
        return False
    try:
        conn = connect_to_read(path, timeout=5.0)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("SELECT 1 FROM merge_journal LIMIT 1").fetchone() is not None
    except sqlite3.Error:  # no journal table yet (a root never migrated that far)
        return False
    finally:
        conn.close()


__all__ = ["delete", "has_rows", "insert", "insert_many", "row_mentioning", "rows", "rows_at",
           "set_step", "set_steps"]
