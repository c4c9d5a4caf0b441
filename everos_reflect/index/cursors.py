"""Changes cursors: what each strategy has already consumed of its sources, per owner.

A tier reads "what changed since my last committed run" (seed 004's ``kind: changes``). The
cursor is the set of ``(entry id, text hash)`` pairs the strategy consumed; the window of a run
is every candidate not in it (:func:`everos_reflect.strategies.beliefs.window`). The cursor is
advanced by exactly the run's window, inside the transaction that records the run's outcome, so
a crash before that point re-reads the same window, and entries written while the run was busy
wait for the next one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence

from everos_reflect.index.db import transaction, utcnow_iso
from everos_reflect.model import UserRef


def consumed(conn: sqlite3.Connection, strategy: str, ref: UserRef) -> set[tuple[str, str]]:
    """Every ``(entry id, text hash)`` ``strategy`` consumed for ``ref``."""
    rows = conn.execute(
        "SELECT entry_id, text_hash FROM change_cursor WHERE strategy = ? AND app_id = ? "
        "AND project_id = ? AND user_id = ?", (strategy, ref.app, ref.project, ref.user_id))
    return {(r["entry_id"], r["text_hash"]) for r in rows}


def rows(conn: sqlite3.Connection, strategy: str,
         ref: UserRef | None = None) -> list[tuple[UserRef, str, str, str | None]]:
    """``(owner, entry id, text hash, run id)`` of everything ``strategy`` consumed (for
    ``ref``, else for every owner)."""
    sql, params = ("SELECT app_id, project_id, user_id, entry_id, text_hash, run_id FROM "
                   "change_cursor WHERE strategy = ?"), [strategy]
    if ref is not None:
        sql += " AND app_id = ? AND project_id = ? AND user_id = ?"
        params += [ref.app, ref.project, ref.user_id]
    return [(UserRef(r[0], r[1], r[2]), r[3], r[4], r[5]) for r in conn.execute(sql, params)]


def advance(conn: sqlite3.Connection, strategy: str, ref: UserRef,
            items: Mapping[str, str], run_id: str | None) -> None:
    """Mark ``items`` (id → text hash) consumed; inside the caller's transaction."""
    now = utcnow_iso()
    conn.executemany(
        "INSERT OR IGNORE INTO change_cursor (strategy, app_id, project_id, user_id, entry_id, "
        "text_hash, run_id, consumed_at) VALUES (?,?,?,?,?,?,?,?)",
        [(strategy, ref.app, ref.project, ref.user_id, i, h, run_id, now)
         for i, h in items.items()])


def forget(conn: sqlite3.Connection, strategy: str, ref: UserRef,
           rows: Iterable[tuple[str, str]]) -> int:
    """Remove ``rows`` (entry id, text hash) from what ``strategy`` consumed for ``ref``,
    inside the caller's transaction (the one that advances the cursor); returns rows removed.
    For bookkeeping rows that can never match again (a pair of convictions no longer
    current): kept, they only grew the table."""
    before = conn.total_changes
    conn.executemany(
        "DELETE FROM change_cursor WHERE strategy = ? AND app_id = ? AND project_id = ? "
        "AND user_id = ? AND entry_id = ? AND text_hash = ?",
        [(strategy, ref.app, ref.project, ref.user_id, i, h) for i, h in rows])
    return conn.total_changes - before


def reset(conn: sqlite3.Connection, strategy: str, ref: UserRef | None = None) -> int:
    """Forget what ``strategy`` consumed (for one owner, or all); returns rows removed."""
    sql, params = "DELETE FROM change_cursor WHERE strategy = ?", [strategy]
    if ref is not None:
        sql += " AND app_id = ? AND project_id = ? AND user_id = ?"
        params += [ref.app, ref.project, ref.user_id]
    return conn.execute(sql, params).rowcount


