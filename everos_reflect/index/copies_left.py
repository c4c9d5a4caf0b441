"""The index reads of :func:`everos_reflect.strategies.journal.settle_copies_left`: the parts
of merges a user's logs hold without the merge's narrative, in the logs synced since the last
look (a user's folder copied by hand while a merge ran, the copy finished after the merge's
journal row went)."""

from __future__ import annotations

import sqlite3

from everos_reflect.index.db import transaction
from everos_reflect.model import UserRef

#: ``index_meta`` key: when the last look for copies left began (``utcnow_iso`` text, less a
#: little for the clocks of the processes that sync): the logs synced since are looked at next.
CHECKED_KEY = "copies_left_synced_since"

def ids_without_their_entry(conn: sqlite3.Connection, *, exempt: str,
                            synced_since: str | None) -> dict[UserRef, set[str]]:
    """Per user, the ids that entries of logs synced at ``synced_since`` or later (an
    ``utcnow_iso`` text; ``None``: every log) name, and that the user holds no entry of: the
    ``deprecated_by`` of an archived entry (``exempt``, the undo marker, and self-links
    aside) and the ``parent_id`` of a live atomic fact of an Episode. Asked at every
    recovery, so only the logs synced since the last one are read, from ``files`` (``CROSS
    JOIN``: each of those logs' entries by path): asked of every entry, as ``status`` asks,
    it took seconds at 300,000 entries."""
    if synced_since is None:
        source, args = "entries e", ()
    else:
        source = "files f CROSS JOIN entries e ON e.path = f.path"
        args = (synced_since,)
    recent = "" if synced_since is None else "f.synced_at >= ? AND "
    missing = ("NOT EXISTS (SELECT 1 FROM entries n WHERE n.app_id = e.app_id AND "
               "n.project_id = e.project_id AND n.user_id = e.user_id AND n.id = {})")
    rows = conn.execute(
        f"SELECT e.app_id, e.project_id, e.user_id, e.deprecated_by FROM {source} WHERE "
        f"{recent}e.deprecated_by IS NOT NULL AND e.deprecated_by NOT IN (?, e.id) AND "
        + missing.format("e.deprecated_by"), (*args, exempt)).fetchall()
    rows += conn.execute(
        f"SELECT e.app_id, e.project_id, e.user_id, e.parent_id FROM {source} WHERE "
        f"{recent}e.kind = 'atomic_fact' AND e.parent_type = 'episode' AND "
        "e.deprecated_by IS NULL AND e.parent_id IS NOT NULL AND "
        + missing.format("e.parent_id"), args).fetchall()
    found: dict[UserRef, set[str]] = {}
    for app, project, user, entry_id in rows:
        found.setdefault(UserRef(app, project, user), set()).add(str(entry_id))
    return found


def narratives_beside_their_sources(conn: sqlite3.Connection, *,
                                    synced_since: str | None) -> dict[UserRef, set[str]]:
    """Per user, the live narratives of logs synced at ``synced_since`` or later (``None``:
    every log) that name a live entry of that user among their ``sources``: a copy of a
    merge's folder taken after the narrative was written and before its sources were
    archived, finished after the merge's row went (or a hand edit:
    :func:`journal.settle_copies_left` tells them apart). Read as
    :func:`ids_without_their_entry` reads, from ``files`` (``CROSS JOIN`` keeps the order:
    the logs synced since, their narratives, each named source by the primary key; left to
    itself SQLite read every entry of the user for each narrative). Driven by the sources'
    logs instead (no index leads from a source to the narratives naming it), it read every
    narrative of each user with a log synced since, at every look."""
    if synced_since is None:
        source, recent, args = "entries e", "", ()
    else:
        source = "files f CROSS JOIN entries e ON e.path = f.path"
        recent, args = "f.synced_at >= ? AND ", (synced_since,)
    rows = conn.execute(
        f"SELECT DISTINCT e.app_id, e.project_id, e.user_id, e.id FROM {source} "
        "CROSS JOIN json_each(e.sources) j CROSS JOIN entries s ON s.app_id = e.app_id AND "
        "s.project_id = e.project_id AND s.user_id = e.user_id AND s.id = j.value "
        f"WHERE {recent}e.kind = 'episode' AND e.parent_type = 'cluster' AND "
        "e.deprecated_by IS NULL AND e.sources != '[]' AND json_valid(e.sources) AND "
        "s.deprecated_by IS NULL", args).fetchall()
    found: dict[UserRef, set[str]] = {}
    for app, project, user, entry_id in rows:
        found.setdefault(UserRef(app, project, user), set()).add(str(entry_id))
    return found


def synced_since(conn: sqlite3.Connection) -> str | None:
    """The time the next look starts from (``None``: never looked: every log)."""
    row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (CHECKED_KEY,)).fetchone()
    return str(row[0]) if row and row[0] else None


def set_synced_since(conn: sqlite3.Connection, value: str, *, previous: str | None) -> bool:
    """Record that every log synced before ``value`` was looked at, the last look having
    started from ``previous`` (:func:`synced_since`); returns whether anything was written.

    Only when the next look would read other logs: the first look, or a log synced at
    ``previous`` or later (the window moves past it). With none, the next look from
    ``previous`` reads exactly what one from ``value`` would (nothing was synced between):
    written at every recovery and run, the key cost a write transaction each time, and
    every reader a changed database."""
    if previous is not None and conn.execute(
            "SELECT 1 FROM files WHERE synced_at >= ? LIMIT 1", (previous,)).fetchone() is None:
        return False
    with transaction(conn):
        conn.execute("INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)",
                     (CHECKED_KEY, value))
    return True


__all__ = ["CHECKED_KEY", "ids_without_their_entry", "narratives_beside_their_sources",
           "set_synced_since", "synced_since"]
