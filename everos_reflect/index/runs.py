"""The engine's coordination tables: ``runs`` (one row per strategy run) and ``strategy_state``
(the scheduler's per-strategy memory). Storage only; the engine decides what goes in.

Each writer runs in its own transaction, so a run's row is visible to ``status`` and the API the
moment it changes.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from everos_reflect.index.db import transaction, utcnow_iso


def start(conn: sqlite3.Connection, run_id: str, strategy: str, trigger: str) -> None:
    """A new ``running`` row for this process."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO runs(id, strategy, trigger, started_at, status, attempt, pid) "
            "VALUES (?, ?, ?, ?, 'running', 1, ?)",
            (run_id, strategy, trigger, utcnow_iso(), os.getpid()))


def set_attempt(conn: sqlite3.Connection, run_id: str, attempt: int, error: str) -> None:
    with transaction(conn):
        conn.execute("UPDATE runs SET attempt = ?, error = ? WHERE id = ?",
                     (attempt, error, run_id))


def finish(conn: sqlite3.Connection, run_id: str, status: str, error: str | None,
           counts: dict[str, int], attempt: int, reason: str | None = None) -> None:
    """The run's final state (only a row still ``running`` changes). ``reason``: why a run
    that went fine had nothing to do, stored with the run so a restart does not lose it."""
    with transaction(conn):
        conn.execute(
            "UPDATE runs SET status = ?, error = ?, counts = ?, attempt = ?, finished_at = ?, "
            "reason = ? WHERE id = ? AND status = 'running'",
            (status, error, json.dumps(counts), attempt, utcnow_iso(), reason, run_id))


def fail(conn: sqlite3.Connection, run_id: str, error: str) -> None:
    """A run whose own bookkeeping failed: ``failed`` with ``error``, its attempt kept (only a
    row still ``running`` changes)."""
    with transaction(conn):
        conn.execute(
            "UPDATE runs SET status = 'failed', error = ?, finished_at = ? "
            "WHERE id = ? AND status = 'running'", (error, utcnow_iso(), run_id))


def abandon(conn: sqlite3.Connection, run_id: str, reason: str) -> None:
    """Record a run whose process went away (only a row still ``running`` changes)."""
    with transaction(conn):
        conn.execute(
            "UPDATE runs SET status = 'abandoned', error = ?, finished_at = ? "
            "WHERE id = ? AND status = 'running'", (reason, utcnow_iso(), run_id))


def running(conn: sqlite3.Connection) -> list[tuple[str, int | None, str]]:
    """``(run id, pid, strategy)`` of every row still ``running``."""
    return [(r[0], r[1], r[2]) for r in conn.execute(
        "SELECT id, pid, strategy FROM runs WHERE status = 'running'")]


def _row(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    # an index opened read-only before migration 0023 has no column: the same shape anyway
    out.setdefault("reason", None)
    try:
        counts = json.loads(out.get("counts") or "{}")
    except ValueError:
        counts = {}
    # a cell edited by hand or cut short that is JSON but no object of whole numbers ("[1]",
    # "5") is read as none, as one that is no JSON is: `runs` ended in an internal error
    # ("'list' object has no attribute 'items'") and GET /ome/runs answered "counts": 5
    whole = isinstance(counts, dict) and all(
        isinstance(n, int) and not isinstance(n, bool) for n in counts.values())
    out["counts"] = counts if whole else {}
    return out


def get(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """One run (``counts`` decoded), or ``None``."""
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else _row(row)


def newest(conn: sqlite3.Connection, *, limit: int = 20,
           strategy: str | None = None) -> list[dict[str, Any]]:
    """The newest runs first (``counts`` decoded)."""
    sql = "SELECT * FROM runs"
    params: list[Any] = []
    if strategy:
        sql += " WHERE strategy = ?"
        params.append(strategy)
    sql += " ORDER BY started_at DESC, id DESC LIMIT ?"
    params.append(max(0, int(limit)))
    return [_row(r) for r in conn.execute(sql, params)]


# -- strategy_state -----------------------------------------------------------------------------


def load_state(conn: sqlite3.Connection, strategy: str) -> dict[str, Any]:
    """The scheduler's saved state for ``strategy`` (``{}`` when none)."""
    row = conn.execute("SELECT state FROM strategy_state WHERE strategy = ?",
                       (strategy,)).fetchone()
    return json.loads(row[0]) if row else {}


def save_state(conn: sqlite3.Connection, strategy: str, state: dict[str, Any]) -> None:
    with transaction(conn):
        conn.execute(
            "INSERT INTO strategy_state(strategy, state) VALUES (?, ?) "
            "ON CONFLICT(strategy) DO UPDATE SET state = excluded.state",
            (strategy, json.dumps(state)))


__all__ = ["abandon", "finish", "get", "load_state", "newest", "running", "save_state",
           "set_attempt", "start"]
