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

from everos_reflect.index import meta_users
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


#: ``index_meta`` key of the users whose folder went while their cursor found no new holder
#: yet (:func:`follow_moved`): a JSON list of ``[app, project, user]``, a handful at most.
PENDING_KEY = "cursor_owners_gone"
#: The most users :data:`PENDING_KEY` keeps (the latest gone): a folder deleted for good
#: stays there until its entries turn up under another name, which they may never do.
MAX_PENDING = 64


def follow_moved(conn: sqlite3.Connection, held: Iterable[tuple[str, str]],
                 gone: Iterable[UserRef], folder_gone: Callable[[UserRef], bool]) -> int:
    """Give what a user whose folder is gone (renamed or moved by hand) consumed to the user
    whose logs now hold those entries; returns the rows moved. Inside the caller's
    transaction, after the index rows are written, as the audit rows follow
    (:func:`everos_reflect.index.audit.follow_moved_derivations`).

    Left under the old name, the cursor was no one's: after ``mv users/u_andrew
    users/u_bob`` every tier read Bob's whole history as new, and with a language model paid
    for the same window again. ``gone``: users whose entries just left the index (or, after
    a ``reindex``, every user a cursor names); ``held``: ``(id, text hash)`` of the entries
    just indexed. A user is looked at when its folder is gone and no entry of it is left in
    the index, and again, while its rows found no holder (:data:`PENDING_KEY`), when an
    entry of the same id and text is indexed: the scan may meet the new folder after the old
    one's removal. Each row goes to the one other user (folder there) holding an entry of its
    id and text; never to one of two (a copied folder, then the original renamed: both copies
    keep reading it as new, as before). The rows naming no such entry (an entry deleted
    since, a pair of convictions) follow when every other row went to that one user."""
    pairs = sorted(set(held))
    pending = _pending(conn)
    looked = [ref for ref in dict.fromkeys(gone) if ref not in pending and folder_gone(ref)
              and not _indexed(conn, ref) and _has_rows(conn, ref)]
    if pairs:
        looked += [ref for ref in pending if _names_any(conn, ref, pairs)]
    if not looked:
        return 0
    moved = 0
    for owner in looked:
        if not folder_gone(owner):  # back where it was (or another process put it back)
            pending.pop(owner, None)
            continue
        moved += _follow(conn, owner, folder_gone)
        pending.pop(owner, None)
        if _has_rows(conn, owner):
            pending[owner] = None  # the latest last
    kept = list(pending)[-MAX_PENDING:]
    meta_users.keep(conn, PENDING_KEY, kept)
    return moved


def owners(conn: sqlite3.Connection) -> list[UserRef]:
    """Every user a cursor row names (a name edited by hand into no valid name left out)."""
    return [ref for ref in map(meta_users.user_of, conn.execute(
        "SELECT DISTINCT app_id, project_id, user_id FROM change_cursor")) if ref is not None]


def _follow(conn: sqlite3.Connection, owner: UserRef,
            folder_gone: Callable[[UserRef], bool]) -> int:
    """:func:`follow_moved` for one user whose folder is gone; returns the rows moved."""
    rows = conn.execute(
        "SELECT strategy, entry_id, text_hash FROM change_cursor WHERE app_id = ? AND "
        "project_id = ? AND user_id = ?", (owner.app, owner.project, owner.user_id)).fetchall()
    holders: dict[tuple[str, str], set[UserRef]] = {}
    for app, project, user, eid, text_hash in conn.execute(
            "SELECT app_id, project_id, user_id, id, text_hash FROM entries WHERE id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(sorted({r[1] for r in rows})),)):
        ref = UserRef(app, project, user)
        if ref != owner and not folder_gone(ref):
            holders.setdefault((eid, text_hash), set()).add(ref)
    held = [r for r in rows if holders.get((r[1], r[2]))]
    moves = {tuple(r): next(iter(holders[(r[1], r[2])])) for r in held
             if len(holders[(r[1], r[2])]) == 1}
    if moves and len(moves) == len(held) and len(set(moves.values())) == 1:
        to = next(iter(moves.values()))
        moves = {tuple(r): to for r in rows}  # the rows naming no entry follow
    conn.executemany(
        "UPDATE OR REPLACE change_cursor SET app_id = ?, project_id = ?, user_id = ? "
        "WHERE strategy = ? AND app_id = ? AND project_id = ? AND user_id = ? AND "
        "entry_id = ? AND text_hash = ?",
        [(to.app, to.project, to.user_id, strategy, owner.app, owner.project, owner.user_id,
          eid, text_hash) for (strategy, eid, text_hash), to in moves.items()])
    return len(moves)


def _pending(conn: sqlite3.Connection) -> dict[UserRef, None]:
    """The users of :data:`PENDING_KEY`, oldest first (a value edited into no list: none)."""
    return meta_users.listed(conn, PENDING_KEY)


def _indexed(conn: sqlite3.Connection, ref: UserRef) -> bool:
    """Whether the index holds any entry of ``ref``."""
    return conn.execute(
        "SELECT 1 FROM entries WHERE app_id = ? AND project_id = ? AND user_id = ? LIMIT 1",
        (ref.app, ref.project, ref.user_id)).fetchone() is not None


def _has_rows(conn: sqlite3.Connection, ref: UserRef) -> bool:
    """Whether any cursor row names ``ref``."""
    return conn.execute(
        "SELECT 1 FROM change_cursor WHERE app_id = ? AND project_id = ? AND user_id = ? "
        "LIMIT 1", (ref.app, ref.project, ref.user_id)).fetchone() is not None


def _names_any(conn: sqlite3.Connection, ref: UserRef, pairs: Sequence[tuple[str, str]]) -> bool:
    """Whether ``ref``'s cursor has a row whose id and text hash are among ``pairs``' (a
    row of another pair's id and text may answer yes: :func:`_follow` then pairs them)."""
    return conn.execute(
        "SELECT 1 FROM change_cursor WHERE app_id = ? AND project_id = ? AND user_id = ? "
        "AND entry_id IN (SELECT json_extract(value, '$[0]') FROM json_each(?)) "
        "AND text_hash IN (SELECT json_extract(value, '$[1]') FROM json_each(?)) LIMIT 1",
        (ref.app, ref.project, ref.user_id, json.dumps(pairs), json.dumps(pairs))
    ).fetchone() is not None


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
