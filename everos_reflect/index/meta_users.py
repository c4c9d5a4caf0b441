"""Lists of users kept in ``index_meta``: work owed to a user that must outlive the process.

Some work is noted in the transaction that makes it due and done later, outside it: the
cursors of a user whose folder went, given to the folder's new name once its entries turn
up (:mod:`everos_reflect.index.cursors`); the placing of a user's Episodes after a merge,
done at the end of a run or of a sync pass (:mod:`everos_reflect.clustering.service`). A
process killed in between leaves the list, and whoever reads it next does the work. Each
list is one ``index_meta`` row holding a JSON list of ``[app, project, user]``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

from everos_reflect.model import UserRef


def listed(conn: sqlite3.Connection, key: str) -> dict[UserRef, None]:
    """The users listed under ``key``, in the order kept (a value edited by hand into no
    list reads as none; a name edited into no valid name is left out)."""
    row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (key,)).fetchone()
    try:
        items = json.loads(row[0]) if row is not None else []
        refs = [user_of(item) for item in items if isinstance(item, list) and len(item) == 3]
    except (ValueError, TypeError):
        return {}
    return dict.fromkeys(ref for ref in refs if ref is not None)


def keep(conn: sqlite3.Connection, key: str, refs: Iterable[UserRef]) -> None:
    """List ``refs`` under ``key`` (in the caller's transaction), none: the row removed."""
    kept = [[r.app, r.project, r.user_id] for r in dict.fromkeys(refs)]
    if not kept:
        conn.execute("DELETE FROM index_meta WHERE key = ?", (key,))
        return
    conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)",
                 (key, json.dumps(kept)))


def user_of(row: Sequence[str]) -> UserRef | None:
    """The user a row names; None for a name edited by hand into no valid name."""
    try:
        return UserRef(str(row[0]), str(row[1]), str(row[2]))
    except (ValueError, TypeError):  # InvalidId
        return None
