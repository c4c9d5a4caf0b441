"""A root's system.db as an older release left it, to test the migrations that follow."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from everos_reflect.index import db as dbmod


def system_db_at(root: Path, last: str) -> sqlite3.Connection:
    """A new ``system.db`` under ``root`` migrated up to and including ``last`` only (e.g.
    ``"0010_commit_intents"``), foreign keys on as the daemon runs it."""
    names = [name for name, _ in dbmod.MIGRATIONS]
    path = dbmod.db_path(root)
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    dbmod.migrate(conn, dbmod.MIGRATIONS[: names.index(last) + 1])
    return conn