def follow_moved(conn: sqlite3.Connection, held: Iterable[str], gone: Iterable[UserRef],
                 folder_gone: Callable[[UserRef], bool]) -> int:
    """Give what a user whose folder is gone (renamed or moved by hand) consumed to the user
    whose logs now hold those entries; returns the rows moved. Inside the caller's
    transaction, after the index rows are written, as the audit rows follow
    (:func:`everos_reflect.index.audit.follow_moved_derivations`).

    Left under the old name, the cursor was no one's: after ``mv users/u_andrew
    users/u_bob`` every tier read Bob's whole history as new, and with a language model paid
    for the same window again. ``held``: ids of entries just indexed; ``gone``: users whose
    entries just left the index. Only an owner with no entry left in the index and no folder
    is looked at. Each row goes to the one other user (folder there) holding an entry of its
    id; never to one of two holders (a copied folder, then the original renamed: both copies
    keep reading it as new, as before). The rows naming no held entry (an entry deleted
    since, a pair of convictions) follow when every other row went to that one user."""
    ids = sorted(set(held))
    owners = {ref for ref in gone if not _indexed(conn, ref)}
    if ids:
        owners.update(_ref(row) for row in conn.execute(
            "SELECT DISTINCT c.app_id, c.project_id, c.user_id FROM change_cursor c "
            "WHERE c.entry_id IN (SELECT value FROM json_each(?)) AND NOT EXISTS ("
            "SELECT 1 FROM entries e WHERE e.app_id = c.app_id AND e.project_id = c.project_id "
            "AND e.user_id = c.user_id)", (json.dumps(ids),)))
    moved = 0
    for owner in sorted(o for o in owners if o is not None and folder_gone(o)):
        rows = conn.execute(
            "SELECT strategy, entry_id, text_hash FROM change_cursor WHERE app_id = ? AND "
            "project_id = ? AND user_id = ?", (owner.app, owner.project, owner.user_id)
        ).fetchall()
        holders: dict[str, set[UserRef]] = {}
        for app, project, user, eid in conn.execute(
                "SELECT app_id, project_id, user_id, id FROM entries WHERE id IN "
                "(SELECT value FROM json_each(?))", (json.dumps(sorted({r[1] for r in rows})),)):
            holders.setdefault(eid, set()).add(UserRef(app, project, user))
        alive = {eid: {ref for ref in refs if not folder_gone(ref)}
                 for eid, refs in holders.items()}
        moves = {(r[0], r[1], r[2]): next(iter(alive[r[1]])) for r in rows
                 if len(alive.get(r[1], ())) == 1}
        if moves and len(set(moves.values())) == 1 and len(moves) == sum(
                1 for r in rows if alive.get(r[1])):
            to = next(iter(moves.values()))
            moves = {(r[0], r[1], r[2]): to for r in rows}
        conn.executemany(
            "UPDATE OR REPLACE change_cursor SET app_id = ?, project_id = ?, user_id = ? "
            "WHERE strategy = ? AND app_id = ? AND project_id = ? AND user_id = ? AND "
            "entry_id = ? AND text_hash = ?",
            [(to.app, to.project, to.user_id, strategy, owner.app, owner.project,
              owner.user_id, eid, text_hash) for (strategy, eid, text_hash), to in moves.items()])
        moved += len(moves)
    return moved


def _indexed(conn: sqlite3.Connection, ref: UserRef) -> bool:
    """Whether the index holds any entry of ``ref``."""
    return conn.execute(
        "SELECT 1 FROM entries WHERE app_id = ? AND project_id = ? AND user_id = ? LIMIT 1",
        (ref.app, ref.project, ref.user_id)).fetchone() is not None


def _ref(row: Sequence[str]) -> UserRef | None:
    """The user a cursor row names; None for a name edited by hand into no valid name."""
    try:
        return UserRef(row[0], row[1], row[2])
    except ValueError:  # InvalidId
        return None


# -- commit intents: a tier's commit in flight -----------------------------------------------


def begin_intent(conn: sqlite3.Connection, strategy: str, ref: UserRef, key: str,
                 items: Mapping[str, str], run_id: str | None) -> None:
    """Note, in its own transaction and before any Markdown write, that ``strategy`` is about
    to commit the window ``items`` (outputs tagged with ``key``) for ``ref``."""
    with transaction(conn):
        conn.execute(
            "INSERT OR REPLACE INTO commit_intent (strategy, app_id, project_id, user_id, key, "
            "items, run_id, created_at) VALUES (?,?,?,?,?,?,?,?)",
            (strategy, ref.app, ref.project, ref.user_id, key, json.dumps(dict(items)),
             run_id, utcnow_iso()))


def begin_intents(conn: sqlite3.Connection, strategy: str, ref: UserRef,
                  intents: Mapping[str, Mapping[str, str]]) -> None:
    """:func:`begin_intent` for several keys (key → items) in one transaction, with no run."""
    if not intents:
        return
    now = utcnow_iso()
    with transaction(conn):
        conn.executemany(
            "INSERT OR REPLACE INTO commit_intent (strategy, app_id, project_id, user_id, key, "
            "items, run_id, created_at) VALUES (?,?,?,?,?,?,NULL,?)",
            [(strategy, ref.app, ref.project, ref.user_id, key, json.dumps(dict(items)), now)
             for key, items in intents.items()])


def end_intent(conn: sqlite3.Connection, strategy: str, ref: UserRef, key: str) -> None:
    """Forget the intent; inside the caller's transaction (the one that moves the cursor)."""
    conn.execute("DELETE FROM commit_intent WHERE strategy=? AND app_id=? AND project_id=? "
                 "AND user_id=? AND key=?", (strategy, ref.app, ref.project, ref.user_id, key))


def intents(conn: sqlite3.Connection, strategy: str) -> list[tuple[UserRef, str, dict[str, str]]]:
    """``(owner, key, window)`` of every commit of ``strategy`` a crash interrupted (or one in
    flight: call it under the strategy's lock), oldest first."""
    rows = conn.execute(
        "SELECT app_id, project_id, user_id, key, items FROM commit_intent WHERE strategy = ? "
        "ORDER BY created_at", (strategy,)).fetchall()
    return [(UserRef(r[0], r[1], r[2]), r[3], dict(json.loads(r[4]))) for r in rows]


def has_intents(conn: sqlite3.Connection) -> bool:
    """Whether any strategy has an interrupted commit."""
    return conn.execute("SELECT 1 FROM commit_intent LIMIT 1").fetchone() is not None


__all__ = ["advance", "begin_intent", "begin_intents", "consumed", "end_intent", "forget",
           "has_intents", "intents", "reset", "rows"]
